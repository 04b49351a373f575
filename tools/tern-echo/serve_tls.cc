#include "serve_tls.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "../common/admin_option.h"
#include "tern/admin/admin_server.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/signal.h"
#include "tern/tls/byte_stream.h"
#include "tern/tls/tls_server.h"

namespace tern::echo {

using namespace std::chrono_literals;

int run_tls_server(const EchoConfig& config, const net::ServerOptions& options) {
  Result<tls::TlsContext> context = tls::TlsContext::server(
      {.certificates = {tls::Certificate::files(config.tls_cert, config.tls_key)}});
  if (!context) {
    std::fprintf(stderr, "tern-echo: %s\n", context.error().message().c_str());
    return 1;
  }
  const std::size_t buf = config.buf;
  tls::TlsServer server(*context, {.tcp = options}, [buf](tls::TlsStream& stream) {
    // TCP_NODELAY came from the listener (options.listen.nodelay), as in the plaintext modes: a
    // small reply must not wait for the ACK of the one before it (after the handshake's last
    // flight, Nagle would hold the first reply for a delayed ACK).
    const auto storage = std::make_unique_for_overwrite<std::byte[]>(buf);
    if (tls::echo(stream, std::span(storage.get(), buf))) (void)stream.shutdown();
  });
  Result<net::Address> bound = server.start(config.address);
  if (!bound) {
    std::fprintf(stderr, "tern-echo: %s\n", bound.error().message().c_str());
    return 1;
  }
  admin::AdminServer admin(config.admin_options);
  const std::optional<std::string> admin_text =
      tools::start_admin("tern-echo", admin, config.admin);
  if (!admin_text) {
    server.stop(deadline_after(0s));
    return 1;
  }
  std::printf("tern-echo: listening on %s (%zu workers, %s, %s, mode echo over TLS%s)\n",
              bound->to_string().c_str(), this_worker::count(),
              std::string(io::to_string(io::current_backend())).c_str(), config.accept_name.c_str(),
              admin_text->c_str());
  std::fflush(stdout);
  (void)io::wait_for_stop_signal(
      config.duration_s > 0 ? deadline_after(std::chrono::duration<double>(config.duration_s))
                            : kNoDeadline);
  const std::size_t cut = server.stop(deadline_after(1s));
  admin.stop();
  const tls::TlsServerStats stats = server.stats();
  std::printf(
      "tern-echo: stopped; %llu connections served, %llu TLS handshakes (%llu resumed), %llu "
      "refused in the handshake, %zu cut at shutdown\n",
      static_cast<unsigned long long>(stats.tcp.accepted),
      static_cast<unsigned long long>(stats.handshakes),
      static_cast<unsigned long long>(stats.resumed),
      static_cast<unsigned long long>(stats.rejected_not_tls + stats.rejected_certificate +
                                      stats.handshake_timeouts + stats.handshake_closed),
      cut);
  return 0;
}

}  // namespace tern::echo
