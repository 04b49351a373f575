#pragma once

// CPU time and blocking of the calling thread, for tests that check whether a waiting thread
// spins or sleeps.

#include <sys/resource.h>
#include <time.h>

#include <chrono>

namespace tern_test {

// CPU time the calling thread has used so far.
inline std::chrono::nanoseconds thread_cpu_time() {
  timespec now = {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

// How many times the calling thread has blocked in the kernel so far (voluntary context
// switches): a thread that spins or polls adds none, however little CPU a busy machine gives it.
inline long voluntary_switches() {
  rusage usage = {};
  ::getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

}  // namespace tern_test
