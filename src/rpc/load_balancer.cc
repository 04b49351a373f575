#include "load_balancer.h"

#include <algorithm>
#include <string>

#include "cluster.h"

namespace tern::rpc::detail {

namespace {

constexpr int kPointsPerEndpoint = 160;

bool is_excluded(std::span<Endpoint* const> excluded, const Endpoint* endpoint) noexcept {
  return std::find(excluded.begin(), excluded.end(), endpoint) != excluded.end();
}

// What one pick sees: the endpoints to skip, the time, and whether unhealthy endpoints count.
struct Pick {
  Channel::Impl& channel;
  std::span<Endpoint* const> excluded;
  Clock::time_point now;
  bool any_health;

  bool usable(Endpoint& endpoint) const noexcept {
    return !is_excluded(excluded, &endpoint) && endpoint_usable(channel, endpoint, now, any_health);
  }
};

bool has_ready_connection(const Endpoint& endpoint) noexcept {
  return std::any_of(endpoint.connections.begin(), endpoint.connections.end(),
                     [](const auto& c) { return c->state() == ClientConnection::State::ready; });
}

ClientConnection* round_robin(const Pick& pick) {
  Channel::Impl& channel = pick.channel;
  const std::size_t n = channel.endpoints.size();
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& endpoint = *channel.endpoints[(channel.next_endpoint + i) % n];
    if (!pick.usable(endpoint)) continue;
    if (ClientConnection* c = endpoint.ready_connection()) {
      channel.next_endpoint = (channel.next_endpoint + i + 1) % n;
      return c;
    }
  }
  return nullptr;
}

// The load of an endpoint: calls in flight times the latency they see, per unit of weight. An
// endpoint with no latency yet is taken as a `typical` one.
double load_of(const Endpoint& endpoint, double typical) noexcept {
  const double latency = endpoint.latency_ewma_ms > 0 ? endpoint.latency_ewma_ms : typical;
  return (endpoint.in_flight + 1) * latency / std::max<std::uint32_t>(endpoint.weight, 1);
}

// The mean latency of the candidates that have one (1 ms when none has).
double typical_latency(std::span<Endpoint* const> candidates) noexcept {
  double sum = 0;
  int known = 0;
  for (const Endpoint* e : candidates) {
    if (e->latency_ewma_ms <= 0) continue;
    sum += e->latency_ewma_ms;
    ++known;
  }
  return known > 0 ? sum / known : 1.0;
}

// The least loaded usable endpoint with a ready connection among those `eligible` admits:
// compared all when there are four or fewer, else the better of two chosen at random.
template <typename Eligible>
ClientConnection* least_loaded(const Pick& pick, Eligible eligible) {
  Channel::Impl& channel = pick.channel;
  thread_local std::vector<Endpoint*> candidates;
  candidates.clear();
  for (auto& endpoint : channel.endpoints) {
    if (eligible(*endpoint) && pick.usable(*endpoint) && has_ready_connection(*endpoint))
      candidates.push_back(endpoint.get());
  }
  if (candidates.empty()) return nullptr;
  const double typical = typical_latency(candidates);
  Endpoint* best = nullptr;
  if (candidates.size() <= 4) {
    for (Endpoint* e : candidates) {
      if (best == nullptr || load_of(*e, typical) < load_of(*best, typical)) best = e;
    }
  } else {
    std::uint64_t& r = channel.random;
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    const std::size_t n = candidates.size();
    Endpoint* a = candidates[r % n];
    Endpoint* b = candidates[(r % n + 1 + (r >> 32) % (n - 1)) % n];
    best = load_of(*a, typical) <= load_of(*b, typical) ? a : b;
  }
  return best->ready_connection();
}

ClientConnection* locality(const Pick& pick) {
  const ChannelOptions& options = pick.channel.options;
  // The local zone while one of its endpoints is usable and below the spill-over load.
  ClientConnection* local = least_loaded(pick, [&](const Endpoint& e) {
    return e.zone == options.zone && e.in_flight < options.locality_spill_in_flight;
  });
  if (local != nullptr) return local;
  // Spill over: the other zones first, the local zone's busy endpoints when they are out of
  // reach too.
  ClientConnection* remote =
      least_loaded(pick, [&](const Endpoint& e) { return e.zone != options.zone; });
  if (remote != nullptr) return remote;
  return least_loaded(pick, [](const Endpoint&) { return true; });
}

ClientConnection* consistent_hash(const Pick& pick, std::uint64_t key) {
  Channel::Impl& channel = pick.channel;
  // The first usable endpoint clockwise from the key's point on the ring.
  auto start = std::lower_bound(channel.ring.begin(), channel.ring.end(),
                                std::make_pair(key, std::size_t{0}));
  const std::size_t n = channel.ring.size();
  const std::size_t first = static_cast<std::size_t>(start - channel.ring.begin());
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& endpoint = *channel.endpoints[channel.ring[(first + i) % n].second];
    if (!pick.usable(endpoint)) continue;
    if (ClientConnection* c = endpoint.ready_connection()) return c;
  }
  return nullptr;
}

ClientConnection* pick_by_policy(const Pick& pick, const std::optional<std::uint64_t>& key) {
  switch (pick.channel.options.load_balancing) {
    case LoadBalancing::consistent_hash:
      if (key && !pick.channel.ring.empty()) return consistent_hash(pick, *key);
      return round_robin(pick);
    case LoadBalancing::least_loaded:
      return least_loaded(pick, [](const Endpoint&) { return true; });
    case LoadBalancing::locality:
      return locality(pick);
    case LoadBalancing::round_robin:
      break;
  }
  return round_robin(pick);
}

}  // namespace

std::uint64_t hash_key(std::string_view key) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : key) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

void build_ring(Channel::Impl& channel) {
  channel.ring.clear();
  // With one endpoint every key lands on it, and round robin (what an empty ring falls back to)
  // picks it too: a channel per peer, the common case, skips 160 labels to format and sort.
  if (channel.options.load_balancing != LoadBalancing::consistent_hash ||
      channel.endpoints.size() < 2)
    return;
  for (std::size_t e = 0; e < channel.endpoints.size(); ++e) {
    // Points in proportion to the weight, which counts from 1 to 64 here.
    const std::uint32_t points =
        kPointsPerEndpoint * std::clamp<std::uint32_t>(channel.endpoints[e]->weight, 1, 64);
    for (std::uint32_t point = 0; point < points; ++point) {
      const std::string label = channel.endpoints[e]->name + "#" + std::to_string(point);
      channel.ring.emplace_back(hash_key(label), e);
    }
  }
  std::sort(channel.ring.begin(), channel.ring.end());
}

ClientConnection* pick_connection(Channel::Impl& channel, const std::optional<std::uint64_t>& key,
                                  std::span<Endpoint* const> excluded) {
  if (ClientConnection* only = channel.only_connection) {
    const bool usable = only->state() == ClientConnection::State::ready &&
                        !is_excluded(excluded, &only->endpoint());
    return usable ? only : nullptr;
  }
  const Pick strict{channel, excluded, Clock::now(), false};
  if (ClientConnection* c = pick_by_policy(strict, key)) return c;
  // No endpoint that passes its health checks is within reach: rather than fail, try those that
  // do not (the checks may be wrong, or the endpoints recovering).
  const bool some_unhealthy = std::any_of(channel.endpoints.begin(), channel.endpoints.end(),
                                          [](const auto& e) { return !e->healthy; });
  if (!some_unhealthy) return nullptr;
  const Pick lenient{channel, excluded, strict.now, true};
  return pick_by_policy(lenient, key);
}

}  // namespace tern::rpc::detail
