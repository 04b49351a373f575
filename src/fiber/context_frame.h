#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "tern/fiber/context.h"

// make_context for the assembly switches, inline: a spawn builds its fiber's first frame without
// a call (which would make create_fiber save and restore six registers around it).

#if TERN_CONTEXT_ASM
extern "C" void tern_context_trampoline();
#endif

namespace tern::detail {

// What make_context does (tern/fiber/context.h). Any thread.
inline ContextHandle new_context(void* stack_base, std::size_t size, ContextEntry entry) noexcept {
#if TERN_CONTEXT_ASM
  const auto top = (reinterpret_cast<std::uintptr_t>(stack_base) + size) & ~std::uintptr_t{15};
#if defined(__x86_64__)
  // Frame popped by the first switch into this context; see switch_x86_64.S. 16 spare bytes
  // above it keep the trampoline's stack 16-byte aligned with room for the zero return address
  // it pushes. Only the slots the trampoline reads are written: the callee-saved registers the
  // switch pops from the others mean nothing to it (it clears rbp itself).
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 80);
  std::uint32_t mxcsr;
  std::uint16_t x87cw;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(x87cw));
  std::memcpy(reinterpret_cast<char*>(frame), &mxcsr, sizeof mxcsr);
  std::memcpy(reinterpret_cast<char*>(frame) + 4, &x87cw, sizeof x87cw);
  frame[5] = reinterpret_cast<std::uint64_t>(entry);                     // rbx
  frame[7] = reinterpret_cast<std::uint64_t>(&tern_context_trampoline);  // resume address
  return frame;
#elif defined(__aarch64__)
  auto* frame = reinterpret_cast<std::uint64_t*>(top - 176 - 16);
  std::memset(frame, 0, 176);
  std::uint64_t fpcr;
  asm volatile("mrs %0, fpcr" : "=r"(fpcr));
  frame[0] = reinterpret_cast<std::uint64_t>(entry);                      // x19
  frame[11] = reinterpret_cast<std::uint64_t>(&tern_context_trampoline);  // x30
  frame[20] = fpcr;
  return frame;
#else
#error "tern has no context switch for this architecture; build with TERN_CONTEXT=ucontext"
#endif
#else
  return make_context(stack_base, size, entry);
#endif
}

}  // namespace tern::detail
