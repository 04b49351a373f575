#pragma once

// Test support for the raw context switch (tern/fiber/context.h), shared by context_test
// (GoogleTest) and context_check (standalone, also cross-built for aarch64): contexts on heap
// stacks with the sanitizer bookkeeping a raw switch needs, the assembly probes in regs_<arch>.S,
// and access to the floating-point control state. Everything here runs on the calling thread only.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>

#include "fiber/sanitizer_hooks.h"
#include "tern/fiber/context.h"

// 1 when the library uses the assembly switch (the register probes only make sense there).
#ifndef TERN_TEST_CONTEXT_ASM
#define TERN_TEST_CONTEXT_ASM 1
#endif

namespace tern::test {

// Shared with regs_<arch>.S; the offsets are fixed there.
struct RegsShared {
  ContextHandle main_ctx = nullptr;  // saved by tern_test_regs_run
  ContextHandle peer_ctx = nullptr;  // the context running tern_test_regs_peer
  std::uint64_t peer_mismatch = 0;   // mismatch bits the peer saw
  std::uint64_t peer_rounds = 0;     // switches the peer made back to main
  std::uint64_t peer_entry_fp = 0;   // MXCSR (x86-64) or FPCR (aarch64) the peer started with
  std::uint64_t peer_entry_x87 = 0;  // x87 control word the peer started with (x86-64)
};
static_assert(offsetof(RegsShared, peer_ctx) == 8 && offsetof(RegsShared, peer_mismatch) == 16 &&
              offsetof(RegsShared, peer_rounds) == 24 &&
              offsetof(RegsShared, peer_entry_fp) == 32 &&
              offsetof(RegsShared, peer_entry_x87) == 40);

// Shared with tern_test_probe_entry; the offsets are fixed in regs_<arch>.S.
struct EntryProbe {
  std::uintptr_t entry_sp = 0;  // the stack pointer the entry function started with
  ContextEntry next = nullptr;  // continues the context on the same stack, given this probe
  void* user = nullptr;         // for `next`
};
static_assert(offsetof(EntryProbe, next) == 8);

}  // namespace tern::test

extern "C" {
// Runs `rounds` switches to shared->peer_ctx with patterns in every callee-saved register and
// the FP control state; returns the mismatches (low 32 bits: this side, high 32: the peer).
std::uint64_t tern_test_regs_run(tern::test::RegsShared* shared, std::uint64_t rounds);
// Context entry for the other side of tern_test_regs_run; `shared` is a RegsShared*.
void tern_test_regs_peer(void* shared);
// Context entry that records its entry stack pointer in an EntryProbe, then runs probe->next.
void tern_test_probe_entry(void* probe);
}

namespace tern::test {

#if defined(__x86_64__)
inline constexpr std::uintptr_t kEntrySpRemainder = 8;  // rsp % 16 at a function's first insn
#elif defined(__aarch64__)
inline constexpr std::uintptr_t kEntrySpRemainder = 0;
#endif

// The floating-point control state a context carries across switches.
struct FpControl {
#if defined(__x86_64__)
  std::uint32_t mxcsr = 0;
  std::uint16_t x87cw = 0;
#elif defined(__aarch64__)
  std::uint64_t fpcr = 0;
#endif
};

// Reads the running thread's floating-point control state.
inline FpControl read_fp_control() {
  FpControl fp;
#if defined(__x86_64__)
  asm volatile("stmxcsr %0" : "=m"(fp.mxcsr));
  asm volatile("fnstcw %0" : "=m"(fp.x87cw));
#elif defined(__aarch64__)
  asm volatile("mrs %0, fpcr" : "=r"(fp.fpcr));
#endif
  return fp;
}

// Sets the running thread's floating-point control state.
inline void write_fp_control(const FpControl& fp) {
#if defined(__x86_64__)
  asm volatile("ldmxcsr %0" : : "m"(fp.mxcsr));
  asm volatile("fldcw %0" : : "m"(fp.x87cw));
#elif defined(__aarch64__)
  asm volatile("msr fpcr, %0" : : "r"(fp.fpcr));
#endif
}

// True when the control bits of `a` and `b` agree (status flags are ignored).
inline bool same_fp_control(const FpControl& a, const FpControl& b) {
#if defined(__x86_64__)
  return (a.mxcsr & 0xffc0u) == (b.mxcsr & 0xffc0u) && (a.x87cw & 0x0f3fu) == (b.x87cw & 0x0f3fu);
#elif defined(__aarch64__)
  return (a.fpcr & 0x07c00000u) == (b.fpcr & 0x07c00000u);
#endif
}

// A control state unlike the default and unlike the patterns in regs_<arch>.S: rounding down.
inline FpControl creation_fp_control() {
  FpControl fp = read_fp_control();
#if defined(__x86_64__)
  fp.mxcsr = 0x3f80;  // all exceptions masked, round toward -infinity
  fp.x87cw = 0x0b7f;  // all exceptions masked, extended precision, round toward +infinity
#elif defined(__aarch64__)
  fp.fpcr = 0x00800000;  // round toward -infinity
#endif
  return fp;
}

// The control state tern_test_regs_peer reported it started with.
inline FpControl peer_entry_fp_control(const RegsShared& shared) {
  FpControl fp;
#if defined(__x86_64__)
  fp.mxcsr = static_cast<std::uint32_t>(shared.peer_entry_fp);
  fp.x87cw = static_cast<std::uint16_t>(shared.peer_entry_x87);
#elif defined(__aarch64__)
  fp.fpcr = shared.peer_entry_fp;
#endif
  return fp;
}

// Formats a control state for messages.
inline std::string to_string(const FpControl& fp) {
  char text[64];
#if defined(__x86_64__)
  std::snprintf(text, sizeof text, "mxcsr=%#x x87cw=%#x", static_cast<unsigned>(fp.mxcsr),
                static_cast<unsigned>(fp.x87cw));
#elif defined(__aarch64__)
  std::snprintf(text, sizeof text, "fpcr=%#llx", static_cast<unsigned long long>(fp.fpcr));
#endif
  return text;
}

// Names the registers set in a tern_test_regs_run result, e.g. "main:rbx,r12 peer:mxcsr".
inline std::string describe_mismatch(std::uint64_t mask) {
#if defined(__x86_64__)
  static constexpr const char* kNames[] = {"rbx", "rbp",   "r12",   "r13", "r14",
                                           "r15", "mxcsr", "x87cw", "arg"};
#elif defined(__aarch64__)
  static constexpr const char* kNames[] = {"x19", "x20", "x21", "x22", "x23", "x24",  "x25",
                                           "x26", "x27", "x28", "x29", "d8",  "d9",   "d10",
                                           "d11", "d12", "d13", "d14", "d15", "fpcr", "arg"};
#endif
  std::string text;
  for (int side = 0; side < 2; ++side) {
    const auto bits = static_cast<std::uint32_t>(mask >> (32 * side));
    if (bits == 0) continue;
    if (!text.empty()) text += ' ';
    text += side == 0 ? "main:" : "peer:";
    const char* separator = "";
    for (std::size_t bit = 0; bit < 32; ++bit) {
      if ((bits & (1u << bit)) == 0) continue;
      text += separator;
      text += bit < std::size(kNames) ? kNames[bit] : "bit" + std::to_string(bit);
      separator = ",";
    }
  }
  return text.empty() ? "none" : text;
}

inline constexpr std::size_t kTestStackSize = 256 * 1024;

// A context: the thread's own (default constructor) or a new one on a heap stack, with the
// sanitizer state that follows it across switches.
class TestContext {
 public:
  // The running thread's own context.
  TestContext() { detail::sanitizer_adopt_thread(sanitizer_); }

  // A new context starting in `entry`; make_context gets the stack minus `top_trim` bytes at the
  // top, so the top it sees need not be aligned.
  explicit TestContext(ContextEntry entry, std::size_t top_trim = 0,
                       std::size_t size = kTestStackSize)
      : stack_(new std::byte[size]) {
    handle_ = make_context(stack_.get(), size - top_trim, entry);
    detail::sanitizer_create(sanitizer_, stack_.get(), size);
  }

  ~TestContext() {
    if (stack_) detail::sanitizer_destroy(sanitizer_);
  }

  TestContext(const TestContext&) = delete;
  TestContext& operator=(const TestContext&) = delete;

  ContextHandle& handle() { return handle_; }
  detail::SanitizerContext& sanitizer() { return sanitizer_; }
  // The stack's lowest address (0 for a thread's own context).
  std::uintptr_t stack_base() const { return reinterpret_cast<std::uintptr_t>(stack_.get()); }

 private:
  std::unique_ptr<std::byte[]> stack_;
  ContextHandle handle_ = nullptr;
  detail::SanitizerContext sanitizer_;
};

// The context the last checked switch on this thread left.
inline thread_local TestContext* switched_from = nullptr;

// Switches from `from` (the running context) to `to`, passing `arg`, and tells the sanitizers;
// returns the arg of the switch that resumes `from`.
inline void* checked_switch(TestContext& from, TestContext& to, void* arg) {
  detail::sanitizer_before_switch(from.sanitizer(), to.sanitizer(), false);
  switched_from = &from;
  void* got = switch_context(&from.handle(), to.handle(), arg);
  detail::sanitizer_after_switch(from.sanitizer(), switched_from->sanitizer());
  return got;
}

// Call first thing in a new context's entry: finishes the switch that started `self`.
inline void landed(TestContext& self) {
  detail::sanitizer_after_switch(self.sanitizer(), switched_from->sanitizer());
}

// Switches from `from` to `to` for the last time: `from` is never resumed.
[[noreturn]] inline void final_switch(TestContext& from, TestContext& to, void* arg) {
  detail::sanitizer_before_switch(from.sanitizer(), to.sanitizer(), true);
  switched_from = &from;
  switch_context(&from.handle(), to.handle(), arg);
  __builtin_trap();
}

// True when an alignas(16) local of a fresh frame is 16-byte aligned, checked at run time (the
// compiler may not assume it) and used with an aligned SSE store on x86-64. Compiled code relies
// on this alignment, so a misaligned stack shows up here.
[[gnu::noinline]] inline bool aligned_local_ok() {
  alignas(16) unsigned char slot[16];  // no initializer: GCC would clear it with movaps
  void* address = slot;
  asm volatile("" : "+r"(address));  // hide where `address` came from
  if (reinterpret_cast<std::uintptr_t>(address) % 16 != 0) return false;
#if defined(__x86_64__)
  asm volatile(
      "pcmpeqd %%xmm0, %%xmm0\n\t"
      "movaps %%xmm0, (%0)"
      :
      : "r"(address)
      : "xmm0", "memory");
#elif defined(__aarch64__)
  asm volatile(
      "movi v16.2d, #0xffffffffffffffff\n\t"
      "str q16, [%0]"
      :
      : "r"(address)
      : "v16", "memory");
#endif
  for (unsigned char byte : slot) {
    if (byte != 0xff) return false;
  }
  return true;
}

}  // namespace tern::test
