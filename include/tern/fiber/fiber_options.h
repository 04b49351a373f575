#pragma once

#include <cstddef>
#include <string_view>

namespace tern {

// The default usable stack size of a fiber (lazily committed; a sleeping fiber uses ~4 KiB).
inline constexpr std::size_t kDefaultStackSize = 64 * 1024;

// How to create a fiber.
struct FiberOptions {
  std::string_view name = {};                  // shown in diagnostics; copied, up to 31 chars
  std::size_t stack_size = kDefaultStackSize;  // usable bytes, rounded up to whole pages
};

}  // namespace tern
