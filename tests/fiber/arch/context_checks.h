#pragma once

// The raw context switch checks shared by context_test (GoogleTest) and context_check (the
// standalone program scripts/cross-aarch64 runs under qemu): argument passing, callee-saved
// registers and FP control state (regs_<arch>.S), stack alignment and floating-point work across
// switches. Each check returns "" or a description of the first failure.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "context_harness.h"
#include "tern/fiber/context.h"

namespace tern::test {
namespace {

// Turns a counter into a full-width pointer-sized value (a bijection), so args use all 64 bits.
std::uintptr_t mix(std::uint64_t n) {
  return static_cast<std::uintptr_t>(n * 0x9e3779b97f4a7c15ull);
}

// Wraps a number as a switch arg.
void* as_arg(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

// Unwraps a switch arg.
std::uintptr_t from_arg(void* arg) { return reinterpret_cast<std::uintptr_t>(arg); }

// Formats a failure message.
template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char text[256];
  std::snprintf(text, sizeof text, pattern, args...);
  return text;
}

// --- ping-pong --------------------------------------------------------------------------------

constexpr std::uint64_t kPingPongRounds = 100'000;

// State shared by the ping-pong test and its peer context.
struct PingPong {
  TestContext* main = nullptr;
  TestContext* peer = nullptr;
  std::uint64_t peer_seen = 0;
  std::uint64_t peer_errors = 0;
};

// Entry of the ping-pong peer: answers every value v with ~v until it receives 0.
void ping_pong_peer(void* arg) {
  auto& state = *static_cast<PingPong*>(arg);
  landed(*state.peer);
  void* got = checked_switch(*state.peer, *state.main, &state);
  for (std::uint64_t n = 1; from_arg(got) != 0; ++n) {
    if (from_arg(got) != mix(n)) ++state.peer_errors;
    ++state.peer_seen;
    got = checked_switch(*state.peer, *state.main, as_arg(~from_arg(got)));
  }
  final_switch(*state.peer, *state.main, as_arg(0x5eed));
}

// Switches back and forth, checking the args that travel each way; returns "" or the failure.
std::string check_ping_pong() {
  TestContext main;
  TestContext peer(&ping_pong_peer);
  PingPong state{&main, &peer};
  if (checked_switch(main, peer, &state) != &state) return "first switch: wrong answer";
  std::uint64_t errors = 0;
  for (std::uint64_t n = 1; n <= kPingPongRounds; ++n) {
    if (from_arg(checked_switch(main, peer, as_arg(mix(n)))) != ~mix(n)) ++errors;
  }
  const std::uintptr_t last = from_arg(checked_switch(main, peer, nullptr));
  if (errors != 0 || state.peer_errors != 0 || state.peer_seen != kPingPongRounds ||
      last != 0x5eed) {
    return format(
        "main errors %llu, peer errors %llu, peer saw %llu of %llu, last %#llx",
        static_cast<unsigned long long>(errors), static_cast<unsigned long long>(state.peer_errors),
        static_cast<unsigned long long>(state.peer_seen),
        static_cast<unsigned long long>(kPingPongRounds), static_cast<unsigned long long>(last));
  }
  return "";
}

// --- registers and FP control state -------------------------------------------------------------

// Runs the assembly register probe; returns "" or the failure.
std::string check_registers() {
  const FpControl before = read_fp_control();
  TestContext peer(&tern_test_regs_peer);
  RegsShared shared;
  shared.peer_ctx = peer.handle();
  constexpr std::uint64_t kRounds = 1'000;
  const std::uint64_t mismatch = tern_test_regs_run(&shared, kRounds);
  if (mismatch != 0) return "clobbered: " + describe_mismatch(mismatch);
  if (shared.peer_rounds != kRounds) return "the peer ran a wrong number of rounds";
  if (!same_fp_control(read_fp_control(), before)) return "caller's FP control not restored";
  return "";
}

// Checks that a new context starts with the FP control state current when it was made, not
// that of the context switching to it; returns "" or the failure.
std::string check_creator_fp_control() {
  const FpControl original = read_fp_control();
  write_fp_control(creation_fp_control());
  TestContext peer(&tern_test_regs_peer);
  write_fp_control(original);
  RegsShared shared;
  shared.peer_ctx = peer.handle();
  const std::uint64_t mismatch = tern_test_regs_run(&shared, 1);
  if (mismatch != 0) return "clobbered: " + describe_mismatch(mismatch);
  const FpControl seen = peer_entry_fp_control(shared);
  if (!same_fp_control(seen, creation_fp_control())) {
    return "peer started with " + to_string(seen) + ", expected " +
           to_string(creation_fp_control());
  }
  return "";
}

// --- stack alignment ----------------------------------------------------------------------------

constexpr int kAlignRounds = 8;

// State of one alignment run; `probe` is what tern_test_probe_entry receives.
struct AlignRun {
  EntryProbe probe;
  TestContext* main = nullptr;
  TestContext* self = nullptr;
  int misaligned_locals = 0;
};

// Continuation of tern_test_probe_entry: checks an aligned local after each of several switches.
void align_continuation(void* probe) {
  auto& run = *static_cast<AlignRun*>(static_cast<EntryProbe*>(probe)->user);
  landed(*run.self);
  for (int round = 0; round < kAlignRounds; ++round) {
    if (!aligned_local_ok()) ++run.misaligned_locals;
    checked_switch(*run.self, *run.main, nullptr);
  }
  if (!aligned_local_ok()) ++run.misaligned_locals;
  final_switch(*run.self, *run.main, nullptr);
}

// Checks the entry stack pointer and aligned locals for every stack-top misalignment; returns ""
// or the first failure.
std::string check_stack_alignment() {
  if (!aligned_local_ok()) return "the thread's own stack is misaligned";
  for (std::size_t trim = 0; trim < 48; ++trim) {
    TestContext main;
    TestContext context(&tern_test_probe_entry, trim);
    AlignRun run;
    run.probe.next = &align_continuation;
    run.probe.user = &run;
    run.main = &main;
    run.self = &context;
    int main_misaligned = 0;
    for (int round = 0; round <= kAlignRounds; ++round) {
      checked_switch(main, context, &run.probe);
      if (!aligned_local_ok()) ++main_misaligned;
    }
    const std::uintptr_t top = context.stack_base() + kTestStackSize - trim;
    if (run.probe.entry_sp % 16 != kEntrySpRemainder) {
      return format("trim %zu: entry sp %% 16 = %zu, expected %zu", trim,
                    static_cast<std::size_t>(run.probe.entry_sp % 16),
                    static_cast<std::size_t>(kEntrySpRemainder));
    }
    if (run.probe.entry_sp >= top || run.probe.entry_sp <= top - 4096) {
      return format("trim %zu: entry sp %#zx is not just below the top %#zx", trim,
                    static_cast<std::size_t>(run.probe.entry_sp), static_cast<std::size_t>(top));
    }
    if (run.misaligned_locals != 0 || main_misaligned != 0) {
      return format("trim %zu: misaligned locals: context %d, main %d", trim, run.misaligned_locals,
                    main_misaligned);
    }
  }
  return "";
}

// --- floating point -----------------------------------------------------------------------------

constexpr int kFpSteps = 2'000;

// One step of a recurrence; out of line, so the interleaved and the straight runs execute the
// same instructions and must agree to the last bit.
[[gnu::noinline]] double fp_step(double acc, int k, double scale) {
  return acc * 0.9990234375 + std::sqrt(k * scale) / (k + 0.5) - 1.0 / (acc * acc + k);
}

// Four doubles advanced together (more live FP values than one register).
struct FpLanes {
  double a, b, c, d;
  bool operator==(const FpLanes&) const = default;
};

// Runs the recurrence on `lanes` for kFpSteps steps without switching.
FpLanes fp_reference(FpLanes lanes) {
  for (int k = 1; k <= kFpSteps; ++k) {
    lanes = {fp_step(lanes.a, k, 1.0), fp_step(lanes.b, k, 2.5), fp_step(lanes.c, k, 0.25),
             fp_step(lanes.d, k, 7.0)};
  }
  return lanes;
}

// State shared by the floating-point test and its worker context.
struct FpRun {
  TestContext* main = nullptr;
  TestContext* worker = nullptr;
  FpLanes worker_result{};
};

constexpr FpLanes kMainSeed{1.0, 2.0, 0.5, -3.0};
constexpr FpLanes kWorkerSeed{-7.25, 0.125, 3.0, 11.0};

// Entry of the FP worker: runs the recurrence from kWorkerSeed, switching to main after each step.
void fp_worker(void* arg) {
  auto& run = *static_cast<FpRun*>(arg);
  landed(*run.worker);
  double a = kWorkerSeed.a, b = kWorkerSeed.b, c = kWorkerSeed.c, d = kWorkerSeed.d;
  for (int k = 1; k <= kFpSteps; ++k) {
    a = fp_step(a, k, 1.0);
    b = fp_step(b, k, 2.5);
    c = fp_step(c, k, 0.25);
    d = fp_step(d, k, 7.0);
    checked_switch(*run.worker, *run.main, nullptr);
  }
  run.worker_result = {a, b, c, d};
  final_switch(*run.worker, *run.main, nullptr);
}

// Runs the recurrence in two contexts, interleaved step by step; returns "" or the failure.
std::string check_floating_point() {
  TestContext main;
  TestContext worker(&fp_worker);
  FpRun run{&main, &worker};
  double a = kMainSeed.a, b = kMainSeed.b, c = kMainSeed.c, d = kMainSeed.d;
  for (int k = 1; k <= kFpSteps; ++k) {
    checked_switch(main, worker, &run);
    a = fp_step(a, k, 1.0);
    b = fp_step(b, k, 2.5);
    c = fp_step(c, k, 0.25);
    d = fp_step(d, k, 7.0);
  }
  checked_switch(main, worker, nullptr);
  if (!(FpLanes{a, b, c, d} == fp_reference(kMainSeed))) return "main's values changed";
  if (!(run.worker_result == fp_reference(kWorkerSeed))) return "the worker's values changed";
  return "";
}

}  // namespace
}  // namespace tern::test
