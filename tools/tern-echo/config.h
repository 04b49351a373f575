#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "command_line.h"
#include "tern/admin/admin_server.h"
#include "tern/io/backend.h"
#include "tern/net/address.h"
#include "tern/net/tcp_server.h"

// tern-echo's checked configuration: the command line's values parsed and validated, and the
// defaults the server applies. A value type; built on the main thread, read by every worker.
namespace tern::echo {

// What the server does with a connection's bytes (handlers.h).
enum class EchoMode {
  echo,     // writes back whatever arrives
  discard,  // reads and drops everything
  frame16,  // answers 16-byte-header messages
  ttcp,     // answers length-prefixed messages with a 4-byte ack
};

// The mode's name as --mode spells it. Any thread.
const char* to_string(EchoMode mode) noexcept;

// Everything serve() needs, checked.
struct EchoConfig {
  std::size_t threads = 0;  // 0: one worker per CPU
  net::Address address;     // where to listen
  io::BackendChoice backend = io::BackendChoice::automatic;
  net::AcceptMode accept = net::AcceptMode::round_robin;
  std::string accept_name;  // as given: roundrobin or reuseport
  EchoMode mode = EchoMode::echo;
  std::size_t buf = 16 * 1024;  // read buffer per connection, at least 64 bytes
  std::size_t max_connections = 0;
  double duration_s = 0;  // 0: until a signal
  std::size_t max_payload = 64 << 20;
  std::optional<net::Address> admin;
  admin::AdminOptions admin_options;  // TLS and token of the admin endpoint
  std::chrono::milliseconds idle_timeout{300'000};
  std::size_t min_progress = 64;  // bytes per progress_interval (0: no check)
  std::chrono::milliseconds progress_interval{10'000};
  std::optional<std::chrono::microseconds> idle_poll;
  std::string tls_cert;  // both set: TLS (serve_tls.h)
  std::string tls_key;
  StackMode stack_mode = StackMode::own;  // of the connection fibers
};

// Checks `options` and builds the configuration; on a wrong value returns nullopt with `why`
// naming the option and what it expects (the caller prints "tern-echo: why", exit status 2).
// Main thread.
std::optional<EchoConfig> validate_options(const EchoOptions& options, std::string& why);

}  // namespace tern::echo
