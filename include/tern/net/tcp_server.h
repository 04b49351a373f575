#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/fiber/fiber_options.h"
#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace tern::net {

// How a TcpServer spreads connections over the runtime's workers.
enum class AcceptMode {
  // One acceptor on the starting worker hands connections out in turn: every worker gets the
  // same count, however few connections there are.
  round_robin,
  // Every worker accepts on its own SO_REUSEPORT listener and the kernel picks one by a hash of
  // the connection's addresses: accepting scales with the workers, but a few connections can
  // land unevenly (a uniform hash splits 10 over 2 workers 7-3 or worse a third of the time).
  reuse_port,
};

// How a TcpServer behaves.
struct ServerOptions {
  AcceptMode accept_mode = AcceptMode::round_robin;
  // Connections open at once; more are accepted and closed at once (0: no limit).
  std::size_t max_connections = 0;
  // A connection whose reads and writes make no progress for this long is timed out: its
  // stream calls without a deadline fail with std::errc::timed_out (0: never).
  std::chrono::milliseconds idle_timeout{0};
  // SO_SNDBUF of every connection, the high-water mark of its unsent bytes: a handler writing to
  // a peer that does not read parks once this much waits in the kernel (0: the kernel's default,
  // which grows on demand up to net.ipv4.tcp_wmem's maximum).
  int send_buffer = 0;
  // Minimum progress, against peers that trickle (a byte a second keeps idle_timeout from ever
  // firing): in every progress_interval in which a connection moves any bytes (received from the
  // peer, or sent and acknowledged by it), it must move at least min_bytes_per_interval, or it is
  // shut down, logged (a peer line) and counted in stats().too_slow. Intervals with no bytes at
  // all are left to idle_timeout. TCP only (Unix sockets are not checked). 0: no check.
  std::size_t min_bytes_per_interval = 0;
  std::chrono::milliseconds progress_interval{10000};
  // Keepalive probing of every TCP connection, so a handler waiting on a peer that vanished
  // without a FIN (a dead host, a cut link) gets an error instead of waiting for ever
  // (idle 0, the default: none).
  KeepaliveOptions keepalive{};
  // Names each connection's fiber on every worker (profiler, fiber dumps, log lines; up to 31
  // characters are kept).
  std::string name = "connection";
  // Where each connection's fiber keeps its stack. StackMode::shared suits many mostly idle
  // connections: a parked connection keeps only the part of the stack it used (copied to the
  // heap) instead of a stack of its own; the handler must follow the rules of docs/guide.md
  // ("Shared stacks").
  StackMode stack_mode = StackMode::own;
  ListenOptions listen{};
};

// Counters of a TcpServer; any thread.
struct ServerStats {
  std::uint64_t accepted = 0;       // connections handed to the handler
  std::uint64_t rejected = 0;       // closed at once because max_connections was reached
  std::uint64_t accept_errors = 0;  // failed accepts (e.g. out of file descriptors)
  std::uint64_t open = 0;           // connections whose handler is running
  std::uint64_t too_slow = 0;       // shut down for moving too few bytes (min_bytes_per_interval)
};

// A TCP (or Unix stream) server on the current tern::Runtime: a fiber per connection runs the
// handler with the connection's stream; the stream is closed when the handler returns.
// start() and stop() from a worker fiber; stats() from any thread. The server must outlive
// stop().
class TcpServer {
 public:
  using Handler = std::function<void(TcpStream&)>;

  TcpServer(ServerOptions options, Handler handler);
  // Aborts if the server is still running (call stop first).
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // Binds address (port 0: the kernel picks one) and starts accepting; returns the address
  // bound. With AcceptMode::reuse_port every worker gets a listener on that port.
  [[nodiscard]] Result<Address> start(const Address& address);

  // Graceful shutdown: stops accepting at once, lets handlers run until `grace`, then shuts
  // down the connections still open (their reads see end of stream, their writes fail) and
  // waits for their handlers to return. Returns how many connections had to be cut.
  std::size_t stop(Deadline grace);

  ServerStats stats() const noexcept;
  bool running() const noexcept { return running_; }

 private:
  struct WorkerState;
  struct Shared;
  void accept_loop(WorkerState& worker);
  void serve(TcpStream stream, WorkerState& worker);
  // Runs serve() in a fiber of its own on the calling worker (closing the connection if none
  // can be made).
  void start_connection(TcpStream stream, WorkerState& worker);
  void watch_progress(WorkerState& worker);
  bool admit();

  ServerOptions options_;
  Handler handler_;
  std::shared_ptr<Shared> shared_;
  bool running_ = false;
};

}  // namespace tern::net
