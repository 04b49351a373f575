#include "tern/fiber/semaphore.h"

#include <mutex>

namespace tern {

Result<void> Semaphore::acquire_until(Deadline deadline) {
  guard_.lock();
  if (permits_ > 0) {
    --permits_;
    guard_.unlock();
    return {};
  }
  // A waker (set/done/release) claims this fiber only once it has handed over what it waits for.
  if (const std::error_code result = detail::wait_for_waker(guard_, waiters_, deadline))
    return fail(result);
  return {};
}

bool Semaphore::try_acquire() noexcept {
  std::lock_guard hold(guard_);
  if (permits_ == 0) return false;
  --permits_;
  return true;
}

void Semaphore::release(std::size_t count) noexcept {
  detail::WaitList claimed;
  guard_.lock();
  while (count > 0) {
    detail::Waiter* next = detail::claim_first(waiters_);
    if (next == nullptr) break;
    claimed.push_back(*next);
    --count;
  }
  permits_ += count;
  guard_.unlock();
  detail::wake_all(claimed);
}

std::size_t Semaphore::available() noexcept {
  std::lock_guard hold(guard_);
  return permits_;
}

}  // namespace tern
