#pragma once

#include <cstddef>

// The raw execution-context switch under tern's fibers. Most programs use tern::spawn instead;
// this is public for benchmarks and for code that builds its own scheduler. A context is a
// saved stack pointer; everything else it needs (callee-saved registers, the x87 control word
// and MXCSR on x86-64, d8-d15 and FPCR on aarch64) lives on its own stack.

namespace tern {

// An opaque saved context: the value to switch to.
using ContextHandle = void*;

// The function a new context starts in. `arg` is what the first switch into it passed.
// It must never return; it leaves by switching to another context.
using ContextEntry = void (*)(void* arg);

// Prepares a context that starts in `entry` on the stack [stack_base, stack_base + size).
// The stack's top 16-byte-aligned end is used; no memory is allocated. Any thread.
ContextHandle make_context(void* stack_base, std::size_t size, ContextEntry entry) noexcept;

}  // namespace tern

extern "C" void* tern_switch_context(tern::ContextHandle* save, tern::ContextHandle to,
                                     void* arg) noexcept;

namespace tern {

// Saves the running context into *save and resumes `to`, passing `arg`. Returns, when some
// later switch resumes the saved context, the `arg` that switch passed. Called from the
// context being left (any thread, but a context runs on one thread at a time).
inline void* switch_context(ContextHandle* save, ContextHandle to, void* arg) noexcept {
  return tern_switch_context(save, to, arg);
}

}  // namespace tern
