#include "retry_budget.h"

#include <algorithm>

namespace tern::rpc::detail {

RetryBudget::RetryBudget(const RetryBudgetOptions& options) noexcept
    : options_(options),
      seconds_(std::clamp<std::size_t>(static_cast<std::size_t>(options.window.count()), 1,
                                       kMaxSeconds)) {}

RetryBudget::Second& RetryBudget::current(Clock::time_point now) noexcept {
  const std::int64_t second =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  Second& slot = ring_[static_cast<std::size_t>(second) % seconds_];
  if (slot.second != second) slot = {second, 0, 0};
  return slot;
}

void RetryBudget::on_call(Clock::time_point now) noexcept { ++current(now).calls; }

bool RetryBudget::try_spend(Clock::time_point now) noexcept {
  Second& here = current(now);
  const std::int64_t oldest = here.second - static_cast<std::int64_t>(seconds_) + 1;
  std::uint64_t calls = 0;
  std::uint64_t retries = 0;
  for (std::size_t i = 0; i < seconds_; ++i) {
    const Second& slot = ring_[i];
    if (slot.second < oldest || slot.second > here.second) continue;
    calls += slot.calls;
    retries += slot.retries;
  }
  const std::uint64_t allowed =
      calls * options_.percent / 100 + std::uint64_t{options_.min_per_second} * seconds_;
  if (retries >= allowed) return false;
  ++here.retries;
  return true;
}

}  // namespace tern::rpc::detail
