#include <algorithm>
#include <chrono>

#include "cluster.h"
#include "load_balancer.h"
#include "naming.h"
#include "tern/log/log.h"

namespace tern::rpc::detail {

namespace {

// Whether a call still uses the endpoint: a reply is awaited on one of its connections, or a
// call fiber has not yet told it how its attempt ended (it reads the endpoint until then).
bool busy(const Endpoint& endpoint) {
  return endpoint.in_flight > 0 ||
         std::any_of(endpoint.connections.begin(), endpoint.connections.end(),
                     [](const auto& c) { return !c->idle(); });
}

void close_endpoint(Endpoint& endpoint, bool channel_closing) {
  const Status why = channel_closing
                         ? Status(StatusCode::cancelled, "the channel was closed")
                         : Status(StatusCode::unavailable, "the endpoint " + endpoint.name +
                                                               " was removed from the channel");
  stop_health_check(endpoint);
  for (auto& connection : endpoint.connections) connection->close(why);
}

}  // namespace

void set_endpoints(Channel::Impl& channel, std::vector<ResolvedEndpoint> wanted) {
  std::vector<std::unique_ptr<Endpoint>> next;
  std::vector<Endpoint*> added;
  for (ResolvedEndpoint& spec : wanted) {
    const bool duplicate = std::any_of(next.begin(), next.end(),
                                       [&](const auto& e) { return e->address == spec.address; });
    if (duplicate) continue;
    auto kept = std::find_if(channel.endpoints.begin(), channel.endpoints.end(),
                             [&](const auto& e) { return e && e->address == spec.address; });
    std::unique_ptr<Endpoint> endpoint;
    if (kept != channel.endpoints.end()) {
      endpoint = std::move(*kept);
    } else {
      endpoint = std::make_unique<Endpoint>();
      endpoint->address = spec.address;
      endpoint->name = spec.name.empty() ? spec.address.to_string() : spec.name;
      endpoint->server_name = spec.host;
      for (std::size_t i = 0; i < channel.options.connections_per_endpoint; ++i) {
        endpoint->connections.push_back(std::make_unique<ClientConnection>(channel, *endpoint, i));
      }
      added.push_back(endpoint.get());
    }
    endpoint->weight = std::max<std::uint32_t>(spec.weight, 1);
    endpoint->zone = std::move(spec.zone);
    endpoint->metadata = std::move(spec.metadata);
    next.push_back(std::move(endpoint));
  }
  for (auto& old : channel.endpoints) {
    if (!old) continue;
    TERN_LOG_INFO("rpc: endpoint {} removed; it takes no new calls", old->name);
    channel.retired.push_back(std::move(old));
  }
  channel.endpoints = std::move(next);
  channel.next_endpoint = 0;
  channel.stats.endpoints = channel.endpoints.size();
  channel.only_connection = nullptr;
  if (channel.endpoints.size() == 1 && channel.endpoints[0]->connections.size() == 1)
    channel.only_connection = channel.endpoints[0]->connections[0].get();
  build_ring(channel);
  for (Endpoint* endpoint : added) {
    for (auto& connection : endpoint->connections) connection->start();
  }
  start_health_checks(channel);  // of the endpoints that have none yet
  publish_status(channel);
  if (!channel.retired.empty()) channel.retired_changed.set();
  // Calls waiting for a connection look at the new set.
  channel.state_changed.set();
  for (Event* waiter : channel.ready_waiters) waiter->set();
}

std::size_t reap_retired(Channel::Impl& channel, bool all) {
  // Taken out of the list before closing: closing waits, and the list may change meanwhile.
  std::vector<std::unique_ptr<Endpoint>> done;
  for (auto& endpoint : channel.retired) {
    if (all || !busy(*endpoint)) done.push_back(std::move(endpoint));
  }
  std::erase(channel.retired, nullptr);
  for (auto& endpoint : done) close_endpoint(*endpoint, all);
  return channel.retired.size();
}

void start_reaper(Channel::Impl& channel) {
  if (channel.reaper.joinable()) return;
  channel.reaper = spawn(
      [&channel] {
        using namespace std::chrono_literals;
        while (!channel.closing) {
          channel.retired_changed.reset();
          if (reap_retired(channel, false) == 0) {
            if (!channel.retired_changed.wait()) continue;
          } else if (!this_fiber::sleep_for(20ms)) {
            continue;
          }
        }
      },
      {.name = "rpc reaper"});
}

void stop_naming(Channel::Impl& channel) {
  if (channel.naming.joinable()) {
    channel.naming.interrupt();
    channel.naming.join();
  }
  if (channel.reaper.joinable()) {
    channel.reaper.interrupt();
    channel.reaper.join();
  }
  reap_retired(channel, true);
}

}  // namespace tern::rpc::detail
