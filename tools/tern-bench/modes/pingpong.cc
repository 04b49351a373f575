// pingpong: the throughput test of report 003 (asio's performance test; docs/benchmark-methods.md).
// --sessions connections spread over --threads workers, a fiber each. Once all are connected, each
// sends one --block block and then writes back whatever it reads, for --duration seconds.
// Throughput is what asio's client counts: the bytes the client read during the window / the
// window's seconds, in MB/s (10^6 B/s) and MiB/s. Every byte read is compared with the block
// pattern. When the window closes each session stops echoing, half-closes and reads until the
// server closes: the one block still in flight must come back whole, so a server that drops, adds
// or changes a byte fails the run. Latency: from writing bytes until they come back (one trip
// around).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/latency.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/tcp_stream.h"
#include "tern/tls/tls_stream.h"

namespace tern::bench {

namespace {

// What one session did; written only by its fiber, read once every session finished.
struct SessionResult {
  std::uint64_t sent = 0;
  std::uint64_t received = 0;            // in total, the final drain included
  std::uint64_t received_in_window = 0;  // what throughput counts
  std::string error;                     // empty: every check passed
};

struct Run {
  explicit Run(const PingpongOptions& options)
      : o(options),
        pattern(options.block_bytes),
        meter(options.net.workers),
        latency(options.net.workers),
        results(options.sessions) {
    for (std::size_t i = 0; i < pattern.size(); ++i)
      pattern[i] = static_cast<std::byte>((i * 131 + i / 251) & 0xff);
  }
  Deadline io_deadline() const { return deadline_after(seconds(o.timeout_s)); }

  const PingpongOptions& o;
  net::Address address;
  tls::TlsContext tls;  // --tls: the client context
  std::vector<std::byte> pattern;
  Meter meter;
  LatencyRecorder latency;
  std::vector<SessionResult> results;
  LoadGate gate;
  Clock::time_point start{};
  Deadline window_end{};
};

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

// Times when each written range of the stream left; a range's latency ends when the reads
// pass its last byte.
class TripClock {
 public:
  void wrote(std::uint64_t end_offset, Clock::time_point at) {
    pending_.emplace_back(end_offset, at);
  }
  void read_up_to(std::uint64_t offset, Clock::time_point now, LatencyRecorder& latency,
                  std::size_t slot) {
    while (!pending_.empty() && pending_.front().first <= offset) {
      latency.record(slot, now - pending_.front().second);
      pending_.pop_front();
    }
  }

 private:
  std::deque<std::pair<std::uint64_t, Clock::time_point>> pending_;
};

// A session's connection: TCP, or TLS over it with --tls.
Result<net::TcpStream> open_tcp(Run& run) {
  Result<net::TcpStream> stream = net::TcpStream::connect(run.address, run.io_deadline());
  if (stream) (void)stream->set_nodelay();
  return stream;
}
Result<tls::TlsStream> open_tls(Run& run) {
  Result<net::TcpStream> tcp = open_tcp(run);
  if (!tcp) return fail(tcp.error());
  return tls::TlsStream::connect(std::move(*tcp), run.tls, run.o.net.target.host,
                                 run.io_deadline());
}

// One session over `Stream` (net::TcpStream or tls::TlsStream, the same calls).
template <typename Stream>
void run_session(Run& run, std::size_t index, Result<Stream> (*open)(Run&)) {
  SessionResult& result = run.results[index];
  const std::size_t slot = this_worker::index();
  const auto failed = [&](std::string error) {
    result.error = std::move(error);
    run.meter.add_error(slot);
  };
  Result<Stream> stream = open(run);
  if (!stream) {
    failed("connect: " + stream.error().message());
    run.gate.connected.done();
    return;
  }
  run.gate.connected.done();
  if (!run.gate.go.wait()) return failed("canceled before the start");
  std::vector<std::byte> buf = run.pattern;
  TripClock trips;
  trips.wrote(buf.size(), Clock::now());
  if (Result<void> sent = stream->write_all(buf, run.io_deadline()); !sent)
    return failed("first write: " + sent.error().message());
  result.sent = buf.size();
  run.meter.add_sent(slot, buf.size());
  // Echo phase: until the window closes, write back every byte read. The bytes of a read that
  // ends after the window closes are kept, not written back.
  std::uint64_t kept = 0;
  for (;;) {
    Result<std::size_t> n = stream->read(buf, std::min(run.window_end, run.io_deadline()));
    if (!n) {
      if (n.error() == std::errc::timed_out && Clock::now() >= run.window_end) break;
      return failed(fmt::format("read at offset {}: {}", result.received, n.error().message()));
    }
    if (*n == 0) return failed(fmt::format("the server closed at offset {}", result.received));
    const std::span<const std::byte> got = std::span(buf).first(*n);
    if (!matches_pattern(run.pattern, result.received, got))
      return failed(fmt::format("corrupt data at stream offset {}", result.received));
    result.received += *n;
    const Clock::time_point now = Clock::now();
    trips.read_up_to(result.received, now, run.latency, slot);
    if (now < run.window_end) {
      result.received_in_window += *n;
      run.meter.add_done(slot, 0, *n);
    }
    if (result.received > result.sent) return failed("the server sent more bytes than it was sent");
    if (now >= run.window_end) {
      kept = *n;
      break;
    }
    trips.wrote(result.sent + *n, now);
    if (Result<void> sent = stream->write_all(got, run.io_deadline()); !sent)
      return failed(fmt::format("write at offset {}: {}", result.sent, sent.error().message()));
    result.sent += *n;
    run.meter.add_sent(slot, *n);
  }
  // Drain: stop echoing, half-close; everything still in flight must come back, then the close.
  const std::uint64_t in_flight = result.sent - result.received;
  if (in_flight + kept != run.o.block_bytes)
    return failed(fmt::format("{} bytes in flight when the window closed, expected one block of {}",
                              in_flight + kept, run.o.block_bytes));
  if (Result<void> shut = stream->shutdown(SHUT_WR); !shut)
    return failed("shutdown: " + shut.error().message());
  for (;;) {
    Result<std::size_t> n = stream->read(buf, run.io_deadline());
    if (!n)
      return failed(fmt::format("drain: {} bytes of {} sent never came back ({})",
                                result.sent - result.received, result.sent, n.error().message()));
    if (*n == 0) break;
    if (!matches_pattern(run.pattern, result.received, std::span(buf).first(*n)))
      return failed(fmt::format("corrupt data at stream offset {}", result.received));
    result.received += *n;
  }
  if (result.received != result.sent)
    return failed(fmt::format("the server closed with {} bytes sent and {} received", result.sent,
                              result.received));
  if (result.received_in_window == 0) failed("no echo during the window");
}

int run_pingpong(const PingpongOptions& o) {
  Result<net::Address> address = resolve_target_or_say(o.net.target, "pingpong");
  if (!address) return 1;
  Run run(o);
  run.address = *address;
  if (o.tls) {
    Result<tls::TlsContext> context =
        tls::TlsContext::client({.ca_file = o.tls_ca, .verify_peer = !o.tls_ca.empty()});
    if (!context) {
      std::fprintf(stderr, "tern-bench pingpong: %s\n", context.error().message().c_str());
      return 1;
    }
    run.tls = *context;
  }
  Report report;
  report.mode = "pingpong";
  CpuWindow cpu(o.net.server_pid);
  Progress progress(
      run.meter, std::chrono::seconds(1),
      [](const ProgressSample& s) {
        const double t = s.interval_s > 0 ? s.interval_s : 1;
        return fmt::format("[{:6.1f} s] read {:.2f} MB/s (total {} bytes), errors {}", s.elapsed_s,
                           static_cast<double>(s.delta.bytes) / t / 1e6, s.total.bytes,
                           s.total.errors);
      },
      o.net.output.quiet);
  std::string backend;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    run_gated_load(
        run.gate, o.sessions, "pingpong",
        [&run](std::size_t i) {
          if (run.o.tls)
            run_session<tls::TlsStream>(run, i, &open_tls);
          else
            run_session<net::TcpStream>(run, i, &open_tcp);
        },
        [&](Clock::time_point now) {
          run.start = now;
          run.window_end = now + seconds(o.net.duration_s);
        },
        cpu, progress, report);
  });

  std::uint64_t total = 0;
  std::uint64_t written = 0;
  std::uint64_t min_session = UINT64_MAX;
  std::uint64_t max_session = 0;
  for (std::size_t i = 0; i < run.results.size(); ++i) {
    const SessionResult& r = run.results[i];
    total += r.received_in_window;
    written += r.sent;
    min_session = std::min(min_session, r.received_in_window);
    max_session = std::max(max_session, r.received_in_window);
    if (!r.error.empty()) report.add_error(fmt::format("session {}: {}", i, r.error));
  }
  const double window = o.net.duration_s;
  const double mb = static_cast<double>(total) / window / 1e6;
  const double mib = static_cast<double>(total) / window / (1024.0 * 1024.0);
  report.params["threads"] = o.net.workers;
  report.params["block_bytes"] = o.block_bytes;
  report.params["sessions"] = o.sessions;
  report.params["timeout_s"] = o.timeout_s;
  report.params["tls"] = o.tls;
  add_network_params(report, o.net, backend);
  report.figures["bytes"] = total;
  report.figures["bytes_written"] = written;
  report.figures["mb_per_s"] = round_to(mb, 3);
  report.figures["mib_per_s"] = round_to(mib, 3);
  report.figures["min_session_bytes"] = min_session;
  report.figures["max_session_bytes"] = max_session;
  const prof::Histogram latency = run.latency.merged();
  add_latency_figures(report.figures, latency, "trip_");
  report.summary.push_back(fmt::format(
      "{} bytes read by the client in {:.3f} s: {:.2f} MB/s ({:.2f} MiB/s); per session {}..{} "
      "bytes",
      total, window, mb, mib, min_session, max_session));
  report.summary.push_back(latency_line("trip time (write until it came back)", latency));
  return conclude(report, o.net.output);
}

}  // namespace

void add_pingpong_command(CLI::App& app) { add_mode(app, &add_pingpong_options, &run_pingpong); }

}  // namespace tern::bench
