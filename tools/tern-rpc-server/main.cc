// tern-rpc-server: the tern::rpc server of report 001's RPC benchmark (docs/benchmark-methods.md;
// see --help).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "../common/admin_option.h"
#include "../common/idle_poll_option.h"
#include "../common/server_log.h"
#include "benchmark_message.tern.h"
#include "rpc_message.h"
#include "tern/admin/admin_server.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/signal.h"
#include "tern/net/address.h"
#include "tern/rpc/server.h"
#include "tern/tls/tls_context.h"

namespace {

using namespace std::chrono_literals;

struct Config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::size_t threads = 0;
  std::string io = "auto";
  std::string admin;  // HOST:PORT of the admin endpoint (/metrics); empty: none
  tern::tools::AdminAccessFlags admin_access;  // its TLS and token
  std::string idle_poll;                       // --idle-poll's text; empty: not given
  std::string tls_cert;  // PEM certificate chain: serve RPC over TLS (with tls_key)
  std::string tls_key;   // its private key
  std::string tls_ca;    // CA bundle: require client certificates that chain to it (mutual TLS)
  // Defaults that bound what idle or abandoned clients can hold: a connection costs
  // about 16 KiB even when idle, and a client's Channel pings every 5 s, so a live client is
  // never idle this long.
  std::size_t max_connections = 10'000;
  std::uint64_t idle_timeout_ms = 300'000;
};

// BenchmarkService/Say as report 001's servers do it: the request back with field1 = "OK" and
// field2 = 100. Runs on handler fibers of every worker at once; it keeps no state.
class BenchmarkService final : public tern::bench::BenchmarkServiceBase {
 public:
  tern::rpc::Status Say(tern::rpc::ServerContext&, const tern::bench::BenchmarkMessage& request,
                        tern::bench::BenchmarkMessage& reply) override {
    reply = request;
    tern::bench::answer_rpc_request(reply);
    return {};
  }
  // Pump: each message of the stream answered as Say answers it, until the client ends its side.
  tern::rpc::Status Pump(
      tern::rpc::ServerContext&,
      tern::rpc::ServerReaderWriter<tern::bench::BenchmarkMessage, tern::bench::BenchmarkMessage>&
          stream) override {
    tern::bench::BenchmarkMessage message;
    for (;;) {
      tern::rpc::Result<bool> got = stream.read(message);
      if (!got) return got.error();
      if (!*got) return {};
      tern::bench::answer_rpc_request(message);
      if (tern::rpc::Status sent = stream.write(message); !sent.ok()) return sent;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "tern-rpc-server: serves tern.bench.BenchmarkService/Say over tern::rpc for the RPC\n"
      "benchmark of report 001 (tern-bench rpc; docs/benchmark-methods.md): each request comes\n"
      "back with field1 = \"OK\" and field2 = 100.\n"
      "Prints 'tern-rpc-server: listening on HOST:PORT (...)' once it accepts; stops on\n"
      "SIGINT/SIGTERM, letting calls in flight finish for 1 s, and exits 0."};
  app.add_option("--host", config.host, "address to listen on")->capture_default_str();
  app.add_option("-p,--port", config.port, "TCP port (0: the kernel picks; printed at start)")
      ->capture_default_str();
  app.add_option("-t,--threads", config.threads, "worker threads (0: one per CPU)")
      ->capture_default_str();
  app.add_option("--io", config.io, "I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  app.add_option("--admin", config.admin, tern::tools::kAdminOptionHelp);
  tern::tools::add_admin_access_options(app, config.admin_access);
  app.add_option("--idle-poll", config.idle_poll, tern::tools::kIdlePollOptionHelp);
  app.add_option("--tls-cert", config.tls_cert,
                 "serve RPC over TLS with this PEM certificate chain (with --tls-key)");
  app.add_option("--tls-key", config.tls_key, "the PEM private key of --tls-cert");
  app.add_option("--tls-ca", config.tls_ca,
                 "require client certificates that chain to this PEM CA bundle (mutual TLS; "
                 "needs --tls-cert)");
  app.add_option("--max-connections", config.max_connections,
                 "connections open at once; more are accepted and closed at once (0: no limit)")
      ->capture_default_str();
  app.add_option("--idle-timeout", config.idle_timeout_ms,
                 "close a connection on which nothing is read or written for this many "
                 "milliseconds (0: never)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad command line exits 2
  }
  const tern::Result<tern::io::BackendChoice> backend = tern::io::parse_backend(config.io);
  if (!backend) {
    std::fprintf(stderr, "tern-rpc-server: --io %s: expected epoll, uring or auto\n",
                 config.io.c_str());
    return 2;
  }
  std::string why;
  const tern::Result<tern::net::Address> address =
      tern::net::Address::parse(config.host.find(':') != std::string::npos
                                    ? "[" + config.host + "]:" + std::to_string(config.port)
                                    : config.host + ":" + std::to_string(config.port),
                                &why);
  if (!address) {
    std::fprintf(stderr, "tern-rpc-server: %s\n", why.c_str());
    return 2;
  }
  std::optional<tern::net::Address> admin_address;
  if (!tern::tools::parse_admin_option("tern-rpc-server", config.admin, admin_address)) return 2;
  tern::admin::AdminOptions admin_options;
  if (const std::string why = tern::tools::check_admin_access(
          config.admin_access, admin_address.has_value(), admin_options);
      !why.empty()) {
    std::fprintf(stderr, "tern-rpc-server: %s\n", why.c_str());
    return 2;
  }
  std::optional<std::chrono::microseconds> idle_poll;
  if (!tern::tools::parse_idle_poll_option("tern-rpc-server", config.idle_poll, idle_poll))
    return 2;
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    std::fprintf(stderr, "tern-rpc-server: --tls-cert and --tls-key go together\n");
    return 2;
  }
  if (!config.tls_ca.empty() && config.tls_cert.empty()) {
    std::fprintf(stderr, "tern-rpc-server: --tls-ca: client certificates need TLS (--tls-cert)\n");
    return 2;
  }
  tern::tls::TlsContext tls;
  if (!config.tls_cert.empty()) {
    const tern::Result<tern::tls::TlsContext> context = tern::tls::TlsContext::server(
        {.certificates = {tern::tls::Certificate::files(config.tls_cert, config.tls_key)},
         .ca_file = config.tls_ca,
         .client_auth =
             config.tls_ca.empty() ? tern::tls::ClientAuth::none : tern::tls::ClientAuth::require});
    if (!context) {
      std::fprintf(stderr, "tern-rpc-server: --tls-cert: %s\n", context.error().message().c_str());
      return 2;
    }
    tls = *context;
  }

  // No log call on a worker waits for the log (a stderr nobody reads, say).
  if (!tern::tools::start_server_log("tern-rpc-server")) return 1;
  // From here on SIGINT and SIGTERM wait for wait_for_stop_signal instead of ending the process.
  tern::io::block_stop_signals();
  tern::Runtime runtime({.workers = config.threads,
                         .make_parker = tern::io::reactors(*backend),
                         .idle_poll = idle_poll});
  return runtime.run([&]() -> int {
    BenchmarkService service;
    tern::rpc::ServerOptions options;
    options.tcp.max_connections = config.max_connections;
    options.tcp.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
    options.tls = tls;
    tern::rpc::Server server(options);
    if (tern::Result<void> added = server.add_service(service); !added) {
      std::fprintf(stderr, "tern-rpc-server: cannot add the service: %s\n",
                   added.error().message().c_str());
      return 1;
    }
    const tern::Result<tern::net::Address> bound = server.start(*address);
    if (!bound) {
      std::fprintf(stderr, "tern-rpc-server: %s\n",
                   bound.error().message().c_str());  // names the address
      return 1;
    }
    tern::admin::AdminServer admin(admin_options);
    const std::optional<std::string> admin_text =
        tern::tools::start_admin("tern-rpc-server", admin, admin_address);
    if (!admin_text) {
      server.stop(tern::deadline_after(0s));
      return 1;
    }
    std::printf(
        "tern-rpc-server: listening on %s (%s%zu workers, %s%s)\n", bound->to_string().c_str(),
        tls.is_valid() ? "TLS, " : "", tern::this_worker::count(),
        std::string(tern::io::to_string(tern::io::current_backend())).c_str(), admin_text->c_str());
    std::fflush(stdout);
    (void)tern::io::wait_for_stop_signal();
    const std::size_t cut = server.stop(tern::deadline_after(1s));
    admin.stop();
    const tern::rpc::ServerStats stats = server.stats();
    std::printf(
        "tern-rpc-server: stopped; %llu calls served (%llu failed, %llu rejected), %zu cut "
        "at shutdown\n",
        static_cast<unsigned long long>(stats.calls),
        static_cast<unsigned long long>(stats.failed_calls),
        static_cast<unsigned long long>(stats.rejected_calls), cut);
    return 0;
  });
}
