// traffic: the load of report 000's testBenchmark (docs/benchmark-methods.md). -t connections, each
// a fiber, send requests of the 16-byte-header protocol (header + -s payload bytes; syn = the
// request's sequence number, ack = syn). -S: write one request, read its reply, repeat. -A: a
// writer fiber writes requests as fast as the socket takes them (at most --window in flight) while
// a reader fiber reads the replies. Every reply is checked (header and payload). At the end each
// connection shuts down its write side and waits for the server to close: a missing, extra or (with
// -c 2) unread request fails the run.
#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/frame.h"
#include "core/latency.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/semaphore.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"

namespace tern::bench {

namespace {

using tools::Command;
using tools::kHeader16Size;

constexpr std::size_t kMaxBatchRequests = 64;
constexpr std::size_t kMaxBatchBytes = 64 * 1024;

// What one connection did; written only by its fibers, read once every connection finished.
struct ConnectionResult {
  std::uint64_t sent = 0;
  std::uint64_t replied = 0;
  Clock::time_point end{};  // the last reply (echo) or the server's close (discard)
  std::string error;        // empty: every check passed
};

// Everything the connections share. The start and window_end are written before `go` is set.
struct Run {
  explicit Run(const TrafficOptions& options)
      : o(options),
        pattern(options.payload_bytes),
        cmd(options.cmd == 1 ? Command::echo : Command::discard),
        format(tools::header16_format(options.payload_bytes)),
        meter(options.net.workers),
        latency(options.net.workers),
        results(options.connections) {}

  Deadline io_deadline() const { return deadline_after(seconds(o.timeout_s)); }
  std::uint64_t quota(std::size_t connection) const {
    if (o.count == 0) return UINT64_MAX;
    return o.count / o.connections + (connection < o.count % o.connections ? 1 : 0);
  }

  const TrafficOptions& o;
  net::Address address;
  RequestPattern pattern;
  Command cmd;
  net::FrameFormat format;
  Meter meter;
  LatencyRecorder latency;
  std::vector<ConnectionResult> results;
  LoadGate gate;
  Clock::time_point start{};
  Deadline window_end = kNoDeadline;
};

void fail_connection(Run& run, ConnectionResult& result, std::string error) {
  if (!result.error.empty()) return;
  result.error = std::move(error);
  run.meter.add_error(this_worker::index());
}

// The next complete reply in `in`, reading more as needed; on failure sets `why`.
Result<net::Frame> next_frame(Run& run, net::TcpStream& stream, net::Buffer& in,
                              std::uint64_t replied, std::string* why) {
  for (;;) {
    Result<std::optional<net::Frame>> frame = net::parse_frame(in.readable(), run.format);
    if (!frame) {
      *why = fmt::format("reply {}: length field over the {} payload bytes sent", replied,
                         run.o.payload_bytes);
      return fail(frame.error());
    }
    if (*frame) return **frame;
    const std::size_t want = std::min<std::size_t>(kHeader16Size + run.o.payload_bytes, 64 * 1024);
    Result<std::size_t> n = in.read_from(stream, run.io_deadline(), want);
    if (!n) {
      *why = fmt::format("reading reply {}: {}", replied, n.error().message());
      return fail(n.error());
    }
    if (*n == 0) {
      *why = fmt::format("the server closed the connection after {} replies", replied);
      return fail(Errc::eof);
    }
  }
}

// After the last reply (-c 1): half-closes and waits for the server to close. Extra bytes, a
// reset or no close in time fail the connection.
void expect_close(Run& run, net::TcpStream& stream, net::Buffer& in, ConnectionResult& result) {
  if (Result<void> shut = stream.shutdown(SHUT_WR); !shut)
    return fail_connection(run, result, "shutdown: " + shut.error().message());
  std::uint64_t extra = in.size();
  in.clear();
  for (;;) {
    Result<std::size_t> n = in.read_from(stream, run.io_deadline());
    if (!n) {
      if (n.error() == std::errc::connection_reset)
        return fail_connection(
            run, result,
            fmt::format("the server reset the connection after {} requests: it closed with "
                        "requests unread",
                        result.sent));
      if (n.error() == std::errc::timed_out)
        return fail_connection(
            run, result,
            fmt::format("the server did not close within {} s of the end", run.o.timeout_s));
      return fail_connection(run, result, "waiting for the close: " + n.error().message());
    }
    if (*n == 0) break;
    extra += *n;
    in.clear();
  }
  if (extra > 0)
    return fail_connection(run, result,
                           fmt::format("{} unexpected bytes after the last reply", extra));
}

// -S with replies: one request in flight.
void run_sync_echo(Run& run, net::TcpStream& stream, ConnectionResult& result,
                   std::uint64_t quota) {
  const std::size_t slot = this_worker::index();
  net::Buffer in(std::max<std::size_t>(64 * 1024, 2 * (kHeader16Size + run.o.payload_bytes)));
  std::array<std::byte, kHeader16Size> header;
  const auto size = static_cast<std::uint32_t>(run.o.payload_bytes);
  for (std::uint64_t seq = 0; seq < quota; ++seq) {
    const Clock::time_point sent_at = Clock::now();
    if (sent_at >= run.window_end) break;
    const auto syn = static_cast<std::uint32_t>(seq);
    request_header(syn, run.cmd, size).store(header);
    const std::span<const std::byte> payload = run.pattern.payload(syn);
    std::array<iovec, 2> iov = {iovec{header.data(), header.size()},
                                iovec{const_cast<std::byte*>(payload.data()), payload.size()}};
    if (Result<void> written = stream.writev_all(iov, run.io_deadline()); !written)
      return fail_connection(run, result,
                             fmt::format("writing request {}: {}", seq, written.error().message()));
    ++result.sent;
    run.meter.add_sent(slot, 1);
    std::string why;
    Result<net::Frame> frame = next_frame(run, stream, in, result.replied, &why);
    if (!frame) return fail_connection(run, result, why);
    if (!check_reply(frame->header, frame->body, syn, run.pattern, &why))
      return fail_connection(run, result, why);
    in.consume(frame->size());
    const Clock::time_point now = Clock::now();
    run.latency.record(slot, now - sent_at);
    ++result.replied;
    result.end = now;
    run.meter.add_done(slot, 1, size);
  }
  expect_close(run, stream, in, result);
}

// Writes requests until the window closes, the quota is sent or an error, in batches of up to
// `batch` requests per gather write. With a window semaphore, one permit per request. Appends
// each request's send time to `sent_at` when given (the reader's latency).
void write_requests(Run& run, net::TcpStream& stream, ConnectionResult& result, std::uint64_t quota,
                    std::size_t batch, Semaphore* window, std::deque<Clock::time_point>* sent_at) {
  const std::size_t slot = this_worker::index();
  const auto size = static_cast<std::uint32_t>(run.o.payload_bytes);
  std::vector<std::array<std::byte, kHeader16Size>> headers(batch);
  std::vector<iovec> iov;
  iov.reserve(2 * batch);
  while (result.sent < quota) {
    if (Clock::now() >= run.window_end) break;
    std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(batch, quota - result.sent));
    if (window != nullptr) {
      if (Result<void> got = window->acquire_until(run.io_deadline()); !got) {
        if (got.error() != std::errc::operation_canceled)
          fail_connection(run, result, "no reply freed the window: " + got.error().message());
        return;
      }
      std::size_t permits = 1;
      while (permits < k && window->try_acquire()) ++permits;
      k = permits;
    }
    iov.clear();
    for (std::size_t j = 0; j < k; ++j) {
      const auto syn = static_cast<std::uint32_t>(result.sent + j);
      request_header(syn, run.cmd, size).store(headers[j]);
      const std::span<const std::byte> payload = run.pattern.payload(syn);
      iov.push_back({headers[j].data(), kHeader16Size});
      iov.push_back({const_cast<std::byte*>(payload.data()), payload.size()});
    }
    // The times go in before the write: the reader may see replies to the first requests of
    // a batch while the writer still waits to write the rest.
    if (sent_at != nullptr) sent_at->insert(sent_at->end(), k, Clock::now());
    if (Result<void> written = stream.writev_all(iov, run.io_deadline()); !written) {
      if (written.error() != std::errc::operation_canceled)
        fail_connection(
            run, result,
            fmt::format("writing request {}: {}", result.sent, written.error().message()));
      return;
    }
    result.sent += k;
    run.meter.add_sent(slot, k);
  }
}

// -A with replies: this fiber reads and checks replies while a writer fiber sends.
void run_async_echo(Run& run, net::TcpStream& stream, ConnectionResult& result,
                    std::uint64_t quota) {
  const std::size_t slot = this_worker::index();
  const std::size_t per_batch =
      std::max<std::size_t>(1, kMaxBatchBytes / (kHeader16Size + run.o.payload_bytes));
  std::deque<Clock::time_point> sent_at;
  std::unique_ptr<Semaphore> window;
  if (run.o.window > 0) window = std::make_unique<Semaphore>(run.o.window);
  bool writer_done = false;
  Fiber writer = spawn(
      [&] {
        write_requests(run, stream, result, quota, std::min(kMaxBatchRequests, per_batch),
                       window.get(), &sent_at);
        writer_done = true;
        // Either the end of the requests (the server answers the rest, then closes) or an
        // error (the reader's read ends at once).
        (void)stream.shutdown(result.error.empty() ? SHUT_WR : SHUT_RDWR);
      },
      {.name = "traffic-writer"});
  net::Buffer in(std::max<std::size_t>(64 * 1024, 2 * (kHeader16Size + run.o.payload_bytes)));
  for (;;) {
    std::string why;
    Result<net::Frame> frame = next_frame(run, stream, in, result.replied, &why);
    if (!frame) {
      if (frame.error() == Errc::eof && writer_done && result.error.empty()) {
        if (result.replied != result.sent)
          fail_connection(run, result,
                          fmt::format("the server closed after {} replies to {} requests",
                                      result.replied, result.sent));
        else if (!in.empty())
          fail_connection(run, result,
                          fmt::format("{} stray bytes before the server closed", in.size()));
        break;
      }
      fail_connection(run, result, why);
      break;
    }
    const auto syn = static_cast<std::uint32_t>(result.replied);
    if (sent_at.empty()) {
      fail_connection(run, result, fmt::format("reply {} to a request not sent", result.replied));
      break;
    }
    if (!check_reply(frame->header, frame->body, syn, run.pattern, &why)) {
      fail_connection(run, result, why);
      break;
    }
    in.consume(frame->size());
    const Clock::time_point now = Clock::now();
    run.latency.record(slot, now - sent_at.front());
    sent_at.pop_front();
    ++result.replied;
    result.end = now;
    run.meter.add_done(slot, 1, run.o.payload_bytes);
    if (window) window->release();
  }
  if (!writer_done) writer.interrupt();
  writer.join();
}

// -c 2: a writer fiber sends while this fiber watches the socket. The server must send nothing
// and, once the writer has half-closed, close after reading every request; a reset means it
// closed with requests unread.
void run_discard(Run& run, net::TcpStream& stream, ConnectionResult& result, std::uint64_t quota) {
  const std::size_t batch =
      run.o.sync ? 1
                 : std::min(kMaxBatchRequests,
                            std::max<std::size_t>(
                                1, kMaxBatchBytes / (kHeader16Size + run.o.payload_bytes)));
  bool writer_done = false;
  Fiber writer = spawn(
      [&] {
        write_requests(run, stream, result, quota, batch, nullptr, nullptr);
        writer_done = true;
        (void)stream.shutdown(result.error.empty() ? SHUT_WR : SHUT_RDWR);
      },
      {.name = "traffic-writer"});
  std::array<std::byte, 4096> buf;
  for (;;) {
    Result<std::size_t> n = stream.read(buf, run.io_deadline());
    if (!n) {
      if (n.error() == std::errc::timed_out && !writer_done) continue;
      if (!result.error.empty()) break;  // the writer failed and shut the socket down
      if (n.error() == std::errc::connection_reset)
        fail_connection(run, result,
                        fmt::format("the server reset the connection after {} requests: it "
                                    "closed with requests unread",
                                    result.sent));
      else if (n.error() == std::errc::timed_out)
        fail_connection(
            run, result,
            fmt::format("the server did not close within {} s of the end", run.o.timeout_s));
      else
        fail_connection(run, result, "waiting for the close: " + n.error().message());
      break;
    }
    if (*n == 0) {
      if (!writer_done)
        fail_connection(run, result,
                        fmt::format("the server closed the connection after {} requests, "
                                    "before the end",
                                    result.sent));
      else if (result.error.empty())
        result.end = Clock::now();
      break;
    }
    fail_connection(run, result,
                    fmt::format("the server sent {} bytes back for discard requests (-c 2 needs a "
                                "server that discards them, such as tern-echo --mode frame16)",
                                *n));
    break;
  }
  if (!writer_done) writer.interrupt();
  writer.join();
}

void run_connection(Run& run, std::size_t index) {
  ConnectionResult& result = run.results[index];
  Result<net::TcpStream> stream = net::TcpStream::connect(run.address, run.io_deadline());
  if (!stream) {
    fail_connection(run, result, "connect: " + stream.error().message());
    run.gate.connected.done();
    return;
  }
  (void)stream->set_nodelay();
  run.gate.connected.done();
  if (!run.gate.go.wait()) return fail_connection(run, result, "canceled before the start");
  const std::uint64_t quota = run.quota(index);
  if (run.cmd == Command::echo) {
    if (run.o.sync) return run_sync_echo(run, *stream, result, quota);
    return run_async_echo(run, *stream, result, quota);
  }
  run_discard(run, *stream, result, quota);
}

ProgressFormat traffic_line(std::size_t payload_bytes) {
  return [payload_bytes](const ProgressSample& s) {
    const double t = s.interval_s > 0 ? s.interval_s : 1;
    const double send = static_cast<double>(s.delta.sent) / t;
    const double recv = static_cast<double>(s.delta.done) / t;
    const double bytes = static_cast<double>(payload_bytes) / 1e6;
    return fmt::format(
        "[{:6.1f} s] send {:.0f} pkg/s {:.2f} MB/s  recv {:.0f} pkg/s {:.2f} MB/s  "
        "errors {}",
        s.elapsed_s, send, send * bytes, recv, recv * bytes, s.total.errors);
  };
}

int run_traffic(const TrafficOptions& o) {
  Result<net::Address> address = resolve_target_or_say(o.net.target, "traffic");
  if (!address) return 1;
  Run run(o);
  run.address = *address;
  Report report;
  report.mode = "traffic";
  CpuWindow cpu(o.net.server_pid);
  Progress progress(run.meter, std::chrono::duration<double>(o.interval_s),
                    traffic_line(o.payload_bytes), o.net.output.quiet);
  std::string backend;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    run_gated_load(
        run.gate, o.connections, "traffic", [&run](std::size_t i) { run_connection(run, i); },
        [&](Clock::time_point now) {
          run.start = now;
          run.window_end = o.net.duration_s > 0 ? now + seconds(o.net.duration_s) : kNoDeadline;
        },
        cpu, progress, report);
  });

  const bool echo = run.cmd == Command::echo;
  std::uint64_t sent = 0;
  std::uint64_t replied = 0;
  std::uint64_t min_packets = UINT64_MAX;
  std::uint64_t max_packets = 0;
  Clock::time_point end = run.start;
  for (std::size_t i = 0; i < run.results.size(); ++i) {
    const ConnectionResult& r = run.results[i];
    sent += r.sent;
    replied += r.replied;
    min_packets = std::min(min_packets, echo ? r.replied : r.sent);
    max_packets = std::max(max_packets, echo ? r.replied : r.sent);
    end = std::max(end, r.end);
    if (!r.error.empty()) report.add_error(fmt::format("connection {}: {}", i, r.error));
  }
  const std::uint64_t packets = echo ? replied : sent;
  const double elapsed = seconds_between(run.start, end);
  const double pkg_per_s = elapsed > 0 ? static_cast<double>(packets) / elapsed : 0;
  const double mb_per_s = pkg_per_s * static_cast<double>(o.payload_bytes) / 1e6;
  report.params["threads"] = o.connections;
  report.params["payload_bytes"] = o.payload_bytes;
  report.params["cmd"] = o.cmd;
  report.params["sync"] = o.sync;
  report.params["window"] = o.window;
  report.params["count"] = o.count;
  report.params["interval_s"] = o.interval_s;
  report.params["timeout_s"] = o.timeout_s;
  add_network_params(report, o.net, backend);
  report.figures["packets"] = packets;
  report.figures["sent"] = sent;
  report.figures["replies"] = replied;
  report.figures["elapsed_s"] = round_to(elapsed, 6);
  report.figures["pkg_per_s"] = round_to(pkg_per_s, 2);
  report.figures["mb_per_s"] = round_to(mb_per_s, 3);
  report.figures["min_connection_packets"] = min_packets;
  report.figures["max_connection_packets"] = max_packets;
  const prof::Histogram latency = run.latency.merged();
  add_latency_figures(report.figures, latency);
  const double send_rate = elapsed > 0 ? static_cast<double>(sent) / elapsed : 0;
  report.summary.push_back(fmt::format(
      "send {} {:.2f}pkg/s {:.2f}MB/s recv {} {:.2f}pkg/s {:.2f}MB/s (MB = 10^6 payload bytes; "
      "{:.3f} s)",
      sent, send_rate, send_rate * static_cast<double>(o.payload_bytes) / 1e6, echo ? replied : 0,
      echo ? pkg_per_s : 0.0, echo ? mb_per_s : 0.0, elapsed));
  if (echo) report.summary.push_back(latency_line("latency per request", latency));
  if (!echo)
    report.notes.push_back(
        "cmd 2 (discard): packets are requests sent; each connection ended with the server "
        "closing after reading all of them");
  if (packets == 0) report.add_error("no request completed");
  return conclude(report, o.net.output, !echo || replied == sent);
}

}  // namespace

void add_traffic_command(CLI::App& app) { add_mode(app, &add_traffic_options, &run_traffic); }

}  // namespace tern::bench
