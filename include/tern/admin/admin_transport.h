#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/tcp_stream.h"

namespace tern::admin {

// One accepted connection of the admin endpoint as its HTTP code sees it: the TcpStream
// itself, or a stream wrapped around it (TLS). Used by the one fiber that serves it.
class AdminConnection {
 public:
  virtual ~AdminConnection() = default;
  // Reads what has arrived, at most buf.size() bytes; 0 at a clean end of stream.
  [[nodiscard]] virtual Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline) = 0;
  // Writes all of buf.
  [[nodiscard]] virtual Result<void> write_all(std::span<const std::byte> buf,
                                               Deadline deadline) = 0;
  // Ends the sending side (over TLS, close_notify first) once the response is written.
  [[nodiscard]] virtual Result<void> shutdown(Deadline deadline) = 0;
};

// How the admin endpoint turns each accepted TCP connection into the stream it speaks HTTP
// over. The default is plain HTTP; tls_transport (<tern/admin/admin_tls.h>) gives HTTPS.
struct AdminTransport {
  // "http" or "https": how start()'s log line and warnings name the endpoint.
  std::string scheme = "http";
  // Wraps a connection just accepted (e.g. runs the TLS handshake), finishing by `deadline`;
  // an error closes that connection alone, logged and counted by the endpoint. Empty: plain
  // HTTP. Called on the connection's fiber.
  std::function<Result<std::unique_ptr<AdminConnection>>(net::TcpStream, Deadline)> accept{};
};

}  // namespace tern::admin
