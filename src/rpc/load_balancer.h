#pragma once

// Choosing a connection for a call: round robin over endpoints, a consistent-hash ring keyed by
// the call's key, the least loaded endpoint, or the least loaded of the client's zone first.
// Endpoints failing their health checks or ejected by their breaker are skipped. Each endpoint's
// weight, zone and metadata come from rpc::EndpointSpec (channel.h), which naming sources fill.
// Fibers of the channel's worker.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "client_connection.h"

namespace tern::rpc::detail {

// A stable 64-bit hash of a key (FNV-1a, then a finalizing mix). Any thread.
std::uint64_t hash_key(std::string_view key) noexcept;

// Builds the consistent-hash ring of `channel`'s endpoints if it hashes keys over two or more;
// otherwise leaves the ring empty. The channel's creator, before its connections start.
void build_ring(Channel::Impl& channel);

// A ready connection for a call with this key (consistent hash; round robin without one), by
// ChannelOptions::load_balancing, skipping the endpoints in `excluded`; nullptr when none is
// ready. Unhealthy endpoints are picked only when no healthy one can be.
ClientConnection* pick_connection(Channel::Impl& channel, const std::optional<std::uint64_t>& key,
                                  std::span<Endpoint* const> excluded);

}  // namespace tern::rpc::detail
