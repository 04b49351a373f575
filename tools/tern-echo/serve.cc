#include "serve.h"

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "../common/admin_option.h"
#include "../common/server_log.h"
#include "handlers.h"
#include "serve_tls.h"
#include "tern/admin/admin_server.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/signal.h"
#include "tern/net/tcp_server.h"

namespace tern::echo {

namespace {

using namespace std::chrono_literals;

// Waits for a stop signal, or at most `duration_s` seconds when it is positive. Worker fiber.
void wait_until_stopped(double duration_s) {
  (void)io::wait_for_stop_signal(
      duration_s > 0 ? deadline_after(std::chrono::duration<double>(duration_s)) : kNoDeadline);
}

// The server on a worker fiber of the runtime: listens, announces, waits, stops.
int run_server(const EchoConfig& config) {
  net::ServerOptions options;
  options.accept_mode = config.accept;
  options.max_connections = config.max_connections;
  options.idle_timeout = config.idle_timeout;
  options.min_bytes_per_interval = config.min_progress;
  options.progress_interval = config.progress_interval;
  options.name = std::string("echo-") + to_string(config.mode);
  options.stack_mode = config.stack_mode;
  options.listen.nodelay = true;  // every mode answers small messages at once
  if (!config.tls_cert.empty()) return run_tls_server(config, options);
  net::TcpServer server(options,
                        [&config](net::TcpStream& stream) { serve_connection(stream, config); });
  Result<net::Address> bound = server.start(config.address);
  if (!bound) {
    std::fprintf(stderr, "tern-echo: %s\n", bound.error().message().c_str());  // names the address
    return 1;
  }
  admin::AdminServer admin(config.admin_options);
  const std::optional<std::string> admin_text =
      tools::start_admin("tern-echo", admin, config.admin);
  if (!admin_text) {
    server.stop(deadline_after(0s));
    return 1;
  }
  std::printf("tern-echo: listening on %s (%zu workers, %s, %s, mode %s%s)\n",
              bound->to_string().c_str(), this_worker::count(),
              std::string(io::to_string(io::current_backend())).c_str(), config.accept_name.c_str(),
              to_string(config.mode), admin_text->c_str());
  std::fflush(stdout);
  wait_until_stopped(config.duration_s);
  const std::size_t cut = server.stop(deadline_after(1s));
  admin.stop();
  const net::ServerStats stats = server.stats();
  std::printf(
      "tern-echo: stopped; %llu connections served, %llu rejected, %llu too slow, %zu cut at "
      "shutdown\n",
      static_cast<unsigned long long>(stats.accepted),
      static_cast<unsigned long long>(stats.rejected),
      static_cast<unsigned long long>(stats.too_slow), cut);
  return 0;
}

}  // namespace

int serve(const EchoConfig& config) {
  if (!tools::start_server_log("tern-echo")) return 1;
  // From here on SIGINT and SIGTERM wait for wait_until_stopped instead of ending the process.
  io::block_stop_signals();
  Runtime runtime({.workers = config.threads,
                   .make_parker = io::reactors(config.backend),
                   .idle_poll = config.idle_poll});
  return runtime.run([&config] { return run_server(config); });
}

}  // namespace tern::echo
