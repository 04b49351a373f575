#pragma once

#include <tern/base/assert.h>
#include <tern/base/clock.h>
#include <tern/fiber/event.h>
#include <tern/rpc/client_context.h>
#include <tern/rpc/status.h>

#include <memory>
#include <optional>
#include <utility>

namespace tern::rpc {

namespace detail {
// What an asynchronous call and its Future share.
template <typename T>
struct FutureState {
  Event done;
  std::optional<Result<T>> result;
  ClientContext context;
};
}  // namespace detail

// The reply of an asynchronous call (Channel::call_async, a generated client's ...Async method),
// for a fiber to wait on. Use it from fibers of the worker that made the call.
template <typename T>
class Future {
 public:
  Future() = default;
  explicit Future(std::shared_ptr<detail::FutureState<T>> state) noexcept
      : state_(std::move(state)) {}

  // Whether the future refers to a call and get() has not taken its result yet.
  bool valid() const noexcept { return state_ != nullptr && !taken_; }
  // Whether the reply (or the failure) is there and not taken yet.
  bool ready() const noexcept { return valid() && state_->result.has_value(); }

  // Waits until the call ends or `deadline` passes; returns whether it ended.
  bool wait_until(Deadline deadline) const {
    TERN_ASSERT(state_, "Future::wait_until on an empty future");
    return state_->done.wait_until(deadline).has_value() && state_->result.has_value();
  }

  // Waits for the call to end and returns its reply or status, once. An interrupted wait cancels
  // the call and returns cancelled.
  [[nodiscard]] Result<T> get() {
    TERN_ASSERT(valid(), "Future::get on an empty future (or get called twice)");
    while (!state_->done.wait()) state_->context.cancel();
    taken_ = true;
    return std::move(*state_->result);
  }

  // Cancels the call (it ends with cancelled unless its reply came first).
  void cancel() noexcept {
    if (state_) state_->context.cancel();
  }

  // The call's context: once the call ended, its reply metadata, peer and attempts.
  const ClientContext& context() const noexcept { return state_->context; }

 private:
  std::shared_ptr<detail::FutureState<T>> state_;
  bool taken_ = false;
};

}  // namespace tern::rpc
