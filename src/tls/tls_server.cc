#include "tern/tls/tls_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/wait_group.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"
#include "tern/prof/counter.h"
#include "tern/tls/tls_error.h"

namespace tern::tls {

namespace {

prof::Counter handshakes_done("tls.handshakes", "TLS handshakes a TlsServer completed");
prof::Counter handshakes_resumed("tls.handshakes_resumed",
                                 "TLS handshakes a TlsServer completed by resuming a session");
prof::Counter rejected_not_tls(
    "tls.rejected_not_tls",
    "TLS connections refused: not TLS, no common version or cipher, malformed handshake");
prof::Counter rejected_certificate(
    "tls.rejected_certificate", "TLS connections refused for a missing or bad client certificate");
prof::Counter handshake_timeouts("tls.handshake_timeouts",
                                 "TLS connections cut because the handshake took too long");
prof::Counter handshake_closed("tls.handshake_closed",
                               "TLS connections the client closed or reset during the handshake");
prof::Counter connections_truncated(
    "tls.connections_truncated",
    "TLS connections a TlsServer served whose client closed without close_notify");
prof::Counter connection_errors("tls.connection_errors",
                                "TLS connections a TlsServer served that a TLS error broke after "
                                "the handshake (a bad or oversized record, renegotiation)");

// The options of the TCP server underneath: the listener defers accepting a connection until its
// ClientHello came (the client speaks first), for up to the handshake's whole time.
net::ServerOptions tcp_options(const TlsServerOptions& options) {
  net::ServerOptions tcp = options.tcp;
  if (options.defer_accept && tcp.listen.defer_accept_s == 0) {
    const auto seconds = std::chrono::ceil<std::chrono::seconds>(options.handshake_timeout).count();
    tcp.listen.defer_accept_s = static_cast<int>(std::clamp<std::int64_t>(seconds, 1, 3600));
  }
  return tcp;
}

}  // namespace

struct TlsServer::Counts {
  std::atomic<std::uint64_t> handshakes{0};
  std::atomic<std::uint64_t> resumed{0};
  std::atomic<std::uint64_t> not_tls{0};
  std::atomic<std::uint64_t> certificate{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> closed{0};
  std::atomic<std::uint64_t> reloads{0};
  std::atomic<std::uint64_t> truncated{0};
  std::atomic<std::uint64_t> protocol_errors{0};
  Event stop_watching;
  WaitGroup watcher;
};

TlsServer::TlsServer(TlsContext context, TlsServerOptions options, Handler handler)
    : context_(std::move(context)),
      options_(options),
      handler_(std::move(handler)),
      counts_(std::make_unique<Counts>()),
      tcp_(tcp_options(options), [this](net::TcpStream& tcp) { serve(tcp); }) {}

TlsServer::~TlsServer() = default;

Result<net::Address> TlsServer::start(const net::Address& address) {
  if (!context_.is_server())
    return fail(
        with_explanation(make_error_code(TlsErrc::config), "TlsServer needs a server TlsContext"));
  Result<net::Address> bound = tcp_.start(address);
  if (bound && options_.watch_files.count() > 0) {
    counts_->stop_watching.reset();
    counts_->watcher.add();
    Result<Fiber> watcher = try_spawn([this] { watch_files(); }, {.name = "tls-watch"});
    if (watcher) {
      watcher->detach();
    } else {
      counts_->watcher.done();
      TERN_LOG_WARN("TlsServer: no fiber to watch the certificate files: {}",
                    watcher.error().message());
    }
  }
  return bound;
}

void TlsServer::watch_files() {
  for (;;) {
    // Set (stop) or interrupted (the runtime ends): done; the interval passed: check.
    Result<void> woke = counts_->stop_watching.wait_for(options_.watch_files);
    if (woke || woke.error() != std::errc::timed_out) break;
    Result<bool> reloaded = context_.reload_if_changed();
    if (!reloaded) {
      // At most once per watch interval: not a line a peer can cause.
      TERN_LOG_WARN("TLS certificates changed but did not load, the old ones stay: {}",
                    reloaded.error().message());
    } else if (*reloaded) {
      counts_->reloads.fetch_add(1, std::memory_order_relaxed);
      TERN_LOG_INFO("TLS certificates reloaded (generation {})", context_.generation());
    }
  }
  counts_->watcher.done();
}

std::size_t TlsServer::stop(Deadline grace) {
  counts_->stop_watching.set();
  (void)counts_->watcher.wait();
  return tcp_.stop(grace);
}

void TlsServer::serve(net::TcpStream& tcp) {
  const Result<net::Address> peer = tcp.peer_address();
  const Deadline deadline = deadline_after(options_.handshake_timeout);
  Result<TlsStream> stream = TlsStream::accept(std::move(tcp), context_, deadline);
  if (!stream) {
    const std::error_code error = stream.error();
    if (error == std::errc::operation_canceled) return;  // the server is stopping
    const auto relaxed = std::memory_order_relaxed;
    if (error == std::errc::timed_out) {
      counts_->timeouts.fetch_add(1, relaxed);
      handshake_timeouts.add();
    } else if (error == TlsErrc::certificate) {
      counts_->certificate.fetch_add(1, relaxed);
      rejected_certificate.add();
    } else if (error == TlsErrc::handshake) {
      counts_->not_tls.fetch_add(1, relaxed);
      rejected_not_tls.add();
    } else {
      counts_->closed.fetch_add(1, relaxed);
      handshake_closed.add();
    }
    TERN_PEER_LOG_WARN("TLS client {} refused: {}",
                       peer ? peer->to_string() : std::string("(unknown)"), error.message());
    return;
  }
  counts_->handshakes.fetch_add(1, std::memory_order_relaxed);
  handshakes_done.add();
  if (stream->resumed()) {
    counts_->resumed.fetch_add(1, std::memory_order_relaxed);
    handshakes_resumed.add();
  }
  handler_(*stream);
  const std::error_code failure = stream->failure();
  if (!failure) return;
  if (failure == TlsErrc::truncated) {
    counts_->truncated.fetch_add(1, std::memory_order_relaxed);
    connections_truncated.add();
  } else {
    counts_->protocol_errors.fetch_add(1, std::memory_order_relaxed);
    connection_errors.add();
  }
  TERN_PEER_LOG_WARN("TLS client {} cut off: {}",
                     peer ? peer->to_string() : std::string("(unknown)"), failure.message());
}

TlsServerStats TlsServer::stats() const noexcept {
  TlsServerStats stats;
  stats.tcp = tcp_.stats();
  stats.handshakes = counts_->handshakes.load(std::memory_order_relaxed);
  stats.resumed = counts_->resumed.load(std::memory_order_relaxed);
  stats.rejected_not_tls = counts_->not_tls.load(std::memory_order_relaxed);
  stats.rejected_certificate = counts_->certificate.load(std::memory_order_relaxed);
  stats.handshake_timeouts = counts_->timeouts.load(std::memory_order_relaxed);
  stats.handshake_closed = counts_->closed.load(std::memory_order_relaxed);
  stats.reloads = counts_->reloads.load(std::memory_order_relaxed);
  stats.truncated = counts_->truncated.load(std::memory_order_relaxed);
  stats.protocol_errors = counts_->protocol_errors.load(std::memory_order_relaxed);
  return stats;
}

}  // namespace tern::tls
