#include "shared_stack.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fiber_control.h"
#include "tern/base/assert.h"
#include "tern/fiber/fiber_options.h"

namespace tern::detail {

namespace {

// Bytes a debug build writes over a freed shared stack: an address or count read from them is
// absurd enough to fail loudly.
[[maybe_unused]] constexpr unsigned char kScrubByte = 0xdb;

char* top_of(const Stack& stack) noexcept { return static_cast<char*>(stack.base) + stack.size; }

}  // namespace

SharedStack::~SharedStack() { unmap_stack(stack_); }

Result<void> SharedStack::map() {
  if (mapped()) return {};
  Result<Stack> stack = map_stack(kSharedStackSize);
  if (!stack) return fail(stack.error());
  stack_ = *stack;
  return {};
}

void SharedStack::load(FiberControl* fiber, ContextEntry entry) noexcept {
  TERN_ASSERT(occupant_ == nullptr, "tern: shared stack loaded while another fiber is on it");
#if TERN_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack_.base, stack_.size);
#endif
  occupant_ = fiber;
  if (fiber->context == nullptr) {  // first run
    fiber->context = make_context(stack_.base, stack_.size, entry);
    return;
  }
  std::memcpy(top_of(stack_) - fiber->saved_size, fiber->saved_stack, fiber->saved_size);
}

void SharedStack::evict() noexcept {
  FiberControl* fiber = occupant_;
  char* const top = top_of(stack_);
  char* const sp = static_cast<char*>(fiber->context);
  TERN_ASSERT(sp >= static_cast<char*>(stack_.base) && sp < top,
              "tern: a shared-stack fiber's saved stack pointer is off its stack");
  const auto used = static_cast<std::size_t>(top - sp);
  // A buffer of about the size in use: keep it unless it is too small or far too large.
  if (fiber->saved_capacity < used || fiber->saved_capacity > 2 * used + 256) {
    std::free(fiber->saved_stack);
    fiber->saved_stack = std::malloc(used);
    TERN_ASSERT(fiber->saved_stack != nullptr, "tern: out of memory saving a shared stack");
    fiber->saved_capacity = static_cast<std::uint32_t>(used);
  }
#if TERN_ASAN
  // The frames' red zones are poisoned; the copy reads them as plain bytes.
  ASAN_UNPOISON_MEMORY_REGION(sp, used);
#endif
  std::memcpy(fiber->saved_stack, sp, used);
  fiber->saved_size = static_cast<std::uint32_t>(used);
  occupant_ = nullptr;
  scrub(used);
}

void SharedStack::drop() noexcept {
  occupant_ = nullptr;
  scrub(stack_.size);
}

void SharedStack::scrub([[maybe_unused]] std::size_t from_top) noexcept {
#if TERN_DEBUG_CHECKS
#if TERN_ASAN
  ASAN_UNPOISON_MEMORY_REGION(stack_.base, stack_.size);
#endif
  // Only the part a fiber used has pages worth writing; the rest stays uncommitted.
  const std::size_t length = from_top < stack_.size ? from_top : stack_.size;
  std::memset(top_of(stack_) - length, kScrubByte, length);
#endif
#if TERN_ASAN
  ASAN_POISON_MEMORY_REGION(stack_.base, stack_.size);
#endif
}

void SharedStack::free_saved(FiberControl* fiber) noexcept {
  std::free(fiber->saved_stack);
  fiber->saved_stack = nullptr;
  fiber->saved_size = 0;
  fiber->saved_capacity = 0;
}

}  // namespace tern::detail
