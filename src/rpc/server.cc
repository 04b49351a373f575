#include "tern/rpc/server.h"

#include <algorithm>

#include "etcd_registration.h"
#include "protobuf_log.h"
#include "server_connection.h"
#include "server_state.h"
#include "tern/base/assert.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/log/log.h"
#include "tern/rpc/service.h"

namespace tern::rpc {

namespace {

// Waits for group even when the waiting fiber is interrupted.
void wait_all(WaitGroup& group) {
  while (!group.wait()) this_fiber::yield();
}

// The registration options.registry asks for, started; nullptr (and the reason logged) when the
// options cannot work.
std::unique_ptr<detail::EtcdRegistration> start_registration(const RegistryOptions& options,
                                                             const Server::State& state,
                                                             const net::Address& bound) {
  Result<std::vector<std::string>> etcd = detail::parse_etcd_endpoints(options.etcd);
  if (!etcd) {
    TERN_LOG_ERROR("rpc: ServerOptions::registry.etcd: {}", etcd.error().message());
    return nullptr;
  }
  std::string address = options.advertise;
  if (address.empty()) {
    address = bound.to_string();
    if (address.starts_with("0.0.0.0:") || address.starts_with("[::]:")) {
      TERN_LOG_ERROR(
          "rpc: the server is bound to the wildcard address {}: set "
          "ServerOptions::registry.advertise to the address clients should connect to",
          address);
      return nullptr;
    }
  }
  if (options.ttl < std::chrono::seconds(2)) {
    TERN_LOG_ERROR("rpc: ServerOptions::registry.ttl is {} s; etcd leases need at least 2 s",
                   options.ttl.count());
    return nullptr;
  }
  std::vector<std::string> services;
  for (const auto& [name, entry] : state.services) services.push_back(name);
  std::sort(services.begin(), services.end());
  auto registration = std::make_unique<detail::EtcdRegistration>(
      options, std::move(*etcd), std::move(services), std::move(address));
  registration->start();
  return registration;
}

}  // namespace

const Method* Server::State::find(std::string_view service, std::string_view method,
                                  Service** owner) const {
  auto entry = services.find(service);
  if (entry == services.end()) return nullptr;
  auto found = entry->second.methods.find(method);
  if (found == entry->second.methods.end()) return nullptr;
  *owner = entry->second.service;
  return found->second;
}

Server::Server(ServerOptions options)
    : options_(std::move(options)), state_(std::make_shared<State>()) {
  state_->options = options_;
  state_->limits.max_frame_size = options_.max_frame_size;
  state_->limits.max_metadata_size = options_.max_metadata_size;
  detail::route_protobuf_logs();
}

Server::~Server() {
  if (running_) {
    TERN_FATAL("rpc::Server destroyed while running; call stop() first");
  }
}

tern::Result<void> Server::add_service(Service& service) {
  TERN_ASSERT(!running_, "rpc::Server::add_service after start()");
  const std::string name(service.service_name());
  if (state_->services.contains(name)) return fail(std::errc::file_exists);
  State::ServiceEntry entry;
  entry.service = &service;
  for (const Method& method : service.methods()) {
    entry.methods.emplace(std::string(method.name), &method);
  }
  state_->services.emplace(name, std::move(entry));
  return {};
}

void Server::add_interceptor(Interceptor interceptor) {
  TERN_ASSERT(!running_, "rpc::Server::add_interceptor after start()");
  state_->interceptors.push_back(std::move(interceptor));
}

namespace {

// Stops the listener start() made, at once (a TLS server is kept for its counters).
void stop_listening(Server::State& state) {
  if (state.tcp) {
    (void)state.tcp->stop(kNoDeadline);
    state.tcp.reset();
  } else if (state.tls_server) {
    (void)state.tls_server->stop(kNoDeadline);
  }
}

}  // namespace

tern::Result<net::Address> Server::start(const net::Address& address) {
  TERN_ASSERT(!running_, "rpc::Server::start called twice");
  if (options_.tcp.stack_mode == StackMode::shared) {
    // A connection's state lives on its fiber's stack and its call and writer fibers use it
    // while that fiber is parked, when a shared stack's bytes are elsewhere.
    return fail(with_explanation(
        std::make_error_code(std::errc::invalid_argument),
        "rpc::Server: ServerOptions::tcp.stack_mode must be StackMode::own (a connection's state "
        "is used by its call fibers while its own fiber is parked)"));
  }
  state_->workers.clear();
  for (std::size_t i = 0; i < this_worker::count(); ++i) {
    state_->workers.push_back(std::make_unique<State::WorkerConnections>());
  }
  state_->stopping.store(false, std::memory_order_release);
  State* state = state_.get();
  auto serve = [this, state](detail::Transport& transport) {
    detail::ServerConnection connection(*this, *state, transport);
    connection.serve();
  };
  // Every connection gets TCP_NODELAY from the listener (Linux copies it to each accepted
  // socket), not from a system call of its own.
  net::ServerOptions tcp_options = options_.tcp;
  tcp_options.listen.nodelay = true;
  tern::Result<net::Address> bound;
  if (options_.tls.is_valid()) {
    if (!options_.tls.is_server()) {
      return fail(with_explanation(std::make_error_code(std::errc::invalid_argument),
                                   "rpc::Server: ServerOptions::tls holds a client context"));
    }
    tls::TlsServerOptions tls_options{.tcp = tcp_options,
                                      .handshake_timeout = options_.tls_handshake_timeout};
    state_->tls_server =
        std::make_unique<tls::TlsServer>(options_.tls, tls_options, [serve](tls::TlsStream& s) {
          detail::Transport transport(std::move(s));
          serve(transport);
        });
    bound = state_->tls_server->start(address);
  } else {
    state_->tcp = std::make_unique<net::TcpServer>(tcp_options, [serve](net::TcpStream& s) {
      detail::Transport transport(std::move(s));
      serve(transport);
    });
    bound = state_->tcp->start(address);
  }
  if (!bound) {
    stop_listening(*state_);
    return bound;
  }
  if (!options_.registry.etcd.empty()) {
    state_->registration = start_registration(options_.registry, *state_, *bound);
    if (!state_->registration) {
      stop_listening(*state_);
      return fail(std::errc::invalid_argument);
    }
  }
  running_ = true;
  return bound;
}

std::size_t Server::stop(Deadline grace) {
  if (!running_) return 0;
  // Out of the registry first: clients following it stop choosing this server while it drains.
  if (state_->registration) {
    state_->registration->stop(std::min(grace, deadline_after(options_.registry.timeout)));
    state_->registration.reset();
    (void)this_fiber::sleep_until(
        std::min(grace, deadline_after(options_.registry.deregister_delay)));
  }
  state_->stopping.store(true, std::memory_order_release);
  // Every connection on every worker gets a goaway and closes once its calls are answered.
  WaitGroup told;
  for (std::size_t i = 0; i < state_->workers.size(); ++i) {
    State::WorkerConnections* worker = state_->workers[i].get();
    told.add();
    const bool posted = static_cast<bool>(tern::post(i, [worker, &told] {
      for (detail::ServerConnection* connection : worker->open) connection->goaway();
      told.done();
    }));
    if (!posted) told.done();
  }
  wait_all(told);
  std::size_t cut = 0;
  if (!state_->calls.wait_until(grace)) cut = state_->in_flight.load(std::memory_order_acquire);
  // Connections still open at the deadline are shut down; their calls see cancelled().
  if (state_->tcp) {
    (void)state_->tcp->stop(grace);
  } else {
    (void)state_->tls_server->stop(grace);
  }
  wait_all(state_->calls);
  state_->tcp.reset();
  running_ = false;
  return cut;
}

ServerStats Server::stats() const noexcept {
  const State& s = *state_;
  ServerStats stats;
  stats.calls = s.call_count.load(std::memory_order_relaxed);
  stats.failed_calls = s.failed_calls.load(std::memory_order_relaxed);
  stats.rejected_calls = s.rejected_calls.load(std::memory_order_relaxed);
  stats.unimplemented_calls = s.unimplemented_calls.load(std::memory_order_relaxed);
  stats.protocol_errors = s.protocol_errors.load(std::memory_order_relaxed);
  stats.slow_readers = s.slow_readers.load(std::memory_order_relaxed);
  stats.slow_senders = s.slow_senders.load(std::memory_order_relaxed);
  stats.in_flight = s.in_flight.load(std::memory_order_relaxed);
  stats.connections = s.connections.load(std::memory_order_relaxed);
  stats.write_timeouts = s.write_timeouts.load(std::memory_order_relaxed);
  stats.body_limit_rejected = s.body_limit_rejected.load(std::memory_order_relaxed);
  stats.metadata_limit_rejected = s.metadata_limit_rejected.load(std::memory_order_relaxed);
  stats.backpressure_pauses = s.backpressure_pauses.load(std::memory_order_relaxed);
  stats.cancelled_by_close = s.cancelled_by_close.load(std::memory_order_relaxed);
  stats.connection_bytes = s.connection_bytes.load(std::memory_order_relaxed);
  stats.connection_bytes_peak = s.connection_bytes_peak.load(std::memory_order_relaxed);
  stats.connection_calls_peak = s.connection_calls_peak.load(std::memory_order_relaxed);
  if (s.tls_server) {
    const tls::TlsServerStats tls = s.tls_server->stats();
    stats.tls_handshakes = tls.handshakes;
    stats.tls_resumed = tls.resumed;
    stats.tls_rejected_not_tls = tls.rejected_not_tls;
    stats.tls_rejected_certificate = tls.rejected_certificate;
    stats.tls_handshake_timeouts = tls.handshake_timeouts;
    stats.tls_handshake_closed = tls.handshake_closed;
  }
  stats.streams = s.streams.load(std::memory_order_relaxed);
  stats.pushes = s.pushes.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace tern::rpc
