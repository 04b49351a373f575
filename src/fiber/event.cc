#include "tern/fiber/event.h"

#include <mutex>

namespace tern {

void Event::set() noexcept {
  detail::WaitList claimed;
  guard_.lock();
  set_ = true;
  detail::claim_all(waiters_, claimed);
  guard_.unlock();
  detail::wake_all(claimed);
}

void Event::reset() noexcept {
  std::lock_guard hold(guard_);
  set_ = false;
}

bool Event::is_set() noexcept {
  std::lock_guard hold(guard_);
  return set_;
}

Result<void> Event::wait_until(Deadline deadline) {
  guard_.lock();
  if (set_) {
    guard_.unlock();
    return {};
  }
  detail::Waiter waiter;
  const std::error_code result = detail::wait_in(guard_, waiters_, waiter, deadline, true);
  if (waiter.fired) return {};
  return fail(result);
}

}  // namespace tern
