#include "cluster.h"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <mutex>

#include "tern/log/log.h"
#include "tern/prof/status_sections.h"

namespace tern::rpc::detail {

namespace {

// The most endpoints the breakers may hold ejected at once: max_ejection_percent of them, and
// never all.
std::size_t max_ejected(const Channel::Impl& channel) noexcept {
  const std::size_t n = channel.endpoints.size();
  if (n < 2) return 0;
  const std::size_t share = n * std::min(channel.options.breaker.max_ejection_percent, 100u) / 100;
  return std::min(share, n - 1);
}

void json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      out += fmt::format("\\u{:04x}", byte);
    } else {
      out += c;
    }
  }
  out += '"';
}

// The rows of /status's "channels": each channel's JSON object as it last published it.
struct Published {
  std::mutex mutex;
  std::map<const Channel::Impl*, std::string> rows;
  std::uint64_t next_id = 1;
};

Published& published() {
  static Published* all = new Published;  // never destroyed: /status may run during exit
  return *all;
}

std::string channel_json(const Channel::Impl& channel) {
  std::string out = "{\"id\": " + std::to_string(channel.status_id);
  out += ", \"worker\": " + std::to_string(channel.owner_worker);
  out += ", \"load_balancing\": ";
  switch (channel.options.load_balancing) {
    case LoadBalancing::round_robin:
      out += "\"round_robin\"";
      break;
    case LoadBalancing::consistent_hash:
      out += "\"consistent_hash\"";
      break;
    case LoadBalancing::least_loaded:
      out += "\"least_loaded\"";
      break;
    case LoadBalancing::locality:
      out += "\"locality\"";
      break;
  }
  out += ", \"zone\": ";
  json_string(out, channel.options.zone);
  out += ", \"endpoints\": [";
  bool first = true;
  for (const EndpointStatus& e : endpoint_status(channel)) {
    if (!first) out += ", ";
    first = false;
    out += "{\"address\": ";
    json_string(out, e.name);
    out += ", \"zone\": ";
    json_string(out, e.zone);
    out += fmt::format(
        ", \"weight\": {}, \"healthy\": {}, \"breaker\": \"{}\", \"in_flight\": {}, "
        "\"connected\": {}, \"latency_ewma_ms\": {:.3f}, \"calls\": {}, \"failures\": {}}}",
        e.weight, e.healthy ? "true" : "false", e.breaker, e.in_flight, e.connected,
        e.latency_ewma_ms, e.calls, e.failures);
    if (!e.metadata.empty()) {
      out.pop_back();  // the endpoint's closing brace
      out += ", \"metadata\": {";
      for (std::size_t i = 0; i < e.metadata.size(); ++i) {
        if (i > 0) out += ", ";
        json_string(out, e.metadata[i].first);
        out += ": ";
        json_string(out, e.metadata[i].second);
      }
      out += "}}";
    }
  }
  out += "]}";
  return out;
}

void run_health_checks(Channel::Impl& channel, Endpoint& endpoint) {
  const HealthCheckOptions& options = channel.options.health_check;
  for (;;) {
    if (!this_fiber::sleep_for(options.interval) || channel.closing) return;
    ClientConnection* connection = endpoint.ready_connection();
    const bool passed = connection != nullptr && connection->check(deadline_after(options.timeout),
                                                                   options.service, options.method);
    if (channel.closing) return;
    ++channel.stats.health_checks;
    if (passed) {
      endpoint.checks_failed = 0;
      ++endpoint.checks_passed;
      if (!endpoint.healthy && endpoint.checks_passed >= std::max(1u, options.healthy_after)) {
        endpoint.healthy = true;
        TERN_LOG_INFO("rpc: {} passes its health checks again; it gets calls", endpoint.name);
        channel.state_changed.set();
        for (Event* waiter : channel.ready_waiters) waiter->set();
      }
    } else {
      ++channel.stats.health_check_failures;
      cluster_metrics().health_check_failures.add();
      endpoint.checks_passed = 0;
      ++endpoint.checks_failed;
      if (endpoint.healthy && endpoint.checks_failed >= std::max(1u, options.unhealthy_after)) {
        endpoint.healthy = false;
        TERN_LOG_WARN("rpc: {} failed {} health checks in a row; it gets no calls until it passes",
                      endpoint.name, endpoint.checks_failed);
      }
    }
    publish_status(channel);
  }
}

}  // namespace

ClusterMetrics& cluster_metrics() {
  static ClusterMetrics* metrics = new ClusterMetrics;  // lives as long as the process
  return *metrics;
}

AttemptOutcome outcome_of(const Status& status) noexcept {
  return is_endpoint_failure(status.code()) ? AttemptOutcome::failure : AttemptOutcome::success;
}

bool endpoint_usable(Channel::Impl& channel, Endpoint& endpoint, Clock::time_point now,
                     bool any_health) noexcept {
  if (!any_health && !endpoint.healthy) return false;
  return !channel.options.breaker.enabled || endpoint.breaker.allows(now, channel.options.breaker);
}

Clock::time_point attempt_sent(Channel::Impl& channel, Endpoint& endpoint) noexcept {
  ++endpoint.in_flight;
  ++endpoint.calls;
  if (channel.endpoints.size() < 2) return {};
  endpoint.breaker.on_sent();
  return Clock::now();
}

void attempt_ended(Channel::Impl& channel, Endpoint& endpoint, Clock::time_point sent,
                   AttemptOutcome outcome) noexcept {
  --endpoint.in_flight;
  if (channel.endpoints.size() < 2) return;
  if (outcome == AttemptOutcome::abandoned) {
    endpoint.breaker.on_abandoned();
    return;
  }
  const Clock::time_point now = Clock::now();
  const double ms = std::chrono::duration<double, std::milli>(now - sent).count();
  if (outcome == AttemptOutcome::success) channel.latencies.record(now - sent);
  endpoint.latency_ewma_ms =
      endpoint.latency_ewma_ms == 0 ? ms : 0.8 * endpoint.latency_ewma_ms + 0.2 * ms;
  bool changed = false;
  if (channel.options.breaker.enabled) {
    const Breaker::State before = endpoint.breaker.state();
    const bool may_eject = ejected_endpoints(channel) < max_ejected(channel);
    if (endpoint.breaker.on_result(outcome == AttemptOutcome::failure, now, channel.options.breaker,
                                   may_eject)) {
      ++channel.stats.ejections;
      cluster_metrics().ejections.add();
      TERN_LOG_WARN("rpc: {} ejected: its breaker opened after failed calls", endpoint.name);
    } else if (before == Breaker::State::half_open &&
               endpoint.breaker.state() == Breaker::State::closed) {
      TERN_LOG_INFO("rpc: {} answered its probe; its breaker closed", endpoint.name);
    }
    changed = endpoint.breaker.state() != before;
  }
  if (changed || now - channel.status_published >= std::chrono::seconds(1)) {
    publish_status(channel);
  }
}

std::size_t ejected_endpoints(const Channel::Impl& channel) noexcept {
  return static_cast<std::size_t>(
      std::count_if(channel.endpoints.begin(), channel.endpoints.end(),
                    [](const auto& e) { return e->breaker.state() != Breaker::State::closed; }));
}

void start_health_check(Channel::Impl& channel, Endpoint& endpoint) {
  if (channel.options.health_check.interval.count() <= 0 || endpoint.checker.joinable()) return;
  Endpoint* e = &endpoint;
  e->checker =
      spawn([&channel, e] { run_health_checks(channel, *e); }, {.name = "rpc health check"});
}

void stop_health_check(Endpoint& endpoint) {
  if (!endpoint.checker.joinable()) return;
  endpoint.checker.interrupt();
  endpoint.checker.join();
}

void start_health_checks(Channel::Impl& channel) {
  if (channel.endpoints.size() < 2) return;
  for (auto& endpoint : channel.endpoints) start_health_check(channel, *endpoint);
}

void stop_health_checks(Channel::Impl& channel) {
  for (auto& endpoint : channel.endpoints) stop_health_check(*endpoint);
}

std::vector<EndpointStatus> endpoint_status(const Channel::Impl& channel) {
  std::vector<EndpointStatus> out;
  out.reserve(channel.endpoints.size());
  for (const auto& endpoint : channel.endpoints) {
    EndpointStatus status;
    status.name = endpoint->name;
    status.zone = endpoint->zone;
    status.weight = endpoint->weight;
    status.healthy = endpoint->healthy;
    status.breaker = endpoint->breaker.state_name();
    status.in_flight = endpoint->in_flight;
    for (const auto& connection : endpoint->connections) {
      if (connection->state() == ClientConnection::State::ready) ++status.connected;
    }
    status.latency_ewma_ms = endpoint->latency_ewma_ms;
    status.calls = endpoint->calls;
    status.failures = endpoint->breaker.failures();
    status.metadata = endpoint->metadata;
    out.push_back(std::move(status));
  }
  return out;
}

void register_channel(Channel::Impl& channel) {
  static const bool section = [] {
    (void)prof::add_status_section("channels", channels_status_json);
    return true;
  }();
  (void)section;
  {
    Published& all = published();
    std::lock_guard lock(all.mutex);
    channel.status_id = all.next_id++;
    all.rows[&channel];
  }
  publish_status(channel);
}

void unregister_channel(Channel::Impl& channel) {
  Published& all = published();
  std::lock_guard lock(all.mutex);
  all.rows.erase(&channel);
}

void publish_status(Channel::Impl& channel) {
  if (channel.status_id == 0 || channel.closing) return;
  channel.status_published = Clock::now();
  std::string row = channel_json(channel);
  Published& all = published();
  std::lock_guard lock(all.mutex);
  auto found = all.rows.find(&channel);
  if (found != all.rows.end()) found->second = std::move(row);
}

std::string channels_status_json() {
  Published& all = published();
  std::lock_guard lock(all.mutex);
  std::string out = "[";
  bool first = true;
  for (const auto& [channel, row] : all.rows) {
    if (row.empty()) continue;
    if (!first) out += ", ";
    first = false;
    out += row;
  }
  out += "]";
  return out;
}

}  // namespace tern::rpc::detail
