#pragma once

// Choosing a connection for a call: round robin over endpoints, or a consistent-hash ring keyed
// by the call's key. Fibers of the channel's worker.

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

// A ready connection for a call with this key (round robin without one), skipping the endpoints
// in `excluded`; nullptr when none is ready.
ClientConnection* pick_connection(Channel::Impl& channel, const std::optional<std::uint64_t>& key,
                                  std::span<Endpoint* const> excluded);

}  // namespace tern::rpc::detail
