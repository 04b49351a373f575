#include "tern/fiber/mutex.h"

#include <mutex>

#include "tern/fiber/detail/parked_node.h"

namespace tern {

void Mutex::lock() { try_lock_until(kNoDeadline); }

bool Mutex::try_lock() noexcept {
  std::lock_guard hold(guard_);
  if (locked_) return false;
  locked_ = true;
  return true;
}

bool Mutex::try_lock_until(Deadline deadline) {
  guard_.lock();
  if (!locked_) {
    locked_ = true;
    guard_.unlock();
    return true;
  }
  const detail::ParkedNode<detail::Waiter> waiter(detail::parks_off_stack());
  waiter->fiber = detail::current_fiber("tern::Mutex::lock");
  detail::wait_in(guard_, waiters_, *waiter, deadline, false);
  return waiter->fired;  // fired: unlock() handed the lock over
}

void Mutex::unlock() noexcept {
  guard_.lock();
  detail::Waiter* next = detail::claim_first(waiters_);
  if (next == nullptr) locked_ = false;
  guard_.unlock();
  if (next != nullptr) detail::wake(*next);
}

}  // namespace tern
