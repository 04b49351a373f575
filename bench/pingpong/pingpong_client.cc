// pingpong_client: the throughput client of SEEDS.md 003 (asio's pingpong test), on tern fibers.
//
//   pingpong_client HOST PORT THREADS BLOCKSIZE SESSIONS SECONDS [--io B] [--json] [--check-data]
//
// SESSIONS connections are spread round-robin over THREADS tern workers, a fiber each. Once all
// are connected, each sends one BLOCKSIZE block and then writes back whatever it reads, for
// SECONDS. Throughput = bytes read during the window / SECONDS, in MB/s (10^6 B/s) and MiB/s.
//
// Verification: every session must keep echoing (a session that read nothing fails the run);
// at the end of the window each session has exactly one block in flight (sent - received ==
// BLOCKSIZE), which it then drains: a server that drops, duplicates or stalls data fails the run
// (exit status 1). --check-data also compares every byte read with the block pattern.

#include <netinet/in.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/address.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;

struct Config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::size_t threads = 1;
  std::size_t block = 16 * 1024;
  std::size_t sessions = 1;
  double seconds = 5;
  std::string io = "auto";
  bool json = false;
  bool check_data = false;
  double drain_timeout = 5;
};

// What one session did; written only by its fiber, read after every session finished.
struct SessionResult {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;            // in total, drain included
  std::uint64_t received_in_window = 0;  // what counts for throughput
  std::uint64_t in_flight_at_end = 0;    // sent - received when the window closed
  std::string error;                     // empty: the session passed every check
};

// Everything the sessions share; the end of the window is published before `go` is set.
struct Shared {
  const Config* config = nullptr;
  tern::net::Address address;
  std::vector<std::byte> pattern;
  std::vector<SessionResult> results;
  tern::WaitGroup connected;
  tern::WaitGroup finished;
  tern::Event go;
  tern::Deadline window_end{};
  tern::Deadline drain_end{};
};

std::string describe(std::error_code error) { return error.message(); }

// text with the characters JSON strings cannot hold as they are escaped.
std::string json_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
  }
  return out;
}

// Whether `bytes`, read at stream offset `offset`, match the cyclic block pattern.
bool matches_pattern(const std::vector<std::byte>& pattern, std::uint64_t offset,
                     std::span<const std::byte> bytes) {
  std::size_t at = offset % pattern.size();
  while (!bytes.empty()) {
    const std::size_t step = std::min(bytes.size(), pattern.size() - at);
    if (std::memcmp(bytes.data(), pattern.data() + at, step) != 0) return false;
    bytes = bytes.subspan(step);
    at = 0;
  }
  return true;
}

// One connection, on the worker that runs it.
void run_session(Shared& shared, std::size_t index) {
  SessionResult& result = shared.results[index];
  const Config& config = *shared.config;
  tern::Result<tern::net::TcpStream> stream =
      tern::net::TcpStream::connect(shared.address, tern::deadline_after(10s));
  if (!stream) {
    result.error = "connect: " + describe(stream.error());
    shared.connected.done();
    return;
  }
  (void)stream->set_nodelay();
  shared.connected.done();
  if (!shared.go.wait()) {
    result.error = "canceled before the start";
    return;
  }
  std::vector<std::byte> buf = shared.pattern;
  if (tern::Result<void> sent = stream->write_all(buf, shared.drain_end); !sent) {
    result.error = "first write: " + describe(sent.error());
    return;
  }
  result.sent = buf.size();
  const tern::Deadline window_end = shared.window_end;
  // Echo phase: read until the window closes, writing back every byte read.
  for (;;) {
    tern::Result<std::size_t> n = stream->read(buf, window_end);
    if (!n) {
      if (n.error() == std::errc::timed_out) break;
      result.error = "read: " + describe(n.error());
      return;
    }
    if (*n == 0) {
      result.error = "the server closed the connection";
      return;
    }
    const std::span<const std::byte> got = std::span(buf).first(*n);
    if (config.check_data && !matches_pattern(shared.pattern, result.received, got)) {
      result.error = "corrupt data at stream offset " + std::to_string(result.received);
      return;
    }
    result.received += *n;
    if (tern::Clock::now() < window_end) result.received_in_window += *n;
    if (result.received > result.sent) {
      result.error = "the server sent more bytes than it was sent";
      return;
    }
    if (tern::Result<void> sent = stream->write_all(got, shared.drain_end); !sent) {
      result.error = "write: " + describe(sent.error());
      return;
    }
    result.sent += *n;
  }
  // Drain phase: the one block still in flight must come back whole.
  result.in_flight_at_end = result.sent - result.received;
  if (result.in_flight_at_end != config.block) {
    result.error = "sent - received = " + std::to_string(result.in_flight_at_end) +
                   " at the end of the window, expected one block";
    return;
  }
  while (result.received < result.sent) {
    const std::size_t want = std::min<std::uint64_t>(buf.size(), result.sent - result.received);
    tern::Result<std::size_t> n = stream->read(std::span(buf).first(want), shared.drain_end);
    if (!n || *n == 0) {
      result.error = "drain: " + std::to_string(result.sent - result.received) +
                     " bytes never came back (" + (n ? "end of stream" : describe(n.error())) + ")";
      return;
    }
    if (config.check_data &&
        !matches_pattern(shared.pattern, result.received, std::span(buf).first(*n))) {
      result.error = "corrupt data at stream offset " + std::to_string(result.received);
      return;
    }
    result.received += *n;
  }
  if (result.received_in_window == 0) result.error = "the session never got an echo";
}

// Prints the result; returns the process's exit status.
int report(const Shared& shared, double seconds, std::string_view backend) {
  const Config& config = *shared.config;
  std::uint64_t total = 0;
  std::uint64_t min_session = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_session = 0;
  std::size_t failed = 0;
  std::string first_error;
  for (std::size_t i = 0; i < shared.results.size(); ++i) {
    const SessionResult& r = shared.results[i];
    total += r.received_in_window;
    min_session = std::min(min_session, r.received_in_window);
    max_session = std::max(max_session, r.received_in_window);
    if (!r.error.empty()) {
      if (failed++ == 0) first_error = "session " + std::to_string(i) + ": " + r.error;
    }
  }
  rusage usage = {};
  ::getrusage(RUSAGE_SELF, &usage);
  const double cpu_user = static_cast<double>(usage.ru_utime.tv_sec) + usage.ru_utime.tv_usec / 1e6;
  const double cpu_sys = static_cast<double>(usage.ru_stime.tv_sec) + usage.ru_stime.tv_usec / 1e6;
  const double mb = static_cast<double>(total) / seconds / 1e6;
  const double mib = static_cast<double>(total) / seconds / (1024.0 * 1024.0);
  if (config.json) {
    std::printf(
        "{\"host\": \"%s\", \"port\": %u, \"threads\": %zu, \"block\": %zu, \"sessions\": %zu, "
        "\"seconds\": %.3f, \"client_io\": \"%s\", \"bytes_read\": %llu, \"mb_per_s\": %.2f, "
        "\"mib_per_s\": %.2f, \"min_session_bytes\": %llu, \"max_session_bytes\": %llu, "
        "\"client_cpu_user_s\": %.3f, \"client_cpu_sys_s\": %.3f, "
        "\"failed_sessions\": %zu, \"verified\": %s, \"error\": \"%s\"}\n",
        config.host.c_str(), config.port, config.threads, config.block, config.sessions, seconds,
        std::string(backend).c_str(), static_cast<unsigned long long>(total), mb, mib,
        static_cast<unsigned long long>(min_session), static_cast<unsigned long long>(max_session),
        cpu_user, cpu_sys, failed, failed == 0 ? "true" : "false",
        json_escape(first_error).c_str());
  } else {
    std::printf("pingpong %s:%u: %zu threads (%s), block %zu, %zu sessions, %.3f s\n",
                config.host.c_str(), config.port, config.threads, std::string(backend).c_str(),
                config.block, config.sessions, seconds);
    std::printf("  %llu bytes read: %.2f MB/s (%.2f MiB/s); per session %llu..%llu bytes\n",
                static_cast<unsigned long long>(total), mb, mib,
                static_cast<unsigned long long>(min_session),
                static_cast<unsigned long long>(max_session));
    std::printf("  client CPU: %.2f s user, %.2f s system\n", cpu_user, cpu_sys);
    if (failed == 0) {
      std::printf("  verified: every session echoed, sent == received after the drain%s\n",
                  config.check_data ? ", every byte matched" : "");
    } else {
      std::printf("  FAILED: %zu session(s); first: %s\n", failed, first_error.c_str());
    }
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "pingpong_client: SEEDS 003 pingpong throughput client on tern fibers.\n"
      "Each session sends one block, then writes back whatever it reads; throughput = bytes\n"
      "read / seconds. Verifies that every session echoes and that no byte is lost (exit 1)."};
  app.add_option("host", config.host, "server address (numeric IPv4/IPv6)")->required();
  app.add_option("port", config.port, "server port")->required();
  app.add_option("threads", config.threads, "client worker threads")->required();
  app.add_option("blocksize", config.block, "bytes of the block each session sends")->required();
  app.add_option("sessions", config.sessions, "connections")->required();
  app.add_option("seconds", config.seconds, "length of the measured window")->required();
  app.add_option("--io", config.io, "client I/O backend: epoll, uring or auto")
      ->capture_default_str();
  app.add_flag("--json", config.json, "print one JSON object instead of text");
  app.add_flag("--check-data", config.check_data, "compare every byte read with the pattern");
  app.add_option("--drain-timeout", config.drain_timeout,
                 "seconds allowed for the blocks in flight to come back")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (config.threads == 0 || config.block == 0 || config.sessions == 0 || config.seconds <= 0) {
    std::fprintf(stderr, "pingpong_client: threads, blocksize, sessions and seconds must be > 0\n");
    return 2;
  }
  tern::Result<tern::io::BackendChoice> backend = tern::io::parse_backend(config.io);
  if (!backend) {
    std::fprintf(stderr, "pingpong_client: --io %s: expected epoll, uring or auto\n",
                 config.io.c_str());
    return 2;
  }
  std::string why;
  const std::string text = config.host.find(':') != std::string::npos
                               ? "[" + config.host + "]:" + std::to_string(config.port)
                               : config.host + ":" + std::to_string(config.port);
  tern::Result<tern::net::Address> address = tern::net::Address::parse(text, &why);
  if (!address) {
    std::fprintf(stderr, "pingpong_client: %s: %s\n", text.c_str(), why.c_str());
    return 2;
  }

  Shared shared;
  shared.config = &config;
  shared.address = *address;
  shared.pattern.resize(config.block);
  for (std::size_t i = 0; i < config.block; ++i)
    shared.pattern[i] = static_cast<std::byte>((i * 131 + i / 251) & 0xff);
  shared.results.resize(config.sessions);

  tern::Runtime runtime({.workers = config.threads, .make_parker = tern::io::reactors(*backend)});
  return runtime.run([&]() -> int {
    const std::string_view backend_name = tern::io::to_string(tern::io::current_backend());
    shared.connected.add(config.sessions);
    shared.finished.add(config.sessions);
    for (std::size_t worker = 0; worker < config.threads; ++worker) {
      tern::Result<void> posted = tern::post(worker, [&shared, worker] {
        const std::size_t step = shared.config->threads;
        for (std::size_t i = worker; i < shared.config->sessions; i += step) {
          tern::spawn(
              [&shared, i] {
                run_session(shared, i);
                shared.finished.done();
              },
              {.name = "session"})
              .detach();
        }
      });
      if (!posted) {
        std::fprintf(stderr, "pingpong_client: cannot start worker %zu\n", worker);
        return 1;
      }
    }
    (void)shared.connected.wait();
    const tern::Deadline start = tern::Clock::now();
    const auto window = std::chrono::duration_cast<tern::Clock::duration>(
        std::chrono::duration<double>(config.seconds));
    shared.window_end = start + window;
    shared.drain_end = shared.window_end + std::chrono::duration_cast<tern::Clock::duration>(
                                               std::chrono::duration<double>(config.drain_timeout));
    shared.go.set();
    (void)shared.finished.wait();
    const double seconds = std::chrono::duration<double>(window).count();
    return report(shared, seconds, backend_name);
  });
}
