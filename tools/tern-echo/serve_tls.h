#pragma once

#include "config.h"
#include "tern/net/tcp_server.h"

// tern-echo over TLS (--tls-cert/--tls-key): the echo mode behind tern::tls::TlsServer.
namespace tern::echo {

// Serves `config` over TLS with the TcpServer `options` until a stop signal or --duration, with
// serve()'s start and stop lines; returns the exit status (1: the certificate or the address
// would not do, said on stderr). A worker fiber of the runtime.
int run_tls_server(const EchoConfig& config, const net::ServerOptions& options);

}  // namespace tern::echo
