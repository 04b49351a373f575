// The echo and idle scenarios of `tern-bench soak`, against tern-echo (or any echo server).
//
// echo: C connections, a fiber each, spread over the workers; once every connect has finished
// (at most --connect-in-flight under way per worker), each connection does request/echo round
// trips of --message-bytes for --duration seconds (with --think between them), and checks every
// echo byte for byte. A connection that fails stops there; the failure is counted by kind.
//
// idle: N connections that send nothing. The server's RSS is read before the first connect and
// after every connection is open and has been held --hold seconds (the server's descriptor count
// shows when it has accepted them all); the difference over N is what an idle connection costs
// the server. Then each connection checks that it is still open and does one round trip.
#include <algorithm>
#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "core/run_support.h"
#include "soak/soak.h"
#include "soak/soak_stats.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

// What the fibers of the echo and idle scenarios share.
struct StreamRun {
  explicit StreamRun(SoakContext& run_context)
      : c(run_context),
        connects(per_worker_semaphores(run_context.o.net.workers, run_context.o.connect_in_flight)),
        opened(run_context.o.net.workers) {}

  SoakContext& c;
  std::vector<std::unique_ptr<Semaphore>> connects;
  std::vector<std::uint64_t> opened;  // per worker: connections that connected
  WaitGroup connected;                // each connect finished, either way
  WaitGroup finished;
  Event go;
  Deadline end{};

  std::uint64_t opened_total() const {
    std::uint64_t sum = 0;
    for (std::uint64_t n : opened) sum += n;
    return sum;
  }
};

// Connection i's connect; counts the failure and returns none if it did not connect.
std::optional<net::TcpStream> open_connection(StreamRun& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  Result<net::TcpStream> stream =
      connect_paced(run.c.address, *run.connects[worker], run.c.io_deadline());
  if (!stream) {
    run.c.fail(worker, "connect: " + stream.error().message(),
               fmt::format("connection {}: connect: {}", i, stream.error().message()));
    return std::nullopt;
  }
  (void)stream->set_nodelay();
  ++run.opened[worker];
  return std::move(*stream);
}

void echo_connection(StreamRun& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  std::optional<net::TcpStream> stream = open_connection(run, i);
  run.connected.done();
  if (!stream || !run.go.wait()) return run.finished.done();
  const SoakOptions& o = run.c.o;
  std::vector<std::byte> request(o.message_bytes);
  std::vector<std::byte> reply(o.message_bytes);
  const auto think = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(o.think_ms));
  for (std::uint64_t seq = 0; Clock::now() < run.end; ++seq) {
    fill_request(request, i, seq);
    const Clock::time_point begin = Clock::now();
    if (std::optional<ExchangeFailure> failed =
            echo_round_trip(*stream, request, reply, run.c.io_deadline())) {
      run.c.fail(worker, failed->kind,
                 fmt::format("connection {}, round trip {}: {}", i, seq, failed->detail));
      break;
    }
    const Clock::time_point now = Clock::now();
    run.c.latency.record(worker, now - begin);
    run.c.meter.add_done(worker, 1, o.message_bytes);
    if (think.count() > 0 && !this_fiber::sleep_until(std::min(now + think, run.end))) break;
  }
  stream->close();
  run.finished.done();
}

// Whether an idle connection is still open and idle: nothing to read, no end of stream.
std::optional<ExchangeFailure> still_idle(net::TcpStream& stream) {
  Result<void> readable = stream.wait_readable(Clock::now());
  if (!readable && readable.error() == std::errc::timed_out) return std::nullopt;
  if (!readable) return ExchangeFailure{"idle: " + readable.error().message(), ""};
  std::array<std::byte, 64> buf;
  Result<std::size_t> n = stream.read(buf, deadline_after(1s));
  if (!n) return ExchangeFailure{"idle: " + n.error().message(), "while idle"};
  if (*n == 0) return ExchangeFailure{"the server closed an idle connection", "while idle"};
  return ExchangeFailure{"the server sent bytes nobody asked for", "while idle"};
}

void idle_connection(StreamRun& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  std::optional<net::TcpStream> stream = open_connection(run, i);
  run.connected.done();
  if (!stream || !run.go.wait()) return run.finished.done();
  std::optional<ExchangeFailure> failed = still_idle(*stream);
  if (!failed) {
    std::vector<std::byte> request(run.c.o.message_bytes);
    std::vector<std::byte> reply(request.size());
    fill_request(request, i, 0);
    failed = echo_round_trip(*stream, request, reply, run.c.io_deadline());
    if (!failed) run.c.meter.add_done(worker, 1, request.size());
  }
  if (failed)
    run.c.fail(worker, failed->kind,
               fmt::format("idle connection {} after the hold: {}", i, failed->detail));
  stream->close();
  run.finished.done();
}

// Starts `count` connection fibers running fn and waits until every connect has finished.
template <typename Fn>
void open_all(StreamRun& run, std::size_t count, const char* name, Fn fn) {
  run.connected.add(count);
  run.finished.add(count);
  spread_fibers(count, name, [&run, fn](std::size_t i) { fn(run, i); });
  (void)run.connected.wait();
}

// Waits (up to the timeout) until the server holds `expected` descriptors or more.
bool wait_for_server_fds(pid_t pid, std::uint64_t expected, Deadline deadline) {
  for (;;) {
    Result<std::uint64_t> fds = count_open_fds(pid);
    if (fds && *fds >= expected) return true;
    if (!fds || Clock::now() >= deadline) return false;
    (void)this_fiber::sleep_for(50ms);
  }
}

// The server's open descriptors now; none without --server-pid or when /proc cannot tell.
std::optional<std::uint64_t> server_fds(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  Result<std::uint64_t> fds = count_open_fds(pid);
  return fds ? std::optional<std::uint64_t>(*fds) : std::nullopt;
}

// The descriptors the server holds once it has accepted `opened` connections on top of
// `before`: one less, because `before` may count the admin endpoint's connection of the
// baseline reading, not yet closed on the server's side.
std::uint64_t fds_with(std::uint64_t before, std::uint64_t opened) { return before + opened - 1; }

}  // namespace

void run_echo_scenario(SoakContext& c) {
  StreamRun run(c);
  const std::optional<std::uint64_t> fds_before = server_fds(c.o.net.server_pid);
  c.monitor.set_phase("connect");
  open_all(run, c.o.connections, "soak-echo", echo_connection);
  const std::uint64_t opened = run.opened_total();
  // A connect completes in the kernel's accept queue: the load starts once the server has
  // accepted them all, so that its samples see every connection.
  if (fds_before && opened > 0 &&
      !wait_for_server_fds(c.o.net.server_pid, fds_with(*fds_before, opened), c.io_deadline()))
    c.report.notes.push_back(fmt::format(
        "the server's descriptors never reached {} within --timeout: the load started before it "
        "had accepted every connection",
        fds_with(*fds_before, opened)));
  const double elapsed = run_timed_load(c, run.go, run.end, run.finished);
  c.monitor.set_phase("closed");

  const Meter::Totals totals = c.meter.totals();
  const double rate = elapsed > 0 ? static_cast<double>(totals.done) / elapsed : 0;
  c.report.figures["connections_open"] = opened;
  c.report.figures["round_trips"] = totals.done;
  c.report.figures["round_trips_per_s"] = round_to(rate, 1);
  c.report.figures["bytes_echoed"] = totals.bytes;
  c.report.figures["load_s"] = round_to(elapsed, 3);
  const prof::Histogram latency = c.latency.merged();
  add_latency_figures(c.report.figures, latency, "rtt_");
  c.report.summary.push_back(fmt::format(
      "{} of {} connections open, {}-byte round trips{}: {} verified in {:.1f} s, {:.0f}/s", opened,
      c.o.connections, c.o.message_bytes,
      c.o.think_ms > 0 ? fmt::format(" with {} ms think time", c.o.think_ms) : "", totals.done,
      elapsed, rate));
  c.report.summary.push_back(latency_line("round trip", latency));
  if (totals.done == 0) c.report.add_error("no round trip completed");
}

void run_idle_scenario(SoakContext& c) {
  const pid_t pid = c.o.net.server_pid;
  std::optional<std::uint64_t> rss_before;
  if (pid > 0) {
    if (Result<std::uint64_t> rss = read_rss_kib(pid)) rss_before = *rss;
  }
  const std::optional<std::uint64_t> fds_before = server_fds(pid);
  StreamRun run(c);
  c.monitor.set_phase("connect");
  const Clock::time_point open_start = Clock::now();
  open_all(run, c.o.connections, "soak-idle", idle_connection);
  const double open_s = seconds_between(open_start, Clock::now());
  const std::uint64_t opened = run.opened_total();
  c.monitor.set_phase("hold");
  c.monitor.mark_load_start();
  const std::uint64_t expected_fds = fds_before ? fds_with(*fds_before, opened) : 0;
  bool all_accepted = true;
  if (pid > 0 && fds_before && opened > 0)
    all_accepted = wait_for_server_fds(pid, expected_fds, c.io_deadline());
  (void)this_fiber::sleep_for(seconds(c.o.hold_s));
  std::optional<std::uint64_t> rss_after;
  if (pid > 0) {
    if (Result<std::uint64_t> rss = read_rss_kib(pid)) rss_after = *rss;
  }
  const std::optional<std::uint64_t> fds_after = server_fds(pid);
  c.monitor.mark_load_end();
  c.monitor.set_phase("verify");
  run.go.set();
  (void)run.finished.wait();
  c.monitor.set_phase("closed");

  Json& f = c.report.figures;
  f["connections_open"] = opened;
  f["open_s"] = round_to(open_s, 3);
  f["verified_after_hold"] = c.meter.totals().done;
  f["server_rss_before_kib"] = rss_before ? Json(*rss_before) : Json(nullptr);
  f["server_rss_after_kib"] = rss_after ? Json(*rss_after) : Json(nullptr);
  f["server_fds_before"] = fds_before ? Json(*fds_before) : Json(nullptr);
  f["server_fds_after"] = fds_after ? Json(*fds_after) : Json(nullptr);
  std::optional<double> per_connection;
  if (rss_before && rss_after && opened > 0) {
    per_connection = (static_cast<double>(*rss_after) - static_cast<double>(*rss_before)) * 1024.0 /
                     static_cast<double>(opened);
  }
  f["rss_per_idle_connection_bytes"] =
      per_connection ? Json(round_to(*per_connection, 1)) : Json(nullptr);
  c.report.summary.push_back(fmt::format(
      "{} of {} idle connections open in {:.2f} s, held {} s; {} answered a round trip after",
      opened, c.o.connections, open_s, c.o.hold_s, c.meter.totals().done));
  if (per_connection) {
    c.report.summary.push_back(fmt::format(
        "server RSS {} KiB before, {} KiB with them open: {:.0f} bytes per idle connection",
        *rss_before, *rss_after, *per_connection));
  } else {
    c.report.notes.push_back("no RSS per idle connection: pass --server-pid");
  }
  if (!all_accepted)
    c.report.notes.push_back(fmt::format(
        "the server's descriptors never reached {} within --timeout: it had not accepted "
        "every connection when its RSS was read",
        expected_fds));
  if (per_connection && c.o.max_idle_bytes > 0 &&
      *per_connection > static_cast<double>(c.o.max_idle_bytes))
    c.report.add_error(fmt::format("{:.0f} bytes per idle connection, over --max-idle-bytes {}",
                                   *per_connection, c.o.max_idle_bytes));
  if (opened == 0) c.report.add_error("no connection opened");
}

}  // namespace tern::bench
