#pragma once

#include <chrono>
#include <cstddef>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

// A counting semaphore for fibers; permits go to waiters in arrival order. acquire* from
// worker fibers (interruptible: operation_canceled); try_acquire and release from any thread.
class Semaphore {
 public:
  explicit Semaphore(std::size_t initial = 0) noexcept : permits_(initial) {}
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // Waits for a permit and takes it.
  [[nodiscard]] Result<void> acquire() { return acquire_until(kNoDeadline); }
  // As acquire(), giving up at the deadline with tern::deadline_exceeded().
  [[nodiscard]] Result<void> acquire_until(Deadline deadline);
  // As acquire_until(), with a timeout.
  template <typename Rep, typename Period>
  [[nodiscard]] Result<void> acquire_for(std::chrono::duration<Rep, Period> timeout) {
    return acquire_until(deadline_after(timeout));
  }
  // Takes a permit if one is free; returns whether it did.
  bool try_acquire() noexcept;
  // Adds `count` permits, handing them to waiters first.
  void release(std::size_t count = 1) noexcept;
  // Free permits now (a snapshot).
  std::size_t available() noexcept;

 private:
  SpinLock guard_;
  std::size_t permits_;
  detail::WaitList waiters_;
};

}  // namespace tern
