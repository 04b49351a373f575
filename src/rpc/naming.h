#pragma once

// Naming: how a Channel's endpoint set follows an etcd:// or dns:// target while calls run.
// Fibers of the channel's worker.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client_connection.h"
#include "etcd_client.h"
#include "tern/net/address.h"

namespace tern::rpc::detail {

// One address a target names, with what its ResolvedEndpoint or registration says of it.
struct ResolvedEndpoint {
  net::Address address;
  std::string name;  // "127.0.0.1:5000"
  std::string host;  // the target's host ("db.example"), which a TLS server's certificate names
  std::uint32_t weight = 1;
  std::string zone;
  MetadataEntries metadata;
};

// Replaces the channel's endpoint set with `wanted`: endpoints it has already keep their
// connections (their weight, zone and metadata are updated), new ones start connecting, and the
// ones no longer wanted are retired: they take no new call and are closed by the reaper once the
// calls on them have finished.
void set_endpoints(Channel::Impl& channel, std::vector<ResolvedEndpoint> wanted);

// Closes the retired endpoints that carry no call (all of them when `all`). Returns how many are
// left.
std::size_t reap_retired(Channel::Impl& channel, bool all);

// Starts the channel's reaper fiber, which closes retired endpoints once they are idle.
void start_reaper(Channel::Impl& channel);

// Stops the naming and reaper fibers and closes every retired endpoint (Channel::close).
void stop_naming(Channel::Impl& channel);

// An "etcd://host:port,host:port/service" target.
struct EtcdTarget {
  std::vector<std::string> etcd;  // "host:port"
  std::string service;
  std::string key_prefix;  // "<prefix>/<service>/"
};

// Parses an etcd:// target (`prefix` is ChannelOptions::etcd_prefix); invalid_argument with the
// reason for a malformed one.
[[nodiscard]] Result<EtcdTarget> parse_etcd_target(std::string_view target,
                                                   std::string_view prefix);

// The endpoint a registration value describes ({"address", "weight", "zone", "metadata"});
// invalid_argument with the reason for a value that is not one.
[[nodiscard]] Result<ResolvedEndpoint> parse_registration(std::string_view value);

// The endpoints of the registrations in `kvs`; values that are not registrations are logged
// (with their key) and skipped.
std::vector<ResolvedEndpoint> endpoints_of(const std::vector<EtcdKeyValue>& kvs);

// Lists then watches the target's keys from `revision` + 1 on, applying every change to the
// channel; keeps the last known set while etcd is unreachable, retrying with backoff, resuming
// the watch from the last revision seen (or listing again after a compaction). Runs on the
// channel's naming fiber until the channel closes.
void follow_etcd(Channel::Impl& channel, EtcdClient& client, const EtcdTarget& target,
                 std::int64_t revision, std::vector<EtcdKeyValue> known);

// The addresses of `targets` ("host:port", "dns://name:port" or "unix:/path"), each with its
// spec's weight, zone and metadata, with `resolver` for dns:// names; invalid_argument for text
// that is not a target, unavailable for a name that does not resolve.
[[nodiscard]] Result<std::vector<ResolvedEndpoint>> resolve_targets(
    const std::vector<EndpointSpec>& targets, const NameResolver& resolver);

// Resolves `targets` again every options.dns_refresh_interval and applies the result; a round in
// which a name does not resolve keeps the current set. Runs on the channel's naming fiber until
// the channel closes.
void follow_dns(Channel::Impl& channel, std::vector<EndpointSpec> targets);

}  // namespace tern::rpc::detail
