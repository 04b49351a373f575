#include "command_line.h"

#include <CLI/CLI.hpp>

#include "../common/admin_option.h"
#include "../common/idle_poll_option.h"

namespace tern::echo {

std::optional<int> parse_command_line(int argc, char** argv, EchoOptions& options) {
  CLI::App app{
      "tern-echo: a TCP server answering the load patterns of tern's benchmarks.\n"
      "Modes: echo (write back what arrives: pingpong, sessions), discard (read and drop),\n"
      "frame16 (16-byte-header request/reply: cmd 1 = echo with ack = syn, cmd 2 = discard),\n"
      "ttcp (4-byte big-endian length + payload, answered by a 4-byte ack of the length).\n"
      "Stops on SIGINT/SIGTERM or after --duration, finishing open connections for 1 s."};
  app.add_option("-t,--threads", options.threads, "worker threads (0: one per CPU)");
  app.add_option("--host", options.host, "address to listen on")->capture_default_str();
  app.add_option("-p,--port", options.port, "TCP port (0: the kernel picks; printed at start)")
      ->capture_default_str();
  app.add_option("--io", options.io, "I/O backend: epoll, uring or auto")->capture_default_str();
  app.add_option("--buf", options.buf, "read buffer per connection, bytes")->capture_default_str();
  app.add_option(
         "--accept", options.accept,
         "roundrobin (one acceptor hands connections to the workers in turn) or reuseport (a "
         "listener per worker; the kernel picks by a hash, unevenly for few connections)")
      ->capture_default_str();
  app.add_option("--mode", options.mode, "echo, discard, frame16 or ttcp")->capture_default_str();
  app.add_flag("--discard", options.discard, "same as --mode discard");
  app.add_option("--max-connections", options.max_connections, "0: no limit");
  app.add_option("--duration", options.duration,
                 "stop after this many seconds (0: run until a signal)");
  app.add_option("--max-payload", options.max_payload,
                 "largest frame16/ttcp payload accepted (a larger one closes the connection); "
                 "payloads are streamed through the read buffer, never held whole")
      ->capture_default_str();
  app.add_option("--admin", options.admin, tools::kAdminOptionHelp);
  tools::add_admin_access_options(app, options.admin_access);
  app.add_option("--idle-poll", options.idle_poll, tools::kIdlePollOptionHelp);
  app.add_option("--idle-timeout", options.idle_timeout_ms,
                 "close a connection whose reads and writes make no progress for this many "
                 "milliseconds (0: never)")
      ->capture_default_str();
  app.add_option("--min-progress", options.min_progress,
                 "close a connection that moves some bytes, but fewer than this many, in a "
                 "--progress-interval (a client trickling a byte at a time; 0: no check)")
      ->capture_default_str();
  app.add_option("--progress-interval", options.progress_interval_ms,
                 "the interval of --min-progress, milliseconds")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{3'600'000}));
  app.add_option("--stack-mode", options.stack_mode,
                 "own (a stack per connection fiber) or shared (the worker's shared stack, the "
                 "used part copied out while a connection waits: less memory per idle "
                 "connection, a copy per wait; --mode echo then also frees its read buffer "
                 "whenever the socket is empty)")
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert,
                 "serve TLS with this PEM certificate chain (with --tls-key; --mode echo)");
  app.add_option("--tls-key", options.tls_key, "the PEM private key of --tls-cert");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad command line exits 2
  }
  return std::nullopt;
}

}  // namespace tern::echo
