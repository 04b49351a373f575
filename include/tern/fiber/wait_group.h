#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

// Waits for a group of tasks to finish, as Go's sync.WaitGroup: add() before starting each,
// done() when each ends, wait() until the count is zero. wait* from worker fibers
// (interruptible: operation_canceled); add and done from any thread.
class WaitGroup {
 public:
  WaitGroup() = default;
  WaitGroup(const WaitGroup&) = delete;
  WaitGroup& operator=(const WaitGroup&) = delete;

  // Adds `count` tasks to wait for.
  void add(std::size_t count = 1) noexcept;
  // Marks one task done; the last one wakes every waiter. Aborts if the count would go below 0.
  void done() noexcept;
  // Tasks not done yet (a snapshot).
  std::size_t pending() noexcept;
  // Waits until every task added is done.
  [[nodiscard]] Result<void> wait() { return wait_until(kNoDeadline); }
  // As wait(), giving up at the deadline with tern::deadline_exceeded().
  [[nodiscard]] Result<void> wait_until(Deadline deadline);
  // As wait_until(), with a timeout.
  template <typename Rep, typename Period>
  [[nodiscard]] Result<void> wait_for(std::chrono::duration<Rep, Period> timeout) {
    return wait_until(deadline_after(timeout));
  }

 private:
  SpinLock guard_;
  std::size_t pending_ = 0;
  detail::WaitList waiters_;
};

}  // namespace tern
