#pragma once

#include <cstddef>
#include <string_view>

namespace tern {

// The default usable stack size of a fiber (lazily committed; a sleeping fiber uses ~4 KiB).
inline constexpr std::size_t kDefaultStackSize = 64 * 1024;

// Where a fiber's stack lives (docs/guide.md, "Shared stacks").
enum class StackMode : unsigned char {
  own,     // a stack of its own (stack_size bytes, lazily committed); the default
  shared,  // the worker's shared stack; the used part is copied to the heap while it is parked
};

// The usable size of a worker's shared stack: the deepest a shared-stack fiber may go.
inline constexpr std::size_t kSharedStackSize = 256 * 1024;

// How to create a fiber.
struct FiberOptions {
  std::string_view name = {};                  // shown in diagnostics; copied, up to 31 chars
  std::size_t stack_size = kDefaultStackSize;  // usable bytes, rounded up to whole pages
  // StackMode::shared trades a copy of the used stack per park and resume for memory: for
  // fibers that sleep most of the time. They must not hand out pointers into their own stack
  // that others use while they are parked (docs/guide.md, "Shared stacks"). stack_size is then
  // ignored.
  StackMode stack_mode = StackMode::own;
};

namespace detail {

// The options of a spawn that names none (one object, not a temporary built per spawn).
inline constexpr FiberOptions kDefaultFiberOptions{};

}  // namespace detail

}  // namespace tern
