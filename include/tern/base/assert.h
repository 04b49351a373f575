#pragma once

// Contract checks and the one fatal-error path. TERN_FATAL formats a message, prints
//   tern: <message> (<file>:<line>, fiber "<name>" (id <n>) on worker <w>)
// (the part after file:line comes from the context provider, see below) as one line on stderr
// and aborts. TERN_ASSERT is always on; TERN_DEBUG_ASSERT only in builds with TERN_DEBUG_CHECKS
// (the default for Debug builds). Both go through the same path.

#include <cstddef>
#include <string_view>

#include <fmt/core.h>

namespace tern {

// Writes what a fatal message should say about the calling thread (e.g. `fiber "reader" (id 7)
// on worker 2`) to out, at most capacity bytes without a terminating NUL, and returns how many;
// 0 to say nothing. Must be async-signal-safe: it runs in the stack-overflow handler too.
using FatalContextProvider = std::size_t (*)(char* out, std::size_t capacity) noexcept;

// Installs the fatal-message context provider (the fiber layer does; nullptr removes it).
// Any thread.
void set_fatal_context_provider(FatalContextProvider provider) noexcept;

namespace detail {

// Formats the message (into a fixed buffer: no allocation for built-in argument types), prints
// the fatal line and aborts. Any thread. Use TERN_FATAL.
[[noreturn]] void fatal_formatted(const char* file, int line, fmt::string_view format,
                                  fmt::format_args args) noexcept;

// Prints the fatal line for an already composed message, calls before_abort (when not null),
// then aborts. Async-signal-safe (no allocation, no locks, only write(2)), given a signal-safe
// before_abort. Any thread, signal handlers included.
[[noreturn]] void fatal_message(const char* file, int line, std::string_view message,
                                void (*before_abort)() noexcept = nullptr) noexcept;

// Prints "tern: <message> [failed: <expr>] (<file>:<line>, ...)" and aborts. Any thread.
[[noreturn]] void assert_fail(const char* expr, const char* message, const char* file,
                              int line) noexcept;

// The type-checked front of TERN_FATAL. Any thread.
template <typename... Args>
[[noreturn]] void fatal(const char* file, int line, fmt::format_string<Args...> format,
                        Args&&... args) noexcept {
  fatal_formatted(file, line, format, fmt::make_format_args(args...));
}

}  // namespace detail

}  // namespace tern

// Prints `tern: <formatted message> (<file>:<line>, <fiber and worker>)` to stderr and aborts;
// fmt syntax, checked at compile time: TERN_FATAL("cannot map {} bytes: {}", n, e.message()).
// Any thread.
#define TERN_FATAL(...) ::tern::detail::fatal(__FILE__, __LINE__, __VA_ARGS__)

#define TERN_ASSERT(cond, message)                                       \
  do {                                                                   \
    if (__builtin_expect(!(cond), 0))                                    \
      ::tern::detail::assert_fail(#cond, (message), __FILE__, __LINE__); \
  } while (0)

#if TERN_DEBUG_CHECKS
#define TERN_DEBUG_ASSERT(cond, message) TERN_ASSERT(cond, message)
#else
#define TERN_DEBUG_ASSERT(cond, message) \
  do {                                   \
  } while (0)
#endif
