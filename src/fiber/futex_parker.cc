#include "futex_parker.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

namespace tern::detail {

void FutexParker::park(Deadline deadline) {
  if (notified_.exchange(0, std::memory_order_acquire) != 0) return;
  if (deadline == Deadline::min()) return;
  struct timespec absolute = {};
  struct timespec* timeout = nullptr;
  if (deadline != kNoDeadline) {
    // steady_clock is CLOCK_MONOTONIC on Linux, which FUTEX_WAIT_BITSET takes as absolute.
    const auto since_epoch = deadline.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    absolute.tv_sec = static_cast<time_t>(seconds.count());
    absolute.tv_nsec = static_cast<long>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds).count());
    timeout = &absolute;
  }
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&notified_), FUTEX_WAIT_BITSET_PRIVATE, 0u,
            timeout, nullptr, FUTEX_BITSET_MATCH_ANY);
  // A notification that arrives after the wait is kept for the next park(), which then
  // returns at once; the scheduler re-checks its queues either way.
}

void FutexParker::unpark() noexcept {
  if (notified_.exchange(1, std::memory_order_release) == 0) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&notified_), FUTEX_WAKE_PRIVATE, 1,
              nullptr, nullptr, 0);
  }
}

}  // namespace tern::detail
