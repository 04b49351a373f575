#pragma once

// Debug-build checks on how fibers are used. In builds without TERN_DEBUG_CHECKS (or with a
// sanitizer, which intercepts the same functions) they compile to nothing.

namespace tern::detail {

#if TERN_MUTEX_CHECK
// How many pthread mutexes (std::mutex included) the calling thread holds. Any thread.
int std_mutexes_held() noexcept;
#else
inline int std_mutexes_held() noexcept { return 0; }
#endif

}  // namespace tern::detail
