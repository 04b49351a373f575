// tern-echo: one server for every seed benchmark's load pattern (see --help).
#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../common/admin_option.h"
#include "../common/frame16_echo.h"
#include "../common/header16.h"
#include "../common/idle_poll_option.h"
#include "../common/stop_signal.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"
#include "tern/io/io.h"
#include "tern/admin/admin_server.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_server.h"

namespace {

using namespace std::chrono_literals;

struct Config {
  std::size_t threads = 0;
  std::string host = "127.0.0.1";
  std::uint16_t port = 7000;
  std::string io = "auto";
  std::size_t buf = 16 * 1024;
  std::string accept = "roundrobin";
  std::string mode = "echo";
  bool discard = false;
  std::size_t max_connections = 0;
  double duration = 0;
  std::size_t max_payload = 64 << 20;
  std::string admin;  // HOST:PORT of the admin endpoint (/metrics); empty: none
  std::uint64_t idle_timeout_ms = 0;
  std::string idle_poll;  // --idle-poll's text; empty: not given
};

// Writes back whatever arrives (SEEDS 003 pingpong, 004 sessions).
void echo_stream(tern::net::TcpStream& stream, std::size_t buf_size) {
  // Not zeroed: a short-lived connection (SEEDS 004) would spend more on the memset than on I/O.
  const auto storage = std::make_unique_for_overwrite<std::byte[]>(buf_size);
  const std::span buf(storage.get(), buf_size);
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(buf.first(*n))) return;
  }
}

// Reads and drops everything (SEEDS 000 "server discards input").
void discard_stream(tern::net::TcpStream& stream, std::size_t buf_size) {
  const auto storage = std::make_unique_for_overwrite<std::byte[]>(buf_size);
  const std::span buf(storage.get(), buf_size);
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
  }
}

// Answers 16-byte-header messages (SEEDS 000): echo replies with the payload and ack = syn;
// discard sends nothing. Streams (tools::Frame16Echo): each read fills the buffer but for an
// incomplete header kept at its front, and one writev sends back every byte of echo messages it
// brought. A malformed header or an oversized payload closes the connection, after the replies
// to the messages before it.
void frame16_stream(tern::net::TcpStream& stream, std::size_t buf_size, std::size_t max_payload) {
  const auto storage = std::make_unique_for_overwrite<std::byte[]>(buf_size);
  const std::span<std::byte> buf(storage.get(), buf_size);
  tern::tools::Frame16Echo echo(max_payload);
  std::vector<iovec> replies;
  std::size_t kept = 0;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf.subspan(kept));
    if (!n || *n == 0) return;
    replies.clear();
    const std::size_t filled = kept + *n;
    const tern::tools::Frame16Echo::Step step = echo.take(buf.first(filled), replies);
    if (!replies.empty() && !stream.writev_all(replies)) return;
    const tern::tools::Header16& header = echo.header();
    if (step.verdict == tern::tools::Frame16Echo::Verdict::oversized) {
      std::fprintf(stderr, "tern-echo: closing a connection: payload of %u bytes over %zu\n",
                   header.len, max_payload);
      return;
    }
    if (step.verdict == tern::tools::Frame16Echo::Verdict::bad_header) {
      std::fprintf(stderr, "tern-echo: closing a connection: bad header (ver %u, cmd %u)\n",
                   header.ver, header.cmd);
      return;
    }
    kept = step.kept;
    std::memmove(buf.data(), buf.data() + filled - kept, kept);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "tern-echo: a TCP server answering the load patterns of tern's benchmarks.\n"
      "Modes: echo (write back what arrives: pingpong, sessions), discard (read and drop),\n"
      "frame16 (16-byte-header request/reply: cmd 1 = echo with ack = syn, cmd 2 = discard),\n"
      "ttcp (4-byte big-endian length + payload, answered by a 4-byte ack of the length).\n"
      "Stops on SIGINT/SIGTERM or after --duration, finishing open connections for 1 s."};
  app.add_option("-t,--threads", config.threads, "worker threads (0: one per CPU)");
  app.add_option("--host", config.host, "address to listen on")->capture_default_str();
  app.add_option("-p,--port", config.port, "TCP port (0: the kernel picks; printed at start)")
      ->capture_default_str();
  app.add_option("--io", config.io, "I/O backend: epoll, uring or auto")->capture_default_str();
  app.add_option("--buf", config.buf, "read buffer per connection, bytes")->capture_default_str();
  app.add_option(
         "--accept", config.accept,
         "roundrobin (one acceptor hands connections to the workers in turn) or reuseport (a "
         "listener per worker; the kernel picks by a hash, unevenly for few connections)")
      ->capture_default_str();
  app.add_option("--mode", config.mode, "echo, discard, frame16 or ttcp")->capture_default_str();
  app.add_flag("--discard", config.discard, "same as --mode discard");
  app.add_option("--max-connections", config.max_connections, "0: no limit");
  app.add_option("--duration", config.duration,
                 "stop after this many seconds (0: run until a signal)");
  app.add_option("--max-payload", config.max_payload, "largest frame16/ttcp payload accepted")
      ->capture_default_str();
  app.add_option("--admin", config.admin, tern::tools::kAdminOptionHelp);
  app.add_option("--idle-poll", config.idle_poll, tern::tools::kIdlePollOptionHelp);
  app.add_option("--idle-timeout", config.idle_timeout_ms,
                 "close a connection whose reads and writes make no progress for this many "
                 "milliseconds (0: never)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad command line exits 2
  }
  if (config.discard) config.mode = "discard";

  tern::Result<tern::io::BackendChoice> backend = tern::io::parse_backend(config.io);
  if (!backend) {
    std::fprintf(stderr, "tern-echo: --io %s: expected epoll, uring or auto\n", config.io.c_str());
    return 2;
  }
  if (config.mode != "echo" && config.mode != "discard" && config.mode != "frame16" &&
      config.mode != "ttcp") {
    std::fprintf(stderr, "tern-echo: --mode %s: expected echo, discard, frame16 or ttcp\n",
                 config.mode.c_str());
    return 2;
  }
  if (config.accept != "reuseport" && config.accept != "roundrobin") {
    std::fprintf(stderr, "tern-echo: --accept %s: expected reuseport or roundrobin\n",
                 config.accept.c_str());
    return 2;
  }
  std::string why;
  tern::Result<tern::net::Address> address =
      tern::net::Address::parse(config.host.find(':') != std::string::npos
                                    ? "[" + config.host + "]:" + std::to_string(config.port)
                                    : config.host + ":" + std::to_string(config.port),
                                &why);
  if (!address) {
    std::fprintf(stderr, "tern-echo: %s\n", why.c_str());
    return 2;
  }
  std::optional<tern::net::Address> admin_address;
  if (!tern::tools::parse_admin_option("tern-echo", config.admin, admin_address)) return 2;
  std::optional<std::chrono::microseconds> idle_poll;
  if (!tern::tools::parse_idle_poll_option("tern-echo", config.idle_poll, idle_poll)) return 2;
  if (config.buf < 64) config.buf = 64;

  // Signals go to the signalfd fiber, not to a random thread.
  tern::tools::block_stop_signals();

  tern::Runtime runtime({.workers = config.threads,
                         .make_parker = tern::io::reactors(*backend),
                         .idle_poll = idle_poll});
  return runtime.run([&]() -> int {
    tern::net::ServerOptions options;
    options.accept_mode = config.accept == "roundrobin" ? tern::net::AcceptMode::round_robin
                                                        : tern::net::AcceptMode::reuse_port;
    options.max_connections = config.max_connections;
    options.idle_timeout = std::chrono::milliseconds(config.idle_timeout_ms);
    tern::net::TcpServer server(options, [&config](tern::net::TcpStream& stream) {
      // An idle connection costs no read buffer: take one only once the first bytes (or the
      // peer's close) are there. Under --idle-timeout the wait times out like a read.
      if (!stream.wait_readable()) return;
      (void)stream.set_nodelay();
      if (config.mode == "echo") {
        echo_stream(stream, config.buf);
      } else if (config.mode == "discard") {
        discard_stream(stream, config.buf);
      } else if (config.mode == "frame16") {
        frame16_stream(stream, config.buf, config.max_payload);
      } else {
        std::array<std::byte, 4> length;
        std::vector<std::byte> payload;
        while (stream.read_exact(length)) {
          const std::uint64_t size = tern::net::load_big_endian(length.data(), 4);
          if (size > config.max_payload) return;
          payload.resize(size);
          if (!stream.read_exact(payload) || !stream.write_all(length)) return;
        }
      }
    });
    tern::Result<tern::net::Address> bound = server.start(*address);
    if (!bound) {
      std::fprintf(stderr, "tern-echo: cannot listen on %s: %s\n", address->to_string().c_str(),
                   bound.error().message().c_str());
      return 1;
    }
    tern::admin::AdminServer admin;
    const std::optional<std::string> admin_text =
        tern::tools::start_admin("tern-echo", admin, admin_address);
    if (!admin_text) {
      server.stop(tern::deadline_after(0s));
      return 1;
    }
    std::printf("tern-echo: listening on %s (%zu workers, %s, %s, mode %s%s)\n",
                bound->to_string().c_str(), tern::this_worker::count(),
                std::string(tern::io::to_string(tern::io::current_backend())).c_str(),
                config.accept.c_str(), config.mode.c_str(), admin_text->c_str());
    std::fflush(stdout);
    if (config.duration > 0) {
      tern::Fiber watcher = tern::spawn([] { tern::tools::wait_for_stop_signal(); });
      (void)tern::this_fiber::sleep_for(std::chrono::duration<double>(config.duration));
      watcher.interrupt();
      watcher.join();
    } else {
      tern::tools::wait_for_stop_signal();
    }
    const std::size_t cut = server.stop(tern::deadline_after(1s));
    admin.stop();
    const tern::net::ServerStats stats = server.stats();
    std::printf("tern-echo: stopped; %llu connections served, %llu rejected, %zu cut at shutdown\n",
                static_cast<unsigned long long>(stats.accepted),
                static_cast<unsigned long long>(stats.rejected), cut);
    return 0;
  });
}
