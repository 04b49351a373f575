#pragma once

// The admin endpoint over TLS: AdminOptions::transport = tls_transport(context). Header-only,
// so that tern::admin (and tern::tern) need no OpenSSL; a program that includes this header
// links tern::tls.

#include <sys/socket.h>

#include <memory>
#include <utility>

#include "tern/admin/admin_transport.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_stream.h"

namespace tern::admin {

namespace detail {

// An admin connection over a TlsStream whose handshake is done.
class TlsAdminConnection final : public AdminConnection {
 public:
  explicit TlsAdminConnection(tls::TlsStream stream) noexcept : stream_(std::move(stream)) {}
  Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline) override {
    return stream_.read(buf, deadline);
  }
  Result<void> write_all(std::span<const std::byte> buf, Deadline deadline) override {
    return stream_.write_all(buf, deadline);
  }
  Result<void> shutdown(Deadline deadline) override { return stream_.shutdown(SHUT_WR, deadline); }

 private:
  tls::TlsStream stream_;
};

}  // namespace detail

// Serves the admin endpoint as HTTPS with `context`, a server context: its certificates (and
// their reload()), and with ClientAuth::require only clients whose certificate chains to its
// CA bundle get in. The handshake must end within AdminOptions::head_timeout of the accept.
// Any thread.
inline AdminTransport tls_transport(tls::TlsContext context) {
  AdminTransport transport;
  transport.scheme = "https";
  transport.accept = [context = std::move(context)](
                         net::TcpStream tcp,
                         Deadline deadline) -> Result<std::unique_ptr<AdminConnection>> {
    Result<tls::TlsStream> stream = tls::TlsStream::accept(std::move(tcp), context, deadline);
    if (!stream) return fail(stream.error());
    return std::make_unique<detail::TlsAdminConnection>(std::move(*stream));
  };
  return transport;
}

}  // namespace tern::admin
