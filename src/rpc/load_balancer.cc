#include "load_balancer.h"

#include <algorithm>
#include <string>

namespace tern::rpc::detail {

namespace {

constexpr int kPointsPerEndpoint = 160;

bool is_excluded(std::span<Endpoint* const> excluded, const Endpoint* endpoint) noexcept {
  return std::find(excluded.begin(), excluded.end(), endpoint) != excluded.end();
}

ClientConnection* round_robin(Channel::Impl& channel, std::span<Endpoint* const> excluded) {
  const std::size_t n = channel.endpoints.size();
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& endpoint = *channel.endpoints[(channel.next_endpoint + i) % n];
    if (is_excluded(excluded, &endpoint)) continue;
    if (ClientConnection* c = endpoint.ready_connection()) {
      channel.next_endpoint = (channel.next_endpoint + i + 1) % n;
      return c;
    }
  }
  return nullptr;
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
    for (int point = 0; point < kPointsPerEndpoint; ++point) {
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
  if (channel.options.load_balancing != LoadBalancing::consistent_hash || !key ||
      channel.ring.empty()) {
    return round_robin(channel, excluded);
  }
  // The first healthy endpoint clockwise from the key's point on the ring.
  auto start = std::lower_bound(channel.ring.begin(), channel.ring.end(),
                                std::make_pair(*key, std::size_t{0}));
  const std::size_t n = channel.ring.size();
  const std::size_t first = static_cast<std::size_t>(start - channel.ring.begin());
  for (std::size_t i = 0; i < n; ++i) {
    Endpoint& endpoint = *channel.endpoints[channel.ring[(first + i) % n].second];
    if (is_excluded(excluded, &endpoint)) continue;
    if (ClientConnection* c = endpoint.ready_connection()) return c;
  }
  return nullptr;
}

}  // namespace tern::rpc::detail
