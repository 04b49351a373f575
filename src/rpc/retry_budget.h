#pragma once

// The retry budget of a channel (ChannelOptions::retry_budget): retries and hedges at most a
// share of the calls of a sliding window, plus a small allowance per second. Fibers of the
// channel's worker.

#include <array>
#include <cstdint>

#include "tern/base/clock.h"
#include "tern/rpc/channel.h"

namespace tern::rpc::detail {

class RetryBudget {
 public:
  RetryBudget() noexcept : RetryBudget(RetryBudgetOptions{}) {}
  explicit RetryBudget(const RetryBudgetOptions& options) noexcept;

  // A call started at `now`.
  void on_call(Clock::time_point now) noexcept;
  // Takes one retry (or hedge) from the budget; false when it is spent.
  bool try_spend(Clock::time_point now) noexcept;

 private:
  // The calls and retries of one second of the window.
  struct Second {
    std::int64_t second = -1;
    std::uint64_t calls = 0;
    std::uint64_t retries = 0;
  };
  static constexpr std::size_t kMaxSeconds = 60;

  Second& current(Clock::time_point now) noexcept;

  RetryBudgetOptions options_;
  std::size_t seconds_;  // the window, in one-second slots (1 to kMaxSeconds)
  std::array<Second, kMaxSeconds> ring_{};
};

}  // namespace tern::rpc::detail
