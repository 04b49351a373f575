#include "breaker.h"

#include <algorithm>

namespace tern::rpc::detail {

bool is_endpoint_failure(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::unavailable:
    case StatusCode::deadline_exceeded:
    case StatusCode::resource_exhausted:
    case StatusCode::internal:
    case StatusCode::unknown:
    case StatusCode::data_loss:
      return true;
    default:
      return false;
  }
}

std::string_view Breaker::state_name() const noexcept {
  switch (state_) {
    case State::closed:
      return "closed";
    case State::open:
      return "open";
    case State::half_open:
      return "half_open";
  }
  return "closed";
}

bool Breaker::allows(Clock::time_point now, const BreakerOptions& options) noexcept {
  if (state_ == State::open) {
    if (now < open_until_) return false;
    state_ = State::half_open;
    probes_in_flight_ = 0;
  }
  if (state_ == State::half_open) return probes_in_flight_ < std::max(1u, options.half_open_probes);
  return true;
}

void Breaker::on_sent() noexcept {
  if (state_ == State::half_open) ++probes_in_flight_;
}

void Breaker::on_abandoned() noexcept {
  if (state_ == State::half_open && probes_in_flight_ > 0) --probes_in_flight_;
}

bool Breaker::trips(const BreakerOptions& options) const noexcept {
  if (options.consecutive_failures > 0 && consecutive_failures_ >= options.consecutive_failures)
    return true;
  return options.min_calls > 0 && window_calls_ >= options.min_calls &&
         static_cast<double>(window_failures_) >=
             options.failure_ratio * static_cast<double>(window_calls_);
}

void Breaker::open(Clock::time_point now, const BreakerOptions& options) noexcept {
  // The ejection time doubles with each ejection in a row: 1, 2, 4, ... times base_ejection.
  const unsigned doublings = std::min(ejections_in_a_row_, 20u);
  auto ejection = options.base_ejection * (1ll << doublings);
  ejection = std::min<decltype(ejection)>(ejection, options.max_ejection);
  ++ejections_in_a_row_;
  state_ = State::open;
  open_until_ = now + ejection;
  probes_in_flight_ = 0;
  consecutive_failures_ = 0;
  window_calls_ = 0;
  window_failures_ = 0;
}

bool Breaker::on_result(bool failure, Clock::time_point now, const BreakerOptions& options,
                        bool may_eject) noexcept {
  if (failure) ++total_failures_;
  if (state_ == State::open) return false;  // a call sent before the breaker opened
  if (state_ == State::half_open) {
    if (probes_in_flight_ > 0) --probes_in_flight_;
    if (failure) {
      open(now, options);
      return true;
    }
    state_ = State::closed;
    closed_since_ = now;
    consecutive_failures_ = 0;
    window_calls_ = 0;
    window_failures_ = 0;
    window_start_ = now;
    return false;
  }
  // An endpoint that stayed closed for the longest ejection time starts its doubling afresh.
  if (ejections_in_a_row_ > 0 && now - closed_since_ >= options.max_ejection)
    ejections_in_a_row_ = 0;
  if (now - window_start_ >= options.window) {
    window_start_ = now;
    window_calls_ = 0;
    window_failures_ = 0;
  }
  ++window_calls_;
  if (failure) {
    ++window_failures_;
    ++consecutive_failures_;
  } else {
    consecutive_failures_ = 0;
  }
  if (!trips(options) || !may_eject) return false;
  open(now, options);
  return true;
}

}  // namespace tern::rpc::detail
