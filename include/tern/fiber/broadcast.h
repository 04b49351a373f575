#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "tern/base/assert.h"
#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

// Publish/subscribe: every Subscriber receives a copy of every value published after it
// subscribed. publish() never waits; it keeps the last `capacity` values, and a subscriber
// that falls further behind gets Errc::lagged once (missed() counts what it lost) and goes on
// from the oldest value kept. close() ends it: subscribers drain what is kept, then get
// Errc::closed. publish, close and subscribe from any thread; Subscriber::recv* from worker
// fibers. A Broadcast must outlive its subscribers.
template <typename T>
class Broadcast {
 public:
  // A broadcast that keeps the last `capacity` values (at least 1) for slow subscribers.
  explicit Broadcast(std::size_t capacity) : capacity_(capacity) {
    TERN_ASSERT(capacity >= 1, "a Broadcast needs a capacity of at least 1");
  }
  Broadcast(const Broadcast&) = delete;
  Broadcast& operator=(const Broadcast&) = delete;
  ~Broadcast() { TERN_ASSERT(waiters_.empty(), "Broadcast destroyed with waiting subscribers"); }

  // One receiver's position in the stream. Use from one fiber at a time.
  class Subscriber {
   public:
    // Receives the next value, waiting for one to be published. Interruptible.
    [[nodiscard]] Result<T> recv() { return recv_until(kNoDeadline); }
    // As recv(), giving up at the deadline with tern::deadline_exceeded().
    [[nodiscard]] Result<T> recv_until(Deadline deadline) {
      return owner_->receive(*this, deadline, true);
    }
    // As recv_until(), with a timeout.
    template <typename Rep, typename Period>
    [[nodiscard]] Result<T> recv_for(std::chrono::duration<Rep, Period> timeout) {
      return recv_until(deadline_after(timeout));
    }
    // Receives without waiting; fails with resource_unavailable_try_again when nothing is new.
    [[nodiscard]] Result<T> try_recv() { return owner_->receive(*this, kNoDeadline, false); }
    // How many values this subscriber lost by falling behind.
    std::uint64_t missed() const noexcept { return missed_; }

   private:
    friend class Broadcast;
    Subscriber(Broadcast* owner, std::uint64_t next) : owner_(owner), next_(next) {}
    Broadcast* owner_;
    std::uint64_t next_;
    std::uint64_t missed_ = 0;
  };

  // A subscriber that receives every value published from now on.
  Subscriber subscribe() noexcept {
    std::lock_guard hold(guard_);
    return Subscriber(this, first_ + kept_.size());
  }
  // Publishes a copy of value to every subscriber; fails with Errc::closed after close().
  [[nodiscard]] Result<void> publish(T value) {
    detail::WaitList claimed;
    guard_.lock();
    if (closed_) {
      guard_.unlock();
      return fail(Errc::closed);
    }
    kept_.push_back(std::move(value));
    if (kept_.size() > capacity_) {
      kept_.pop_front();
      ++first_;
    }
    detail::claim_all(waiters_, claimed);
    guard_.unlock();
    detail::wake_all(claimed);
    return {};
  }
  // Ends the stream and wakes every waiting subscriber. Idempotent.
  void close() noexcept {
    detail::WaitList claimed;
    guard_.lock();
    closed_ = true;
    detail::claim_all(waiters_, claimed);
    guard_.unlock();
    detail::wake_all(claimed, true);
  }

 private:
  [[nodiscard]] Result<T> receive(Subscriber& sub, Deadline deadline, bool block) {
    for (;;) {
      guard_.lock();
      if (sub.next_ < first_) {
        sub.missed_ += first_ - sub.next_;
        sub.next_ = first_;
        guard_.unlock();
        return fail(Errc::lagged);
      }
      if (sub.next_ < first_ + kept_.size()) {
        Result<T> value(kept_[static_cast<std::size_t>(sub.next_ - first_)]);
        ++sub.next_;
        guard_.unlock();
        return value;
      }
      if (closed_ || !block) {
        guard_.unlock();
        return closed_ ? fail(Errc::closed) : fail(std::errc::resource_unavailable_try_again);
      }
      if (const std::error_code result = detail::wait_for_waker(guard_, waiters_, deadline))
        return fail(result);
    }
  }

  SpinLock guard_;
  const std::size_t capacity_;
  bool closed_ = false;
  std::uint64_t first_ = 0;  // sequence number of kept_.front()
  std::deque<T> kept_;
  detail::WaitList waiters_;
};

}  // namespace tern
