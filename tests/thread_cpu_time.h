#pragma once

// CPU time of the calling thread, for tests that check a waiting thread does not spin.

#include <time.h>

#include <chrono>

namespace tern_test {

// CPU time the calling thread has used so far.
inline std::chrono::nanoseconds thread_cpu_time() {
  timespec now = {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

}  // namespace tern_test
