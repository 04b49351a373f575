#pragma once

// Scales stress-test counts down under ThreadSanitizer, whose per-fiber state is large (each
// fiber gets its own TSan context) and whose instrumentation makes every step slower.

namespace tern_test {

#if defined(__SANITIZE_THREAD__)
inline constexpr int kStressDivisor = 20;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr int kStressDivisor = 20;
#else
inline constexpr int kStressDivisor = 1;
#endif
#else
inline constexpr int kStressDivisor = 1;
#endif

// `count` in plain builds, a twentieth of it (at least 1) under ThreadSanitizer.
constexpr int scaled(int count) { return count / kStressDivisor > 0 ? count / kStressDivisor : 1; }

}  // namespace tern_test
