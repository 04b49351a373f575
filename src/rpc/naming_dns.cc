#include <fmt/format.h>
#include <algorithm>

#include "naming.h"
#include "tern/fiber/fiber.h"
#include "tern/log/log.h"

namespace tern::rpc::detail {

namespace {

std::string names(const std::vector<EndpointSpec>& targets) {
  std::string out;
  for (const EndpointSpec& spec : targets) {
    if (!out.empty()) out += ',';
    out += spec.address;
  }
  return out;
}

// The host part of "host:port" ("::1" of "[::1]:7000").
std::string host_of(std::string_view target) {
  target = target.substr(0, target.rfind(':'));
  if (target.size() >= 2 && target.front() == '[' && target.back() == ']')
    target = target.substr(1, target.size() - 2);
  return std::string(target);
}

}  // namespace

Result<std::vector<ResolvedEndpoint>> resolve_targets(const std::vector<EndpointSpec>& targets,
                                                      const NameResolver& resolver) {
  constexpr std::string_view kDns = "dns://";
  std::vector<ResolvedEndpoint> out;
  for (const EndpointSpec& spec : targets) {
    std::string_view target = spec.address;
    const bool named = target.starts_with(kDns);
    if (named) target.remove_prefix(kDns.size());
    tern::Result<std::vector<net::Address>> found =
        named && resolver ? resolver(target) : net::resolve(target);
    if (!found) {
      if (found.error() == std::errc::invalid_argument) {
        // The explanation quotes the target: "bad target '1.2.3.4:99999': port '99999' is ...".
        return std::unexpected(
            Status(StatusCode::invalid_argument, "bad target " + found.error().message()));
      }
      return std::unexpected(Status(StatusCode::unavailable, found.error().message()));
    }
    for (const net::Address& address : *found) {
      const bool known = std::any_of(
          out.begin(), out.end(), [&](const ResolvedEndpoint& e) { return e.address == address; });
      if (known) continue;
      ResolvedEndpoint resolved;
      resolved.address = address;
      resolved.name = address.to_string();
      resolved.host = host_of(target);
      resolved.weight = std::max<std::uint32_t>(spec.weight, 1);
      resolved.zone = spec.zone;
      resolved.metadata = spec.metadata;
      out.push_back(std::move(resolved));
    }
  }
  return out;
}

void follow_dns(Channel::Impl& channel, std::vector<EndpointSpec> targets) {
  const std::chrono::milliseconds interval = channel.options.dns_refresh_interval;
  bool failing = false;  // logged once per run of failed rounds
  while (!channel.closing) {
    if (!this_fiber::sleep_for(interval) || channel.closing) continue;
    Result<std::vector<ResolvedEndpoint>> found =
        resolve_targets(targets, channel.options.resolver);
    if (!found || found->empty()) {
      if (!failing) {
        TERN_LOG_WARN("rpc: resolving {} again failed ({}); keeping {} endpoints", names(targets),
                      found ? std::string("no address") : found.error().message(),
                      channel.endpoints.size());
      }
      failing = true;
      continue;
    }
    if (failing) TERN_LOG_INFO("rpc: {} resolves again", names(targets));
    failing = false;
    // Only a changed set touches the channel (rebuilding a consistent-hash ring is not free).
    const bool same = found->size() == channel.endpoints.size() &&
                      std::all_of(found->begin(), found->end(), [&](const ResolvedEndpoint& spec) {
                        return std::any_of(
                            channel.endpoints.begin(), channel.endpoints.end(), [&](const auto& e) {
                              return e->address == spec.address && e->weight == spec.weight &&
                                     e->zone == spec.zone;
                            });
                      });
    if (!same) set_endpoints(channel, std::move(*found));
  }
}

}  // namespace tern::rpc::detail
