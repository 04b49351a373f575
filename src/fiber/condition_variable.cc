#include "tern/fiber/condition_variable.h"

#include "tern/base/assert.h"
#include "tern/fiber/detail/parked_node.h"

namespace tern {

void ConditionVariable::notify_one() noexcept {
  guard_.lock();
  detail::Waiter* next = detail::claim_first(waiters_);
  guard_.unlock();
  if (next != nullptr) detail::wake(*next);
}

void ConditionVariable::notify_all() noexcept {
  detail::WaitList claimed;
  guard_.lock();
  detail::claim_all(waiters_, claimed);
  guard_.unlock();
  detail::wake_all(claimed);
}

Result<void> ConditionVariable::wait_until(std::unique_lock<Mutex>& lock, Deadline deadline) {
  TERN_ASSERT(lock.owns_lock(), "ConditionVariable::wait needs the lock held");
  detail::FiberControl* self = detail::current_fiber("tern::ConditionVariable::wait");
  const detail::ParkedNode<detail::Waiter> node(detail::parks_off_stack());
  detail::Waiter& waiter = *node;
  waiter.fiber = self;
  detail::begin_wait(self);
  guard_.lock();
  waiters_.push_back(waiter);
  guard_.unlock();
  lock.unlock();
  const std::error_code result = detail::wait(self, deadline, true);
  if (!waiter.fired) {
    guard_.lock();
    detail::withdraw(waiters_, waiter);
    guard_.unlock();
  }
  lock.lock();
  if (waiter.fired) return {};
  return fail(result);
}

}  // namespace tern
