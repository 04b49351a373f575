#pragma once

#include <chrono>
#include <mutex>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"
#include "tern/fiber/mutex.h"

namespace tern {

// A condition variable for fibers, used with tern::Mutex. Waits are interruptible: they
// return std::errc::operation_canceled when the fiber is interrupted or the runtime stops
// (the mutex is held again either way). wait* from worker fibers; notify* from any thread.
class ConditionVariable {
 public:
  ConditionVariable() = default;
  ConditionVariable(const ConditionVariable&) = delete;
  ConditionVariable& operator=(const ConditionVariable&) = delete;

  // Wakes one waiting fiber, if any.
  void notify_one() noexcept;
  // Wakes every waiting fiber.
  void notify_all() noexcept;

  // Releases the lock, waits for a notification, and takes the lock again.
  [[nodiscard]] Result<void> wait(std::unique_lock<Mutex>& lock) {
    return wait_until(lock, kNoDeadline);
  }
  // As wait(), giving up at the deadline with tern::deadline_exceeded().
  [[nodiscard]] Result<void> wait_until(std::unique_lock<Mutex>& lock, Deadline deadline);
  // As wait_until(), with a timeout.
  template <typename Rep, typename Period>
  [[nodiscard]] Result<void> wait_for(std::unique_lock<Mutex>& lock,
                                      std::chrono::duration<Rep, Period> timeout) {
    return wait_until(lock, deadline_after(timeout));
  }
  // Waits until pred() is true (checked with the lock held). Fails only on timeout or
  // interruption, and then pred() was false at the last check.
  template <typename Pred>
  [[nodiscard]] Result<void> wait_until(std::unique_lock<Mutex>& lock, Deadline deadline,
                                        Pred pred) {
    while (!pred()) {
      Result<void> woken = wait_until(lock, deadline);
      if (!woken) return pred() ? Result<void>{} : woken;
    }
    return {};
  }
  // As wait_until() with a predicate, with a timeout.
  template <typename Rep, typename Period, typename Pred>
  [[nodiscard]] Result<void> wait_for(std::unique_lock<Mutex>& lock,
                                      std::chrono::duration<Rep, Period> timeout, Pred pred) {
    return wait_until(lock, deadline_after(timeout), std::move(pred));
  }
  // Waits until pred() is true, without a deadline.
  template <typename Pred>
  [[nodiscard]] Result<void> wait(std::unique_lock<Mutex>& lock, Pred pred) {
    return wait_until(lock, kNoDeadline, std::move(pred));
  }

 private:
  SpinLock guard_;
  detail::WaitList waiters_;
};

}  // namespace tern
