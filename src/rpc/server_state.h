#pragma once

// What a Server's connections and calls share. Private to src/rpc.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "frame.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/tcp_server.h"
#include "tern/rpc/server.h"
#include "tern/rpc/service.h"
#include "tern/tls/tls_server.h"

namespace tern::rpc::detail {
class ServerConnection;
class EtcdRegistration;

// Heterogeneous lookup for maps keyed by std::string.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};
}  // namespace tern::rpc::detail

namespace tern::rpc {

struct Server::State {
  struct ServiceEntry {
    Service* service = nullptr;
    std::unordered_map<std::string, const Method*, detail::StringHash, std::equal_to<>> methods;
  };
  // The connections living on one worker; touched only on that worker.
  struct WorkerConnections {
    std::unordered_set<detail::ServerConnection*> open;
  };

  ServerOptions options;
  detail::Limits limits;
  std::unordered_map<std::string, ServiceEntry, detail::StringHash, std::equal_to<>> services;
  std::vector<Interceptor> interceptors;
  std::unique_ptr<net::TcpServer> tcp;         // a plaintext server, while it runs
  std::unique_ptr<tls::TlsServer> tls_server;  // a TLS server (kept after stop() for stats())
  std::vector<std::unique_ptr<WorkerConnections>> workers;
  WaitGroup calls;  // every call fiber, so stop() can wait for them
  // The server's registration in etcd while it runs (ServerOptions::registry).
  std::unique_ptr<detail::EtcdRegistration> registration;

  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> in_flight{0};
  std::atomic<std::uint64_t> call_count{0};
  std::atomic<std::uint64_t> failed_calls{0};
  std::atomic<std::uint64_t> rejected_calls{0};
  std::atomic<std::uint64_t> unimplemented_calls{0};
  std::atomic<std::uint64_t> protocol_errors{0};
  std::atomic<std::uint64_t> slow_readers{0};
  std::atomic<std::uint64_t> slow_senders{0};
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> write_timeouts{0};
  std::atomic<std::uint64_t> body_limit_rejected{0};
  std::atomic<std::uint64_t> metadata_limit_rejected{0};
  std::atomic<std::uint64_t> backpressure_pauses{0};
  std::atomic<std::uint64_t> cancelled_by_close{0};
  std::atomic<std::uint64_t> streams{0};
  std::atomic<std::uint64_t> pushes{0};
  // Bytes the connections hold, as each last reported it (it reports a change of more than
  // retained_buffer_size, so the sum is off by at most that much per connection).
  std::atomic<std::uint64_t> connection_bytes{0};
  std::atomic<std::uint64_t> connection_bytes_peak{0};
  std::atomic<std::uint64_t> connection_calls_peak{0};

  // The method service/method names, or nullptr.
  const Method* find(std::string_view service, std::string_view method, Service** owner) const;
};

}  // namespace tern::rpc
