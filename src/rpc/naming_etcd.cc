#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "naming.h"
#include "tern/fiber/fiber.h"
#include "tern/log/log.h"

namespace tern::rpc::detail {

namespace {

using Json = nlohmann::json;

// A watch that saw nothing for this long is opened again from the last revision, so a watch
// stream that died without a close (a silent network) is noticed.
constexpr std::chrono::seconds kRewatchAfter{30};
constexpr std::chrono::milliseconds kInitialBackoff{100};

Status bad_target(std::string_view target, std::string_view why) {
  return Status(StatusCode::invalid_argument, fmt::format("bad target '{}': {}", target, why));
}

}  // namespace

Result<EtcdTarget> parse_etcd_target(std::string_view target, std::string_view prefix) {
  constexpr std::string_view kScheme = "etcd://";
  if (!target.starts_with(kScheme)) return std::unexpected(bad_target(target, "not etcd://"));
  std::string_view rest = target.substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return std::unexpected(
        bad_target(target, "no service name (etcd://host:port,host:port/service)"));
  }
  Result<std::vector<std::string>> endpoints = parse_etcd_endpoints(rest.substr(0, slash));
  if (!endpoints) return std::unexpected(bad_target(target, endpoints.error().message()));
  EtcdTarget out;
  out.etcd = std::move(*endpoints);
  out.service = std::string(rest.substr(slash + 1));
  if (out.service.find('/') != std::string::npos) {
    return std::unexpected(bad_target(target, "the service name holds a '/'"));
  }
  std::string_view base = prefix;
  while (base.ends_with('/')) base.remove_suffix(1);
  out.key_prefix = fmt::format("{}/{}/", base, out.service);
  return out;
}

Result<ResolvedEndpoint> parse_registration(std::string_view value) {
  const Json doc = Json::parse(value, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return std::unexpected(Status(StatusCode::invalid_argument, "not a JSON object"));
  }
  auto address = doc.find("address");
  if (address == doc.end() || !address->is_string()) {
    return std::unexpected(Status(StatusCode::invalid_argument, "no \"address\" string"));
  }
  ResolvedEndpoint spec;
  std::string why;
  tern::Result<net::Address> parsed =
      net::Address::parse(address->get_ref<const std::string&>(), &why);
  if (!parsed) {
    return std::unexpected(
        Status(StatusCode::invalid_argument,
               fmt::format("address '{}': {}", address->get_ref<const std::string&>(), why)));
  }
  spec.address = *parsed;
  spec.name = spec.address.to_string();
  if (auto weight = doc.find("weight"); weight != doc.end()) {
    if (!weight->is_number_unsigned() || weight->get<std::uint64_t>() > 1'000'000) {
      return std::unexpected(
          Status(StatusCode::invalid_argument, "\"weight\" is not a whole number up to 1000000"));
    }
    spec.weight = static_cast<std::uint32_t>(weight->get<std::uint64_t>());
  }
  if (auto zone = doc.find("zone"); zone != doc.end()) {
    if (!zone->is_string()) {
      return std::unexpected(Status(StatusCode::invalid_argument, "\"zone\" is not a string"));
    }
    spec.zone = zone->get<std::string>();
  }
  if (auto metadata = doc.find("metadata"); metadata != doc.end()) {
    if (!metadata->is_object()) {
      return std::unexpected(Status(StatusCode::invalid_argument, "\"metadata\" is not an object"));
    }
    for (const auto& [key, item] : metadata->items()) {
      if (!item.is_string()) {
        return std::unexpected(Status(StatusCode::invalid_argument,
                                      fmt::format("metadata \"{}\" is not a string", key)));
      }
      spec.metadata.emplace_back(key, item.get<std::string>());
    }
  }
  return spec;
}

std::vector<ResolvedEndpoint> endpoints_of(const std::vector<EtcdKeyValue>& kvs) {
  std::vector<ResolvedEndpoint> out;
  for (const EtcdKeyValue& kv : kvs) {
    Result<ResolvedEndpoint> spec = parse_registration(kv.value);
    if (!spec) {
      TERN_LOG_WARN("rpc: etcd key '{}' is not a registration: {}; skipped", kv.key,
                    spec.error().message());
      continue;
    }
    out.push_back(std::move(*spec));
  }
  std::sort(out.begin(), out.end(),
            [](const ResolvedEndpoint& a, const ResolvedEndpoint& b) { return a.name < b.name; });
  return out;
}

void follow_etcd(Channel::Impl& channel, EtcdClient& client, const EtcdTarget& target,
                 std::int64_t revision, std::vector<EtcdKeyValue> known) {
  std::map<std::string, EtcdKeyValue> keys;
  for (EtcdKeyValue& kv : known) keys[kv.key] = std::move(kv);
  const auto apply = [&] {
    std::vector<EtcdKeyValue> all;
    for (const auto& [key, kv] : keys) all.push_back(kv);
    set_endpoints(channel, endpoints_of(all));
  };
  std::chrono::milliseconds backoff = kInitialBackoff;
  bool need_list = false;
  bool reachable = true;
  const auto failed = [&](const Status& why) {
    if (reachable) {
      TERN_LOG_WARN("rpc: etcd for '{}' unreachable ({}); keeping {} endpoints, retrying",
                    target.service, why.message(), channel.endpoints.size());
    }
    reachable = false;
    (void)this_fiber::sleep_for(backoff);
    backoff = std::min(backoff * 2, channel.options.etcd_max_backoff);
  };
  while (!channel.closing) {
    if (need_list) {
      Result<EtcdRange> range = client.range_prefix(target.key_prefix);
      if (!range) {
        if (!channel.closing) failed(range.error());
        continue;
      }
      keys.clear();
      for (EtcdKeyValue& kv : range->kvs) keys[kv.key] = std::move(kv);
      revision = range->revision;
      apply();
      need_list = false;
    }
    Result<EtcdWatch> watch = client.watch_prefix(target.key_prefix, revision + 1);
    if (!watch) {
      if (watch.error().code() == StatusCode::out_of_range) {
        need_list = true;
      } else if (!channel.closing) {
        failed(watch.error());
      }
      continue;
    }
    if (!reachable) {
      TERN_LOG_INFO("rpc: etcd for '{}' reachable again at {}", target.service, watch->endpoint());
    }
    reachable = true;
    backoff = kInitialBackoff;
    while (!channel.closing) {
      std::int64_t batch_revision = 0;
      Result<std::vector<EtcdEvent>> events =
          watch->next(deadline_after(kRewatchAfter), batch_revision);
      if (!events) {
        const StatusCode code = events.error().code();
        if (code == StatusCode::out_of_range) {
          need_list = true;
        } else if (code != StatusCode::deadline_exceeded && !channel.closing) {
          failed(events.error());
          need_list = events.error().code() == StatusCode::internal;
        }
        break;
      }
      for (EtcdEvent& event : *events) {
        revision = std::max(revision, event.kv.mod_revision);
        if (event.deleted) {
          keys.erase(event.kv.key);
        } else {
          keys[event.kv.key] = std::move(event.kv);
        }
      }
      if (!events->empty()) apply();
    }
    watch->close();
  }
}

}  // namespace tern::rpc::detail
