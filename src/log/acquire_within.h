#pragma once

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace tern::log::detail {

// CLOCK_MONOTONIC in nanoseconds (async-signal-safe). Any thread.
inline std::uint64_t monotonic_ns() noexcept {
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(now.tv_nsec);
}

// Calls acquire() (a try-lock) until it succeeds or wait_ns have passed, yielding the CPU between
// attempts; whether it succeeded. Never blocks longer than the wait. Any thread.
template <typename Acquire>
bool acquire_within(std::uint64_t wait_ns, Acquire acquire) noexcept {
  const std::uint64_t deadline = monotonic_ns() + wait_ns;
  while (!acquire()) {
    if (monotonic_ns() > deadline) return false;
    ::sched_yield();
  }
  return true;
}

}  // namespace tern::log::detail
