#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/address.h"
#include "tern/net/tcp_server.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_stream.h"

namespace tern::tls {

// How a TlsServer behaves: the TcpServer's options and the handshake's time limit.
struct TlsServerOptions {
  net::ServerOptions tcp;
  // A client that has not finished its handshake this long after it connected is cut off
  // (e.g. half a ClientHello and then silence).
  std::chrono::milliseconds handshake_timeout{10'000};
  // How often the certificate, key and CA files are checked for changes, to reload() the
  // context when they did (a failed reload is logged and the old certificates kept; 0: never).
  std::chrono::milliseconds watch_files{0};
  // The listener hands over a connection once its ClientHello came (TCP_DEFER_ACCEPT, for up to
  // handshake_timeout; unless tcp.listen.defer_accept_s says otherwise): the handshake's first
  // read finds the ClientHello instead of parking for it, and a connect that sends nothing takes
  // no descriptor or fiber meanwhile.
  bool defer_accept = true;
};

// Counters of a TlsServer; any thread.
struct TlsServerStats {
  net::ServerStats tcp;                    // the connections underneath
  std::uint64_t handshakes = 0;            // handed to the handler
  std::uint64_t resumed = 0;               // of those, resumed sessions
  std::uint64_t rejected_not_tls = 0;      // plaintext, garbage, unsupported version or cipher
  std::uint64_t rejected_certificate = 0;  // a peer certificate missing or refused
  std::uint64_t handshake_timeouts = 0;    // handshake_timeout passed
  std::uint64_t handshake_closed = 0;      // the client left (or reset) before it finished
  std::uint64_t reloads = 0;               // reloads made by watch_files
  // After the handshake, connections whose stream broke (TlsStream::failure()) by the time the
  // handler returned:
  std::uint64_t truncated = 0;        // the client closed without close_notify
  std::uint64_t protocol_errors = 0;  // a bad or oversized record, a renegotiation request
};

// A TLS server on the current tern::Runtime: a TcpServer whose connections run the TLS
// handshake (with a deadline) before the handler gets a TlsStream. A failed handshake is
// logged with its reason (rate limited), counted, and closes that connection alone; so is a
// stream that a TLS error broke while the handler ran (counted when the handler returns).
// start() and stop() from a worker fiber; stats() and context() from any thread.
class TlsServer {
 public:
  using Handler = std::function<void(TlsStream&)>;

  // A server of `context` (a server context) that runs handler for every connection whose
  // handshake succeeds. Any thread.
  TlsServer(TlsContext context, TlsServerOptions options, Handler handler);
  // Aborts if the server is still running (call stop first).
  ~TlsServer();
  TlsServer(const TlsServer&) = delete;
  TlsServer& operator=(const TlsServer&) = delete;

  // Binds address (port 0: the kernel picks) and starts accepting; returns the address bound.
  [[nodiscard]] Result<net::Address> start(const net::Address& address);
  // TcpServer::stop: stops accepting, waits up to `grace`, cuts what is left; returns the cut.
  std::size_t stop(Deadline grace);

  // The server's counters. Any thread.
  TlsServerStats stats() const noexcept;
  // The context: reload() it to change certificates without dropping connections.
  TlsContext& context() noexcept { return context_; }
  // Whether start() succeeded and stop() has not been called. Worker fibers.
  bool running() const noexcept { return tcp_.running(); }

 private:
  struct Counts;
  void serve(net::TcpStream& tcp);
  void watch_files();

  TlsContext context_;
  TlsServerOptions options_;
  Handler handler_;
  std::unique_ptr<Counts> counts_;
  net::TcpServer tcp_;
};

}  // namespace tern::tls
