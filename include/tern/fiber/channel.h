#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <mutex>
#include <optional>
#include <utility>
#include <variant>

#include "tern/base/assert.h"
#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/detail/waiter.h"

namespace tern {

template <typename T>
class Channel;

template <typename A, typename B>
[[nodiscard]] Result<std::variant<A, B>> select(Channel<A>& a, Channel<B>& b,
                                                Deadline deadline = kNoDeadline);

// A FIFO queue of values between fibers, on the same or different workers, bounded (send
// waits while it is full) or unbounded. close() ends it: sends fail with Errc::closed,
// receives drain what is buffered and then fail with Errc::closed. Blocking calls are
// interruptible (operation_canceled) and take deadlines (tern::deadline_exceeded(), which
// compares equal to std::errc::timed_out). Blocking calls from
// worker fibers; try_send, try_recv, close, size from any thread.
template <typename T>
class Channel {
 public:
  // The capacity of a channel whose sends never wait.
  static constexpr std::size_t kUnbounded = SIZE_MAX;

  // A channel holding up to `capacity` values (at least 1), or kUnbounded.
  explicit Channel(std::size_t capacity) : capacity_(capacity) {
    TERN_ASSERT(capacity >= 1, "a Channel needs a capacity of at least 1");
  }
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() {
    TERN_ASSERT(receivers_.empty() && senders_.empty(), "Channel destroyed with waiters");
  }

  // Sends value, waiting while the channel is full. A send that fails (closed, timed out,
  // interrupted) drops the value; use try_send to keep it.
  [[nodiscard]] Result<void> send(T value) { return send_until(std::move(value), kNoDeadline); }
  // As send(), giving up at the deadline with tern::deadline_exceeded().
  [[nodiscard]] Result<void> send_until(T value, Deadline deadline);
  // As send_until(), with a timeout.
  template <typename Rep, typename Period>
  [[nodiscard]] Result<void> send_for(T value, std::chrono::duration<Rep, Period> timeout) {
    return send_until(std::move(value), deadline_after(timeout));
  }
  // Sends without waiting; fails with std::errc::resource_unavailable_try_again when full or
  // Errc::closed. `value` is moved from only on success.
  [[nodiscard]] Result<void> try_send(T&& value);

  // Receives the oldest value, waiting while the channel is empty.
  [[nodiscard]] Result<T> recv() { return recv_until(kNoDeadline); }
  // As recv(), giving up at the deadline with tern::deadline_exceeded().
  [[nodiscard]] Result<T> recv_until(Deadline deadline);
  // As recv_until(), with a timeout.
  template <typename Rep, typename Period>
  [[nodiscard]] Result<T> recv_for(std::chrono::duration<Rep, Period> timeout) {
    return recv_until(deadline_after(timeout));
  }
  // Receives without waiting; fails with resource_unavailable_try_again or Errc::closed.
  [[nodiscard]] Result<T> try_recv();

  // Closes the channel and wakes every waiter. Idempotent.
  void close() noexcept;
  // Whether close() was called.
  bool closed() noexcept {
    std::lock_guard hold(guard_);
    return closed_;
  }
  // Values buffered now (a snapshot).
  std::size_t size() noexcept {
    std::lock_guard hold(guard_);
    return buffer_.size();
  }

  // Ranged receive: `for (T& v : channel)` receives until the channel is closed and drained
  // (or the fiber is interrupted).
  class iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = T*;
    using reference = T&;
    iterator() = default;
    explicit iterator(Channel* channel) : channel_(channel) { next(); }
    T& operator*() { return *value_; }
    iterator& operator++() {
      next();
      return *this;
    }
    void operator++(int) { next(); }
    bool operator==(const iterator& other) const { return channel_ == other.channel_; }

   private:
    void next() {
      Result<T> received = channel_->recv();
      if (received) {
        value_.emplace(std::move(*received));
      } else {
        channel_ = nullptr;
      }
    }
    Channel* channel_ = nullptr;
    std::optional<T> value_;
  };
  iterator begin() { return iterator(this); }
  iterator end() { return iterator(); }

 private:
  template <typename A, typename B>
  friend Result<std::variant<A, B>> select(Channel<A>&, Channel<B>&, Deadline);

  // Takes the oldest value into `out` if there is one; refills the buffer from a waiting
  // sender, whom it returns to be woken after the lock is dropped. Lock held.
  bool take_locked(std::optional<T>& out, detail::Waiter*& sender_to_wake) {
    if (buffer_.empty()) return false;
    out.emplace(std::move(buffer_.front()));
    buffer_.pop_front();
    sender_to_wake = detail::claim_first(senders_);
    if (sender_to_wake != nullptr)
      buffer_.push_back(std::move(*static_cast<T*>(sender_to_wake->slot)));
    return true;
  }
  // With the lock held: unless the channel is closed, hands value to a waiting receiver or
  // buffers it, drops the lock and returns true; returns false (lock still held) when closed
  // or full.
  bool offer_locked(T& value) {
    if (closed_) return false;
    if (detail::Waiter* receiver = detail::claim_first(receivers_)) {
      static_cast<std::optional<T>*>(receiver->slot)->emplace(std::move(value));
      guard_.unlock();
      detail::wake(*receiver);
      return true;
    }
    if (buffer_.size() < capacity_) {
      buffer_.push_back(std::move(value));
      guard_.unlock();
      return true;
    }
    return false;
  }
  // Whether a receive can never succeed again. Lock held.
  bool drained_locked() const { return closed_ && buffer_.empty(); }

  SpinLock guard_;
  const std::size_t capacity_;
  bool closed_ = false;
  std::deque<T> buffer_;
  detail::WaitList receivers_;  // slot: std::optional<T>*
  detail::WaitList senders_;    // slot: T*
};

template <typename T>
Result<void> Channel<T>::send_until(T value, Deadline deadline) {
  for (;;) {
    guard_.lock();
    if (offer_locked(value)) return {};  // offer_locked dropped the lock
    if (closed_) {
      guard_.unlock();
      return fail(Errc::closed);
    }
    // A shared-stack sender parks its value off the stack, where a receiver can take it.
    const bool off_stack = detail::parks_off_stack();
    const detail::ParkedNode<detail::Waiter> waiter(off_stack);
    const detail::ParkedNode<std::optional<T>> parked(off_stack);
    waiter->slot = &value;
    if (off_stack) waiter->slot = &parked->emplace(std::move(value));
    // A closed channel is the only way round the loop again, and it then refuses the value.
    const std::error_code result = detail::wait_in(guard_, senders_, *waiter, deadline, true);
    if (!waiter->fired) return fail(result);
    if (!waiter->closed) return {};  // a receiver moved the value into the buffer
  }
}

template <typename T>
Result<void> Channel<T>::try_send(T&& value) {
  guard_.lock();
  if (offer_locked(value)) return {};
  const bool closed = closed_;
  guard_.unlock();
  return closed ? fail(Errc::closed) : fail(std::errc::resource_unavailable_try_again);
}

template <typename T>
Result<T> Channel<T>::recv_until(Deadline deadline) {
  std::optional<T> out;
  guard_.lock();
  detail::Waiter* sender = nullptr;
  if (take_locked(out, sender)) {
    guard_.unlock();
    if (sender != nullptr) detail::wake(*sender);
    return std::move(*out);
  }
  if (closed_) {
    guard_.unlock();
    return fail(Errc::closed);
  }
  const bool off_stack = detail::parks_off_stack();
  const detail::ParkedNode<detail::Waiter> waiter(off_stack);
  const detail::ParkedNode<std::optional<T>> parked(off_stack);  // what a sender hands over
  waiter->slot = parked.get();
  const std::error_code result = detail::wait_in(guard_, receivers_, *waiter, deadline, true);
  if (!waiter->fired) return fail(result);
  if (waiter->closed) return fail(Errc::closed);
  return std::move(**parked);
}

template <typename T>
Result<T> Channel<T>::try_recv() {
  std::optional<T> out;
  guard_.lock();
  detail::Waiter* sender = nullptr;
  const bool took = take_locked(out, sender);
  const bool drained = drained_locked();
  guard_.unlock();
  if (sender != nullptr) detail::wake(*sender);
  if (took) return std::move(*out);
  return drained ? fail(Errc::closed) : fail(std::errc::resource_unavailable_try_again);
}

template <typename T>
void Channel<T>::close() noexcept {
  detail::WaitList claimed;
  guard_.lock();
  closed_ = true;
  detail::claim_all(receivers_, claimed);
  detail::claim_all(senders_, claimed);
  guard_.unlock();
  detail::wake_all(claimed, true);
}

// Receives from whichever of two channels has a value first (the first channel wins a tie),
// giving up at the deadline with tern::deadline_exceeded(). A channel that is closed and drained
// drops out; when both have, fails with Errc::closed. Interruptible. Worker fibers only.
template <typename A, typename B>
[[nodiscard]] Result<std::variant<A, B>> select(Channel<A>& a, Channel<B>& b, Deadline deadline) {
  detail::FiberControl* self = detail::current_fiber("tern::select");
  bool a_open = true;
  bool b_open = true;
  for (;;) {
    const bool off_stack = detail::parks_off_stack();
    const detail::ParkedNode<std::optional<A>> parked_a(off_stack);
    const detail::ParkedNode<std::optional<B>> parked_b(off_stack);
    const detail::ParkedNode<detail::Waiter> waiter_a(off_stack);
    const detail::ParkedNode<detail::Waiter> waiter_b(off_stack);
    std::optional<A>& from_a = *parked_a;
    std::optional<B>& from_b = *parked_b;
    detail::Waiter& wait_a = *waiter_a;
    detail::Waiter& wait_b = *waiter_b;
    wait_a.fiber = wait_b.fiber = self;
    wait_a.slot = &from_a;
    wait_b.slot = &from_b;
    detail::Waiter* sender = nullptr;
    detail::begin_wait(self);

    if (a_open) {
      a.guard_.lock();
      if (a.take_locked(from_a, sender)) {
        a.guard_.unlock();
        if (sender != nullptr) detail::wake(*sender);
        return std::variant<A, B>(std::in_place_index<0>, std::move(*from_a));
      }
      a_open = !a.drained_locked();
      if (a_open) a.receivers_.push_back(wait_a);
      a.guard_.unlock();
    }
    if (b_open) {
      b.guard_.lock();
      if (!b.buffer_.empty() && detail::claim(wait_b)) {
        // The claim keeps channel a's senders from also handing this fiber a value.
        b.take_locked(from_b, sender);
        b.guard_.unlock();
        if (sender != nullptr) detail::wake(*sender);
        a.guard_.lock();
        detail::withdraw(a.receivers_, wait_a);
        a.guard_.unlock();
        return std::variant<A, B>(std::in_place_index<1>, std::move(*from_b));
      }
      b_open = !b.drained_locked();
      if (b_open) b.receivers_.push_back(wait_b);
      b.guard_.unlock();
    }
    if (!a_open && !b_open) return fail(Errc::closed);

    const std::error_code result = detail::wait(self, deadline, true);
    if (!wait_a.fired) {
      a.guard_.lock();
      detail::withdraw(a.receivers_, wait_a);
      a.guard_.unlock();
    }
    if (!wait_b.fired) {
      b.guard_.lock();
      detail::withdraw(b.receivers_, wait_b);
      b.guard_.unlock();
    }
    if (wait_a.fired && !wait_a.closed)
      return std::variant<A, B>(std::in_place_index<0>, std::move(*from_a));
    if (wait_b.fired && !wait_b.closed)
      return std::variant<A, B>(std::in_place_index<1>, std::move(*from_b));
    if (wait_a.fired) {
      a_open = false;  // closed: wait on the other one alone
    } else if (wait_b.fired) {
      b_open = false;
    } else {
      return fail(result);
    }
  }
}

}  // namespace tern
