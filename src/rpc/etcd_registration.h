#pragma once

// A Server's registration in etcd (ServerOptions::registry): a lease with keep-alive, one key per
// service under it, registering again after the lease was lost, and revoking it on stop. Its
// state is listed in the admin endpoint's /status ("rpc_registrations").

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etcd_client.h"
#include "tern/fiber/fiber.h"
#include "tern/rpc/server.h"

namespace tern::rpc::detail {

// The key and value a server writes for `service` (docs/rpc.md, naming).
std::string registration_key(std::string_view prefix, std::string_view service,
                             std::string_view address);
std::string registration_value(const RegistryOptions& options, std::string_view address);

class EtcdRegistration {
 public:
  // `address` is the advertised "host:port"; `etcd` the parsed endpoint list.
  EtcdRegistration(RegistryOptions options, std::vector<std::string> etcd,
                   std::vector<std::string> services, std::string address);
  ~EtcdRegistration();

  // Starts the fiber that registers and keeps the lease alive, on the calling worker.
  void start();
  // Stops keeping the lease and revokes it (etcd deletes the keys at once), giving up at the
  // deadline (the lease then expires by itself). From a fiber of any worker.
  void stop(Deadline deadline);

  // This registration as a JSON object for /status. Any thread.
  std::string status_json() const;

 private:
  void run();
  // Grants a lease and writes every service's key under it; false (and the error noted) when
  // etcd refused or could not be reached.
  bool register_all();
  void stop_here(Deadline deadline);
  void note(std::string state, std::string error = {});

  RegistryOptions options_;
  std::vector<std::string> services_;
  std::string address_;
  EtcdClient client_;
  Fiber fiber_;
  std::size_t worker_ = 0;
  std::int64_t lease_ = 0;  // on the registration's worker
  bool stopping_ = false;

  mutable std::mutex mutex_;  // guards what status_json reads
  std::string state_ = "starting";
  std::string last_error_;
  std::int64_t shown_lease_ = 0;
  std::string shown_etcd_;
  std::uint64_t registrations_ = 0;  // times the keys were written under a new lease
  std::uint64_t status_section_ = 0;
};

}  // namespace tern::rpc::detail
