#include "tern/fiber/wait_group.h"

#include <mutex>

#include "tern/base/assert.h"

namespace tern {

void WaitGroup::add(std::size_t count) noexcept {
  std::lock_guard hold(guard_);
  pending_ += count;
}

void WaitGroup::done() noexcept {
  detail::WaitList claimed;
  guard_.lock();
  if (pending_ == 0) {
    guard_.unlock();
    TERN_ASSERT(false, "WaitGroup::done called more often than add");
  }
  if (--pending_ == 0) detail::claim_all(waiters_, claimed);
  guard_.unlock();
  detail::wake_all(claimed);
}

std::size_t WaitGroup::pending() noexcept {
  std::lock_guard hold(guard_);
  return pending_;
}

Result<void> WaitGroup::wait_until(Deadline deadline) {
  guard_.lock();
  if (pending_ == 0) {
    guard_.unlock();
    return {};
  }
  // A waker (set/done/release) claims this fiber only once it has handed over what it waits for.
  if (const std::error_code result = detail::wait_for_waker(guard_, waiters_, deadline))
    return fail(result);
  return {};
}

}  // namespace tern
