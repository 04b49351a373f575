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
  // A waker (set/done/release) claims this fiber only once it has handed over what it waits for.
  if (const std::error_code result = detail::wait_for_waker(guard_, waiters_, deadline))
    return fail(result);
  return {};
}

}  // namespace tern
