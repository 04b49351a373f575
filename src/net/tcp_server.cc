#include "tern/net/tcp_server.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "tern/base/assert.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/io.h"
#include "tern/log/peer_log.h"
#include "tern/prof/metrics.h"

namespace tern::net {

namespace {

// Whether a descriptor is a connection whose handler runs on this worker, and the bytes it had
// moved (received, plus sent and acknowledged) at the last progress check.
struct Progress {
  bool open = false;
  std::uint64_t moved = 0;
  bool sampled = false;  // `moved` was read at the previous check (a whole interval ago)
  bool cut = false;
};

}  // namespace

// What the server keeps per worker; touched only on that worker.
struct TcpServer::WorkerState {
  std::size_t index = 0;
  TcpListener listener;  // open on the workers that accept
  // By descriptor: the connections whose handler runs here (`open`), with what the progress
  // check last saw of them. Indexed rather than hashed: a connection's start and end touch one
  // slot and allocate nothing; the progress check and stop() walk it whole.
  std::vector<Progress> open_streams;
};

// What the server's fibers share; any thread.
struct TcpServer::Shared {
  std::vector<std::unique_ptr<WorkerState>> workers;
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::uint64_t> rejected{0};
  std::atomic<std::uint64_t> accept_errors{0};
  std::atomic<std::uint64_t> open{0};
  std::atomic<std::uint64_t> too_slow{0};
  std::atomic<std::size_t> next_worker{0};
  std::atomic<bool> stopping{false};
  bool tcp = false;  // the listeners are TCP (set before any acceptor starts)
  WaitGroup acceptors;
  WaitGroup connections;
  WaitGroup watchers;  // the progress checks, one per worker
  Event stop_watching;
};

namespace {

prof::Gauge& connections_open = prof::MetricsRegistry::global().gauge(
    "tern_net_connections_open", "TcpServer connections whose handler is running");
prof::Counter connections_closed("net.connections_closed",
                                 "TcpServer connections whose handler returned (socket closed)");
prof::Counter connections_rejected(
    "net.connections_rejected", "Connections a TcpServer closed at once (max_connections reached)");
prof::Counter connections_accepted("net.connections_accepted",
                                   "Connections a TcpServer accepted (handed to its handler)");
prof::Counter connections_too_slow(
    "net.connections_too_slow",
    "TcpServer connections shut down for moving fewer than min_bytes_per_interval in an interval");

// Bytes the kernel says the connection moved: received, plus sent and acknowledged; nullopt for
// a socket that is not TCP.
std::optional<std::uint64_t> bytes_moved(int fd) {
  tcp_info info{};
  socklen_t length = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return std::nullopt;
  if (length < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
    return std::nullopt;
  return info.tcpi_bytes_received + info.tcpi_bytes_acked;
}

std::string peer_of(int fd) {
  Address peer;
  socklen_t length = Address::capacity();
  if (::getpeername(fd, peer.data(), &length) != 0) return "an unknown peer";
  peer.set_length(length);
  return peer.to_string();
}

// Waits for group even if the calling fiber is interrupted (the fibers it waits for are
// finishing in that case too).
void wait_all(WaitGroup& group) {
  while (!group.wait()) this_fiber::yield();
}

}  // namespace

TcpServer::TcpServer(ServerOptions options, Handler handler)
    : options_(std::move(options)),
      handler_(std::move(handler)),
      shared_(std::make_shared<Shared>()) {}

TcpServer::~TcpServer() {
  if (running_) {
    TERN_FATAL("TcpServer destroyed while running; call stop() first");
  }
}

Result<Address> TcpServer::start(const Address& address) {
  const std::size_t workers = this_worker::count();
  const std::size_t here = this_worker::index();
  const bool every_worker = options_.accept_mode == AcceptMode::reuse_port && address.is_ip();
  ListenOptions listen = options_.listen;
  listen.reuse_port = listen.reuse_port || every_worker;
  // Set once on the listener, these reach every accepted TCP connection (Linux copies them to
  // it), which saves up to six system calls per connection.
  listen.keepalive = options_.keepalive;
  listen.send_buffer = options_.send_buffer;
  shared_->tcp = address.is_ip();
  for (std::size_t i = 0; i < workers; ++i) {
    auto state = std::make_unique<WorkerState>();
    state->index = i;
    shared_->workers.push_back(std::move(state));
  }
  // Bind every listener here (binding needs no reactor); each is then used only by the
  // acceptor fiber of its worker.
  Result<TcpListener> first = TcpListener::bind(address, listen);
  if (!first) return fail(first.error());
  Result<Address> bound = first->local_address();
  if (!bound) return fail(bound.error());
  const std::size_t first_worker = every_worker ? 0 : here;
  shared_->workers[first_worker]->listener = std::move(*first);
  if (every_worker) {
    for (std::size_t i = 1; i < workers; ++i) {
      Result<TcpListener> more = TcpListener::bind(*bound, listen);
      if (!more) return fail(more.error());
      shared_->workers[i]->listener = std::move(*more);
    }
  }
  running_ = true;
  if (options_.min_bytes_per_interval > 0 && options_.progress_interval.count() > 0) {
    for (auto& state : shared_->workers) {
      WorkerState* worker = state.get();
      shared_->watchers.add();
      if (!tern::post(worker->index, [this, worker] { watch_progress(*worker); })) {
        shared_->watchers.done();
        return fail(Errc::stopped);
      }
    }
  }
  for (auto& state : shared_->workers) {
    if (!state->listener.is_open()) continue;
    shared_->acceptors.add();
    WorkerState* worker = state.get();
    if (!tern::post(worker->index, [this, worker] { accept_loop(*worker); })) {
      shared_->acceptors.done();
      return fail(Errc::stopped);
    }
  }
  return bound;
}

bool TcpServer::admit() {
  const std::uint64_t before = shared_->open.fetch_add(1, std::memory_order_acq_rel);
  if (options_.max_connections != 0 && before >= options_.max_connections) {
    shared_->open.fetch_sub(1, std::memory_order_acq_rel);
    return false;
  }
  return true;
}

void TcpServer::accept_loop(WorkerState& worker) {
  this_fiber::set_name(options_.name + "-accept");
  while (!shared_->stopping.load(std::memory_order_acquire)) {
    Result<TcpStream> stream = worker.listener.accept();
    if (!stream) {
      if (stream.error() == std::errc::operation_canceled ||
          shared_->stopping.load(std::memory_order_acquire))
        break;
      shared_->accept_errors.fetch_add(1, std::memory_order_relaxed);
      if (stream.error() != std::errc::too_many_files_open &&
          stream.error() != std::errc::too_many_files_open_in_system)
        TERN_PEER_LOG_WARN("accept failed: {}", stream.error().message());
      (void)this_fiber::sleep_for(std::chrono::milliseconds(10));  // let descriptors free up
      continue;
    }
    if (!admit()) {
      shared_->rejected.fetch_add(1, std::memory_order_relaxed);
      connections_rejected.add();
      stream->close();  // a clean close: the peer sees end of stream
      continue;
    }
    shared_->accepted.fetch_add(1, std::memory_order_relaxed);
    connections_accepted.add();
    shared_->connections.add();
    const std::size_t target =
        options_.accept_mode == AcceptMode::round_robin
            ? shared_->next_worker.fetch_add(1, std::memory_order_relaxed) % shared_->workers.size()
            : worker.index;
    if (target != worker.index) {
      WorkerState* owner = shared_->workers[target].get();
      const int fd = stream->socket().release();
      const bool own_stack = options_.stack_mode == StackMode::own;
      const auto run = [this, owner, fd, own_stack] {
        // A posted task runs on a fiber with a stack of its own: a shared-stack connection
        // gets a fiber of its own instead.
        if (own_stack) {
          serve(TcpStream(Socket(fd)), *owner);
        } else {
          start_connection(TcpStream(Socket(fd)), *owner);
        }
      };
      if (!tern::post(target, run)) {
        Socket(fd).close();
        shared_->open.fetch_sub(1, std::memory_order_acq_rel);
        shared_->connections.done();
      }
    } else {
      start_connection(std::move(*stream), worker);
    }
  }
  shared_->acceptors.done();
}

void TcpServer::start_connection(TcpStream stream, WorkerState& worker) {
  Result<Fiber> connection =
      try_spawn([this, &worker, s = std::move(stream)]() mutable { serve(std::move(s), worker); },
                {.name = options_.name, .stack_mode = options_.stack_mode});
  if (connection) {
    connection->detach();
  } else {
    // No memory for its stack: this connection is closed (the callable that held its stream
    // is gone) and counted as a failed accept; the server keeps accepting.
    shared_->accepted.fetch_sub(1, std::memory_order_relaxed);
    shared_->accept_errors.fetch_add(1, std::memory_order_relaxed);
    shared_->open.fetch_sub(1, std::memory_order_acq_rel);
    shared_->connections.done();
    TERN_PEER_LOG_WARN("cannot start a fiber for a connection, closing it: {}",
                       connection.error().message());
  }
}

void TcpServer::serve(TcpStream stream, WorkerState& worker) {
  // A connection posted to another worker runs in the fiber that ran the post: give it the
  // server's name there too.
  this_fiber::set_name(options_.name);
  const int fd = stream.fd();
  if (shared_->tcp) io::declare_tcp(fd);  // this worker's reactor need not ask the socket
  const auto slot = static_cast<std::size_t>(fd);
  if (slot >= worker.open_streams.size()) worker.open_streams.resize(slot + 1 + slot / 2);
  worker.open_streams[slot] = Progress{.open = true};
  connections_open.add(1);
  if (options_.idle_timeout.count() > 0) stream.set_timeout(options_.idle_timeout);
  // A TCP connection inherited its send buffer and keepalive probing from the listener. A Unix
  // stream socket does not inherit SO_SNDBUF, and needs no probes: its peer cannot vanish.
  if (!shared_->tcp && options_.send_buffer > 0) (void)stream.set_send_buffer(options_.send_buffer);
  try {
    handler_(stream);
  } catch (const std::exception& e) {
    TERN_PEER_LOG_WARN("connection handler threw: {}", e.what());
  } catch (...) {
    TERN_PEER_LOG_WARN("connection handler threw a non-exception");
  }
  worker.open_streams[slot].open = false;
  stream.close();
  connections_open.add(-1);
  connections_closed.add();
  shared_->open.fetch_sub(1, std::memory_order_acq_rel);
  shared_->connections.done();
}

// Every progress_interval, shuts down this worker's connections that moved some bytes, but
// fewer than min_bytes_per_interval, since the previous check. Until stop(). The worker's fiber.
void TcpServer::watch_progress(WorkerState& worker) {
  this_fiber::set_name(options_.name + "-progress");
  const std::shared_ptr<Shared> shared = shared_;  // stop() waits for us; the state stays alive
  const std::uint64_t minimum = options_.min_bytes_per_interval;
  const std::chrono::milliseconds interval = options_.progress_interval;
  for (;;) {
    const Result<void> woken = shared->stop_watching.wait_for(interval);
    if (woken || woken.error() != tern::deadline_exceeded() ||
        shared->stopping.load(std::memory_order_acquire))
      break;
    for (std::size_t slot = 0; slot < worker.open_streams.size(); ++slot) {
      Progress& progress = worker.open_streams[slot];
      if (!progress.open || progress.cut) continue;
      const int fd = static_cast<int>(slot);
      const std::optional<std::uint64_t> moved = bytes_moved(fd);
      if (!moved) continue;
      const std::uint64_t delta = *moved - progress.moved;
      if (progress.sampled && delta > 0 && delta < minimum) {
        progress.cut = true;
        ::shutdown(fd, SHUT_RDWR);
        shared->too_slow.fetch_add(1, std::memory_order_relaxed);
        connections_too_slow.add();
        TERN_PEER_LOG_WARN(
            "{}: closing the connection from {}: it moved {} bytes in {} ms, under "
            "min_bytes_per_interval {}",
            options_.name, peer_of(fd), delta, interval.count(), minimum);
      }
      progress.moved = *moved;
      progress.sampled = true;
    }
  }
  shared->watchers.done();
}

std::size_t TcpServer::stop(Deadline grace) {
  if (!running_) return 0;
  shared_->stopping.store(true, std::memory_order_release);
  shared_->stop_watching.set();
  wait_all(shared_->watchers);
  for (auto& state : shared_->workers) {
    if (!state->listener.is_open()) continue;
    WorkerState* worker = state.get();
    // The acceptor may have left its loop on its own (it saw `stopping`), so stop() may return
    // before this runs: the closure holds the state alive.
    (void)tern::post(worker->index, [keep = shared_, worker] { worker->listener.close(); });
  }
  wait_all(shared_->acceptors);
  std::size_t cut = 0;
  if (!shared_->connections.wait_until(grace)) {
    std::atomic<std::size_t> shut{0};
    WaitGroup cutting;
    for (auto& state : shared_->workers) {
      WorkerState* worker = state.get();
      cutting.add();
      const bool posted = static_cast<bool>(tern::post(worker->index, [worker, &shut, &cutting] {
        for (std::size_t slot = 0; slot < worker->open_streams.size(); ++slot) {
          if (!worker->open_streams[slot].open) continue;
          ::shutdown(static_cast<int>(slot), SHUT_RDWR);
          shut.fetch_add(1, std::memory_order_relaxed);
        }
        cutting.done();
      }));
      if (!posted) cutting.done();
    }
    wait_all(cutting);
    cut = shut.load();
    wait_all(shared_->connections);
  }
  running_ = false;
  return cut;
}

ServerStats TcpServer::stats() const noexcept {
  ServerStats stats;
  stats.accepted = shared_->accepted.load(std::memory_order_relaxed);
  stats.rejected = shared_->rejected.load(std::memory_order_relaxed);
  stats.accept_errors = shared_->accept_errors.load(std::memory_order_relaxed);
  stats.open = shared_->open.load(std::memory_order_relaxed);
  stats.too_slow = shared_->too_slow.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace tern::net
