#pragma once

// What the TLS tests share: contexts made from the test certificates, an echo handler and a
// TlsServer on 127.0.0.1 that stops when it goes away.

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "tern/net/address.h"
#include "tern/tls/byte_stream.h"
#include "tern/tls/tls_context.h"
#include "tern/tls/tls_server.h"
#include "tern/tls/tls_stream.h"
#include "tls_test_util.h"

namespace tern_tls_test {

// The certificates made once for the test binary (tls_test_util.h).
inline const Certs& certs() { return Certs::get(); }

// A server context for the certificate `name` (first in config.certificates). Any thread.
inline tern::tls::TlsContext server_context(const std::string& name = "server",
                                            tern::tls::ServerConfig config = {}) {
  config.certificates.insert(config.certificates.begin(),
                             tern::tls::Certificate::files(certs().crt(name), certs().key(name)));
  tern::Result<tern::tls::TlsContext> context = tern::tls::TlsContext::server(std::move(config));
  EXPECT_TRUE(context) << context.error().message();
  return context ? *context : tern::tls::TlsContext();
}

// A client context that trusts the test CA unless config names its own. Any thread.
inline tern::tls::TlsContext client_context(tern::tls::ClientConfig config = {}) {
  if (config.ca_file.empty() && config.ca_pem.empty()) config.ca_file = certs().ca();
  tern::Result<tern::tls::TlsContext> context = tern::tls::TlsContext::client(std::move(config));
  EXPECT_TRUE(context) << context.error().message();
  return context ? *context : tern::tls::TlsContext();
}

// Echoes until the peer closes, then sends close_notify. A handler of TlsServer.
inline void echo_handler(tern::tls::TlsStream& stream) {
  std::array<std::byte, 16384> buffer;
  if (tern::Result<std::uint64_t> echoed = tern::tls::echo(stream, buffer); echoed)
    (void)stream.shutdown();
}

// A TlsServer on 127.0.0.1 (port 0), stopped when this goes away. Worker fibers only.
class Server {
 public:
  Server(tern::tls::TlsContext context, tern::tls::TlsServer::Handler handler = echo_handler,
         tern::tls::TlsServerOptions options = {})
      : server_(std::move(context), options, std::move(handler)) {
    tern::Result<tern::net::Address> bound = server_.start(tern::net::Address::loopback(0));
    EXPECT_TRUE(bound) << bound.error().message();
    if (bound) address_ = *bound;
  }
  ~Server() { server_.stop(tern::deadline_after(std::chrono::seconds(1))); }
  const tern::net::Address& address() const { return address_; }
  // The port, as text (for command lines).
  std::string port() const { return std::to_string(address_.port()); }
  // host:port of the server.
  std::string host_port(const std::string& host = "localhost") const { return host + ":" + port(); }
  tern::tls::TlsServer& server() { return server_; }

 private:
  tern::tls::TlsServer server_;
  tern::net::Address address_;
};

}  // namespace tern_tls_test
