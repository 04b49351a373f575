#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "tern/admin/admin_transport.h"
#include "tern/base/result.h"
#include "tern/net/address.h"

namespace tern::admin {

// Limits, transport and access control of the admin endpoint.
struct AdminOptions {
  // The whole request head must arrive within this time of the connection being accepted (a
  // peer that trickles bytes gets 408 and is closed).
  std::chrono::milliseconds head_timeout{2000};
  // The limit for writing the response.
  std::chrono::milliseconds request_timeout{5000};
  // A request head (request line and headers) larger than this gets 431.
  std::size_t max_head_bytes = 8192;
  // Connections served at once. While they are all busy, new connections wait in the listen
  // backlog (first come, first served) instead of being closed. The last free slot is kept for
  // a fresh connection: one admitted into it must send its head within reserved_head_timeout,
  // so that slow sockets holding the other slots cannot also hold it for long.
  std::size_t max_connections = 32;
  std::chrono::milliseconds reserved_head_timeout{250};
  // Plain HTTP by default; tls_transport(context) (<tern/admin/admin_tls.h>) serves HTTPS, with
  // mutual TLS when the context requires client certificates.
  AdminTransport transport{};
  // When not empty, every request must carry "Authorization: Bearer <token>"; others get 401
  // with a WWW-Authenticate header. Visible ASCII, no blanks.
  std::string token{};
  // A file holding the token (surrounding blanks and line ends ignored), read by start(); used
  // when token is empty.
  std::string token_file{};
};

// The admin HTTP endpoint, served by fibers on the worker that starts it:
//   GET /metrics  every metric of tern::prof::MetricsRegistry, Prometheus text format 0.0.4
//   GET /status   the runtime as JSON (workers, fibers, connections, I/O backend, uptime)
//   GET /         a list of the pages
// HEAD works as GET without the body. Unknown paths get 404, other methods 405, a malformed
// request 400, an oversized head 431, a head that is not in by head_timeout 408, and with a
// token set, a request without it 401. One request per connection: every response says
// "Connection: close". Bound to an address other than loopback, start() logs a warning, which
// says so when neither TLS nor a token protects it. See docs/observability.md.
// start() and stop() from a fiber on one worker; the server must be stopped before it is
// destroyed (or be stopped by its runtime shutting down).
class AdminServer {
 public:
  explicit AdminServer(AdminOptions options = {});
  // Aborts if the server still runs (call stop() first).
  ~AdminServer();
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Binds `address` (port 0: the kernel picks one), starts serving on the calling worker and
  // returns the address bound; fails without binding when token_file cannot be read or the
  // token is not valid. Worker fiber.
  [[nodiscard]] Result<net::Address> start(const net::Address& address);
  // Stops accepting and waits for the requests in progress (each ends within its
  // head_timeout and request_timeout). The worker that called start().
  void stop();
  bool running() const noexcept { return state_ != nullptr; }

 private:
  struct State;
  AdminOptions options_;
  std::shared_ptr<State> state_;
};

// The address of the admin endpoint that the calling worker's runtime started (from
// RuntimeOptions::admin_address or TERN_ADMIN), if it is listening. Worker fibers.
std::optional<net::Address> runtime_admin_address();

}  // namespace tern::admin
