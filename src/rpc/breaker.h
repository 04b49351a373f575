#pragma once

// The circuit breaker of one endpoint (ChannelOptions::breaker): closed, open (ejected) or
// half-open (letting a few probe calls through). Fibers of the channel's worker.

#include <cstdint>
#include <string_view>

#include "tern/base/clock.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/status.h"

namespace tern::rpc::detail {

// Whether a call that ended with `code` counts against its endpoint (the server or the path to
// it failed, rather than the service answering). Any thread.
bool is_endpoint_failure(StatusCode code) noexcept;

class Breaker {
 public:
  enum class State { closed, open, half_open };

  State state() const noexcept { return state_; }
  std::string_view state_name() const noexcept;

  // Whether a call may go to the endpoint at `now`: closed, or half-open with a probe slot free.
  // Moves an open breaker whose ejection time is over to half-open.
  bool allows(Clock::time_point now, const BreakerOptions& options) noexcept;
  // A call was sent through an allowing breaker (takes a probe slot when half-open).
  void on_sent() noexcept;
  // A call sent through it ended: counts it and changes state. `may_eject` says whether the
  // channel may eject one more endpoint (max_ejection_percent). Returns true when the breaker
  // opened.
  bool on_result(bool failure, Clock::time_point now, const BreakerOptions& options,
                 bool may_eject) noexcept;
  // A call sent through it ended without an outcome (cancelled by its caller, or a hedge that
  // lost): frees its probe slot.
  void on_abandoned() noexcept;

  std::uint64_t failures() const noexcept { return total_failures_; }

 private:
  bool trips(const BreakerOptions& options) const noexcept;
  void open(Clock::time_point now, const BreakerOptions& options) noexcept;

  State state_ = State::closed;
  unsigned consecutive_failures_ = 0;
  unsigned window_calls_ = 0;
  unsigned window_failures_ = 0;
  Clock::time_point window_start_{};
  Clock::time_point open_until_{};
  Clock::time_point closed_since_{};
  unsigned ejections_in_a_row_ = 0;
  unsigned probes_in_flight_ = 0;
  std::uint64_t total_failures_ = 0;
};

}  // namespace tern::rpc::detail
