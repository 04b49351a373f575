#pragma once

// What a channel knows of each endpoint beyond its connections: calls in flight and their
// latency, the circuit breaker, active health checks, and the endpoint table /status shows.
// Fibers of the channel's worker, except where a function says otherwise.

#include <string>
#include <vector>

#include "client_connection.h"
#include "tern/prof/counter.h"

namespace tern::rpc::detail {

// The process-wide counters of what channels' cluster behaviour did (docs/observability.md,
// tern_rpc_channel_*_total); each ChannelStats field of the same name counts one channel's share.
struct ClusterMetrics {
  prof::Counter retries{"rpc.channel_retries", "Extra attempts of idempotent RPC calls"};
  prof::Counter retries_throttled{"rpc.channel_retries_throttled",
                                  "RPC retries and hedges not made: over the retry budget"};
  prof::Counter hedges{"rpc.channel_hedges", "Hedged (backup) RPC requests sent"};
  prof::Counter hedge_wins{"rpc.channel_hedge_wins", "RPC calls answered first by a hedge"};
  prof::Counter ejections{"rpc.channel_ejections", "RPC endpoints ejected by their breaker"};
  prof::Counter health_check_failures{"rpc.channel_health_check_failures",
                                      "Failed health checks of RPC endpoints"};
};

// The counters; any thread.
ClusterMetrics& cluster_metrics();

// How an attempt sent to an endpoint ended, as the breaker sees it.
enum class AttemptOutcome { success, failure, abandoned };

// The outcome of an attempt that ended with `status` (a transport failure is a failure).
AttemptOutcome outcome_of(const Status& status) noexcept;

// Whether a call may go to `endpoint` now: it passes its health checks (unless `any_health`)
// and its breaker lets a call through.
bool endpoint_usable(Channel::Impl& channel, Endpoint& endpoint, Clock::time_point now,
                     bool any_health) noexcept;

// An attempt of a call is sent to `endpoint`; returns when (for its latency).
Clock::time_point attempt_sent(Channel::Impl& channel, Endpoint& endpoint) noexcept;
// The attempt sent at `sent` ended.
void attempt_ended(Channel::Impl& channel, Endpoint& endpoint, Clock::time_point sent,
                   AttemptOutcome outcome) noexcept;

// Endpoints whose breaker is open or half-open now.
std::size_t ejected_endpoints(const Channel::Impl& channel) noexcept;

// Starts the health-check fiber of every endpoint (when the options ask for checks and the
// channel has two or more endpoints); stop_health_checks ends them.
void start_health_checks(Channel::Impl& channel);
void stop_health_checks(Channel::Impl& channel);
// The same for one endpoint, for naming that adds an endpoint to a running channel (after it is
// in channel.endpoints) or removes one (before its connections close).
void start_health_check(Channel::Impl& channel, Endpoint& endpoint);
void stop_health_check(Endpoint& endpoint);

// The state of every endpoint now.
std::vector<EndpointStatus> endpoint_status(const Channel::Impl& channel);

// Lists the channel in the process-wide table admin /status shows (from its creator), takes it
// out (from its worker, when it closes), and refreshes its row of the table.
void register_channel(Channel::Impl& channel);
void unregister_channel(Channel::Impl& channel);
void publish_status(Channel::Impl& channel);

// The "channels" section of /status: a JSON array with every open channel of the process and
// its endpoints, as last published. Any thread.
std::string channels_status_json();

}  // namespace tern::rpc::detail
