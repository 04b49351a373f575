#pragma once

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "tern/base/clock.h"

namespace tern {

// The kernel's coarse reading of Clock (CLOCK_MONOTONIC_COARSE): a few ns where a precise read
// costs tens to a hundred on a virtual machine, but behind it: by up to coarse_resolution(), more
// after a stall of the virtual CPU; never ahead. Any thread.
inline Deadline coarse_now() noexcept {
  timespec now = {};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return Deadline(std::chrono::duration_cast<Clock::duration>(
      std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec)));
}

namespace detail {
// The coarse clock's step as the kernel gives it (clock_getres; 10 ms if it refuses), in ns,
// stored in `cache` for coarse_resolution(). Any thread.
std::int64_t read_coarse_resolution(std::atomic<std::int64_t>& cache) noexcept;
}  // namespace detail

// The coarse clock's step: one kernel tick (1 to 4 ms). Any thread.
inline std::chrono::nanoseconds coarse_resolution() noexcept {
  // Asked of the kernel once (threads racing on the first call store the same value), then a
  // plain load: no guard variable, and no call on the way.
  static constinit std::atomic<std::int64_t> cache{0};
  std::int64_t ns = cache.load(std::memory_order_relaxed);
  if (ns == 0) [[unlikely]]
    ns = detail::read_coarse_resolution(cache);
  return std::chrono::nanoseconds(ns);
}

// coarse_deadline_after(timeout) below, from a coarse_now() reading the caller made, for a
// timeout over zero. Any thread.
inline Deadline coarse_deadline_after(std::chrono::nanoseconds timeout,
                                      Deadline coarse_reading) noexcept {
  const std::chrono::nanoseconds margin = 2 * coarse_resolution();
  if (timeout >= std::chrono::nanoseconds::max() - margin) return kNoDeadline;  // no overflow
  const std::chrono::nanoseconds wait = timeout + margin;
  if (wait >= kNoDeadline - coarse_reading) return kNoDeadline;
  return coarse_reading + std::chrono::duration_cast<Clock::duration>(wait);
}

// deadline_after for a long timeout renewed on every operation (a connection's idle timeout),
// from coarse_now() plus two ticks: later than deadline_after's by at most two ticks, and never
// sooner unless the coarse clock lagged more than that (a virtual CPU the host stalled for as
// long). Any thread.
inline Deadline coarse_deadline_after(std::chrono::nanoseconds timeout) noexcept {
  if (timeout <= timeout.zero()) return deadline_after(timeout);
  return coarse_deadline_after(timeout, coarse_now());
}

}  // namespace tern
