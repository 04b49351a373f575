#pragma once

#include <chrono>

#include "tern/base/clock.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

// A mutual-exclusion lock for fibers: a fiber that waits for it parks and lets its worker run
// other fibers. Fair: unlock hands the lock to the longest waiter. Works between fibers on
// the same or different workers; meets the Lockable requirements (std::unique_lock works).
// lock/unlock from worker fibers; try_lock from any thread.
class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Waits until the lock is free and takes it. Not interruptible.
  void lock();
  // Takes the lock if it is free; returns whether it did.
  bool try_lock() noexcept;
  // Waits until the lock is taken (true) or the deadline passes (false). Not interruptible.
  bool try_lock_until(Deadline deadline);
  // Like try_lock_until, with a timeout.
  template <typename Rep, typename Period>
  bool try_lock_for(std::chrono::duration<Rep, Period> timeout) {
    return try_lock_until(deadline_after(timeout));
  }
  // Releases the lock, handing it to the first waiter if there is one.
  void unlock() noexcept;

 private:
  SpinLock guard_;
  bool locked_ = false;
  detail::WaitList waiters_;
};

}  // namespace tern
