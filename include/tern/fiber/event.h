#pragma once

#include <chrono>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

// A manual-reset event: set() wakes every waiter and lets later waits pass until reset().
// wait* from worker fibers (interruptible: operation_canceled); the rest from any thread.
class Event {
 public:
  Event() = default;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  // Sets the event and wakes every waiter.
  void set() noexcept;
  // Clears the event; later waits block until the next set().
  void reset() noexcept;
  // Whether the event is set now.
  bool is_set() noexcept;
  // Waits until the event is set.
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
  bool set_ = false;
  detail::WaitList waiters_;
};

}  // namespace tern
