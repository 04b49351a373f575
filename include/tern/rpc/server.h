#pragma once

#include <tern/base/clock.h>
#include <tern/base/result.h>
#include <tern/net/address.h>
#include <tern/net/tcp_server.h>
#include <tern/rpc/server_context.h>
#include <tern/rpc/status.h>
#include <tern/tls/tls_context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::rpc {

class Service;
class Server;

namespace detail {
class ServerCall;
}

// Registration of a Server in etcd, for clients on "etcd://..." targets (docs/rpc.md): every
// service the server hosts is written as "<prefix>/<service>/<address>" -> {"address", "weight",
// "zone", "metadata"} under a lease the server keeps alive; stop() revokes it before draining.
struct RegistryOptions {
  // etcd's client endpoints, "host:port,host:port" (empty: the server does not register).
  std::string etcd;
  std::string prefix = "/tern/services";
  // The "host:port" clients connect to (empty: the bound address, which then must not be a
  // wildcard such as 0.0.0.0).
  std::string advertise;
  // What clients' load balancing reads: a relative weight and a zone (locality).
  std::uint32_t weight = 1;
  std::string zone;
  std::vector<std::pair<std::string, std::string>> metadata;
  // The lease's time to live, renewed every ttl/3: a server that stops renewing (hung, cut off)
  // is dropped by etcd, and so by its clients, within ttl. Whole seconds, at least 2.
  std::chrono::seconds ttl{5};
  // The deadline of one etcd request.
  std::chrono::milliseconds timeout{2'000};
  // stop() waits this long after revoking (within its grace) before it sends goaway, so that
  // clients following etcd have moved their new calls elsewhere and none is refused.
  std::chrono::milliseconds deregister_delay{300};
};

// How an rpc::Server behaves; the defaults suit most services.
struct ServerOptions {
  // Accept mode, connection limit, idle timeout and keepalive of the TCP server underneath. A
  // client that vanishes without closing (a dead host, a cut link) is found by keepalive probes
  // after 60 s of silence and 3 unanswered probes 10 s apart; its calls and streams then end.
  // stack_mode must stay StackMode::own (start() refuses shared stacks).
  net::ServerOptions tcp{.keepalive = {.idle = std::chrono::seconds{60}}};
  // Calls running at once across the server; more get resource_exhausted (0: no limit).
  std::size_t max_concurrent_calls = 100'000;
  // The largest frame (header, metadata and body) accepted; a larger one closes the connection.
  std::uint32_t max_frame_size = 64u << 20;
  // The largest metadata block accepted.
  std::uint32_t max_metadata_size = 64u << 10;
  // Encoded replies a connection may hold unsent (its peer does not read); past this the
  // connection is closed as a slow reader.
  std::size_t max_pending_reply_bytes = 64u << 20;
  // Once the first byte of a frame has arrived, the whole frame must arrive within this; a peer
  // that trickles bytes slower is cut as a slow sender (0: no limit).
  std::chrono::milliseconds frame_read_timeout{30'000};
  // The largest request body a compressed frame may decompress to, checked against the size the
  // zstd frame declares before anything is allocated and while decompressing; a larger one fails
  // its call with resource_exhausted and the connection goes on.
  std::size_t max_decompressed_size = 4u << 20;
  // Bytes one connection may hold: its read buffer and decompression scratch, the frames it has
  // not sent yet (replies, pongs, goaways) and the requests of its queued and running calls.
  // Past it the server stops reading from that connection until some of it is released
  // (backpressure); a single frame is always taken once nothing else is held.
  std::size_t max_connection_memory = 16u << 20;
  // A connection with unsent frames on which no byte could be written for this long is closed
  // as a slow reader (reset, so the kernel drops what it queued) (0: no limit).
  std::chrono::milliseconds write_timeout{30'000};
  // Calls of one connection running at once; at the limit the server stops reading from that
  // connection until one ends (backpressure, not rejection) (0: no limit).
  std::size_t max_calls_per_connection = 512;
  // Metadata entries a request may carry, and bytes of one entry (key and value together),
  // counted on the parsed form before any entry is built; over either, the call fails with
  // resource_exhausted and the connection goes on.
  std::size_t max_metadata_entries = 256;
  std::size_t max_metadata_entry_size = 16u << 10;
  // Read buffers, decompression scratch and write buffers that grew past this for a large frame
  // are released once the frame is done, so an idle connection keeps at most about this much.
  std::size_t retained_buffer_size = 64u << 10;
  // Stack size of the fibers that run handlers (0: the runtime's default).
  std::size_t handler_stack_size = 0;
  // Registration in etcd (off unless registry.etcd is set).
  RegistryOptions registry{};
  // Serves TLS when it holds a server context (docs/tls.md): every connection runs the handshake
  // before its first frame. A client that speaks plaintext, shows a refused certificate or does
  // not finish within tls_handshake_timeout is logged, counted (ServerStats::tls_*) and closed.
  tls::TlsContext tls{};
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  // Bytes of messages a stream's client may send ahead of the handler's reads (the stream's
  // flow-control window; at least 64 KiB): a handler that does not read parks the client's
  // writes once this much waits, so the memory a stream holds stays bounded.
  std::uint32_t stream_window = 256u << 10;
};

// Counters of a Server; any thread.
struct ServerStats {
  std::uint64_t calls = 0;                // calls that ran a handler
  std::uint64_t failed_calls = 0;         // of those, calls that returned a status other than ok
  std::uint64_t rejected_calls = 0;       // resource_exhausted (a limit) or unavailable (stopping)
  std::uint64_t unimplemented_calls = 0;  // no such service or method
  std::uint64_t protocol_errors = 0;      // connections closed for a malformed frame
  std::uint64_t slow_readers = 0;         // connections closed for not reading their replies
  std::uint64_t slow_senders = 0;         // connections closed for a frame over frame_read_timeout
  std::uint64_t in_flight = 0;            // calls running now
  std::uint64_t connections = 0;          // connections open now
  std::uint64_t write_timeouts = 0;       // of slow_readers, closed after write_timeout
  std::uint64_t body_limit_rejected = 0;  // of rejected_calls, over max_decompressed_size
  std::uint64_t metadata_limit_rejected = 0;  // of rejected_calls, over a metadata entry limit
  std::uint64_t backpressure_pauses = 0;    // times a connection stopped reading (memory or calls)
  std::uint64_t cancelled_by_close = 0;     // running calls cancelled as their connection closed
  std::uint64_t connection_bytes = 0;       // bytes the open connections hold now (all of them)
  std::uint64_t connection_bytes_peak = 0;  // the most bytes one connection held at a time
  std::uint64_t connection_calls_peak = 0;  // the most calls one connection ran at a time
  // With ServerOptions::tls, since start():
  std::uint64_t tls_handshakes = 0;            // connections whose handshake succeeded
  std::uint64_t tls_resumed = 0;               // of those, resumed sessions
  std::uint64_t tls_rejected_not_tls = 0;      // plaintext, garbage, no common version or cipher
  std::uint64_t tls_rejected_certificate = 0;  // a client certificate missing or refused
  std::uint64_t tls_handshake_timeouts = 0;    // past tls_handshake_timeout
  std::uint64_t tls_handshake_closed = 0;      // the client left during the handshake
  std::uint64_t streams = 0;                   // streams opened (also counted in calls)
  std::uint64_t pushes = 0;                    // push frames queued by handlers
};

// The rest of an interceptor chain: calling it runs the next interceptor, or the handler after
// the last. Call it at most once; not calling it answers the call with the interceptor's status.
class Next {
 public:
  Status operator()(ServerContext& context) const;

 private:
  friend class detail::ServerCall;
  Next(detail::ServerCall* call, std::size_t index) noexcept : call_(call), index_(index) {}
  detail::ServerCall* call_;
  std::size_t index_;
};

// Runs around every call, in the order added: may read the metadata, time the call, reject it
// (return a status without calling next) or change its reply metadata. Runs on the handler's
// fiber.
using Interceptor = std::function<Status(ServerContext& context, const Next& next)>;

// An RPC server (docs/rpc-protocol.md) on the current tern::Runtime: every connection has a
// reading fiber, every call its own fiber, replies go out in any order. add_service and
// add_interceptor before start(); start() and stop() from a worker fiber; stats() from any
// thread. The server and its services must outlive stop().
class Server {
 public:
  explicit Server(ServerOptions options = {});
  // Aborts if the server is still running (call stop first).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Hosts `service` under its service_name(); a second service of the same name is an error
  // (std::errc::file_exists).
  [[nodiscard]] tern::Result<void> add_service(Service& service);
  // Adds an interceptor to the chain every call runs through.
  void add_interceptor(Interceptor interceptor);

  // Binds address (port 0: the kernel picks one) and starts serving; returns the address bound.
  // With options().registry.etcd set it then registers its services in etcd from a fiber of the
  // calling worker, in the background (and again whenever etcd lost the registration); a registry
  // option that cannot work (no address to advertise, a malformed endpoint list) fails with
  // std::errc::invalid_argument, logged with the reason.
  [[nodiscard]] tern::Result<net::Address> start(const net::Address& address);
  // Graceful shutdown: revokes its etcd registration (if any; clients on etcd:// targets stop
  // sending new calls), stops accepting, tells every client (goaway) to send no more calls, lets
  // calls in flight finish until `grace`, then closes what is left. Returns the calls that were
  // still running at the deadline (their clients see unavailable).
  std::size_t stop(Deadline grace);

  ServerStats stats() const noexcept;
  bool running() const noexcept { return running_; }
  const ServerOptions& options() const noexcept { return options_; }

  // What the server's connections and calls share (defined in src/rpc).
  struct State;

 private:
  friend class Next;
  friend class detail::ServerCall;

  ServerOptions options_;
  std::shared_ptr<State> state_;
  bool running_ = false;
};

}  // namespace tern::rpc
