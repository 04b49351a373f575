#pragma once

// Contract checks. TERN_ASSERT is always on; TERN_DEBUG_ASSERT only in builds with
// TERN_DEBUG_CHECKS (the default for Debug builds). Both abort with the message and location.

namespace tern::detail {
// Prints "tern: <message> (<expr> at <file>:<line>)" to stderr and aborts. Any thread.
[[noreturn]] void assert_fail(const char* expr, const char* message, const char* file,
                              int line) noexcept;
}  // namespace tern::detail

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
