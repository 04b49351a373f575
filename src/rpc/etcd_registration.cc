#include "etcd_registration.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/log/log.h"
#include "tern/prof/status_sections.h"

namespace tern::rpc::detail {

namespace {

using Json = nlohmann::json;

// Every live registration of the process, for the /status section (one section for all).
struct Registrations {
  std::mutex mutex;
  std::vector<const EtcdRegistration*> list;
};

Registrations& registrations() {
  static Registrations* all = [] {
    auto* made = new Registrations;  // never destroyed: /status may be read during exit
    prof::add_status_section("rpc_registrations", [made] {
      std::lock_guard lock(made->mutex);
      std::string out = "[";
      for (const EtcdRegistration* r : made->list) {
        if (out.size() > 1) out += ", ";
        out += r->status_json();
      }
      return out + "]";
    });
    return made;
  }();
  return *all;
}

}  // namespace

std::string registration_key(std::string_view prefix, std::string_view service,
                             std::string_view address) {
  while (prefix.ends_with('/')) prefix.remove_suffix(1);
  return fmt::format("{}/{}/{}", prefix, service, address);
}

std::string registration_value(const RegistryOptions& options, std::string_view address) {
  Json metadata = Json::object();
  for (const auto& [key, value] : options.metadata) metadata[key] = value;
  const Json value = {{"address", address},
                      {"weight", options.weight},
                      {"zone", options.zone},
                      {"metadata", metadata}};
  return value.dump();
}

EtcdRegistration::EtcdRegistration(RegistryOptions options, std::vector<std::string> etcd,
                                   std::vector<std::string> services, std::string address)
    : options_(std::move(options)),
      services_(std::move(services)),
      address_(std::move(address)),
      client_(std::move(etcd), options_.timeout) {
  client_.set_stop_flag(&stopping_);
  Registrations& all = registrations();
  std::lock_guard lock(all.mutex);
  all.list.push_back(this);
}

EtcdRegistration::~EtcdRegistration() {
  Registrations& all = registrations();
  std::lock_guard lock(all.mutex);
  std::erase(all.list, this);
}

void EtcdRegistration::note(std::string state, std::string error) {
  std::lock_guard lock(mutex_);
  state_ = std::move(state);
  if (!error.empty()) last_error_ = std::move(error);
  shown_lease_ = lease_;
  shown_etcd_ = client_.current();
}

std::string EtcdRegistration::status_json() const {
  std::lock_guard lock(mutex_);
  const Json doc = {{"address", address_},
                    {"services", services_},
                    {"etcd", client_.endpoints()},
                    {"etcd_current", shown_etcd_},
                    {"prefix", options_.prefix},
                    {"state", state_},
                    {"lease", shown_lease_},
                    {"ttl_seconds", options_.ttl.count()},
                    {"registrations", registrations_},
                    {"last_error", last_error_}};
  return doc.dump();
}

void EtcdRegistration::start() {
  worker_ = this_worker::index();
  fiber_ = spawn([this] { run(); }, {.name = "rpc etcd registration"});
}

bool EtcdRegistration::register_all() {
  Result<std::int64_t> lease = client_.lease_grant(options_.ttl);
  if (!lease) {
    note("unregistered", lease.error().message());
    return false;
  }
  lease_ = *lease;
  const std::string value = registration_value(options_, address_);
  for (const std::string& service : services_) {
    Result<void> put =
        client_.put(registration_key(options_.prefix, service, address_), value, lease_);
    if (!put) {
      // Whatever was written goes with the lease when it expires.
      lease_ = 0;
      note("unregistered", put.error().message());
      return false;
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++registrations_;
  }
  note("registered");
  TERN_LOG_INFO("rpc: registered {} at {} in etcd {} (lease {:x}, ttl {} s)",
                fmt::join(services_, ", "), address_, client_.current(), lease_,
                options_.ttl.count());
  return true;
}

void EtcdRegistration::run() {
  const auto renew_every = std::chrono::duration_cast<std::chrono::milliseconds>(options_.ttl) / 3;
  std::chrono::milliseconds backoff{100};
  bool warned = false;
  while (!stopping_) {
    if (lease_ == 0) {
      if (!register_all()) {
        if (stopping_) break;
        if (!warned) {
          TERN_LOG_WARN("rpc: registering {} in etcd failed ({}); retrying", address_, last_error_);
        }
        warned = true;
        (void)this_fiber::sleep_for(backoff);
        backoff = std::min(backoff * 2, renew_every);
        continue;
      }
      warned = false;
      backoff = std::chrono::milliseconds{100};
    }
    if (!this_fiber::sleep_for(renew_every) || stopping_) continue;
    Result<std::int64_t> ttl = client_.lease_keepalive(lease_);
    if (!ttl) {
      if (stopping_) break;
      // The lease may still be alive: keep renewing it; if etcd comes back after the TTL, the
      // answer says it is gone and the keys are written again.
      note("keep-alive failing", ttl.error().message());
      continue;
    }
    if (*ttl <= 0) {
      TERN_LOG_WARN("rpc: the etcd lease of {} expired; registering again", address_);
      lease_ = 0;
      note("lease expired", "the lease expired before it was renewed");
      continue;
    }
    note("registered");
  }
}

void EtcdRegistration::stop_here(Deadline deadline) {
  stopping_ = true;
  if (fiber_.joinable()) {
    fiber_.interrupt();
    fiber_.join();
  }
  stopping_ = false;  // lets the revoke below through the client's stop flag
  if (lease_ != 0) {
    Result<void> revoked = client_.lease_revoke(lease_, deadline);
    if (!revoked && revoked.error().code() != StatusCode::not_found) {
      TERN_LOG_WARN("rpc: revoking the etcd lease of {} failed ({}); it expires within {} s",
                    address_, revoked.error().message(), options_.ttl.count());
      note("stopped", revoked.error().message());
    } else {
      note("deregistered");
    }
    lease_ = 0;
  } else {
    note("stopped");
  }
  stopping_ = true;
}

void EtcdRegistration::stop(Deadline deadline) {
  if (this_worker::index() == worker_) {
    stop_here(deadline);
    return;
  }
  WaitGroup done;
  done.add();
  const bool posted = static_cast<bool>(tern::post(worker_, [this, deadline, &done] {
    spawn([this, deadline, &done] {
      stop_here(deadline);
      done.done();
    }).detach();
  }));
  if (!posted) {
    done.done();
    return;
  }
  while (!done.wait()) this_fiber::yield();
}

}  // namespace tern::rpc::detail
