// The flood scenario of `tern-bench soak`: K clients (on every client worker but the last) do
// request/echo round trips back to back, and their round-trip times are kept in three windows:
// "before" (after --warmup seconds, for --flood-seconds), "during" (while the flood runs) and
// "after" (--flood-seconds once it is over). The flood runs on the last worker: --flood-connects
// connect attempts spread evenly over --flood-seconds (at most --connect-in-flight under way).
// Each attempt that connects sends one request: a server at its --max-connections accepts and
// closes at once (the request meets end of stream or a reset); one the server keeps is
// "admitted": it must echo the request, and is held open until the flood is over (up to kMaxHeld
// of them). The clients must see no error at all.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/run_support.h"
#include "soak/soak.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

// Admitted flood connections held open at once; more are closed once verified (the client's
// descriptors are finite too).
constexpr std::uint64_t kMaxHeld = 1000;

enum Phase : int { kWarmup = 0, kBefore = 1, kDuring = 2, kAfter = 3, kStop = 4 };
constexpr const char* kWindowNames[] = {"before", "during", "after"};

// What the flood's attempts found; written only by fibers of the flood worker.
struct FloodTally {
  std::uint64_t attempts = 0;
  std::uint64_t connected = 0;
  std::uint64_t closed_at_once = 0;  // the server closed it without a byte (end of stream)
  std::uint64_t reset_at_once = 0;   // ... or reset it
  std::uint64_t admitted = 0;        // the server kept it and answered a round trip
  std::uint64_t held = 0;            // admitted ones held open now
  std::map<std::string, std::uint64_t> connect_failures;
};

struct FloodRun {
  explicit FloodRun(SoakContext& run_context)
      : c(run_context),
        workers(run_context.o.net.workers),
        flood_worker(workers - 1),
        client_workers(workers > 1 ? workers - 1 : 1),
        connects(per_worker_semaphores(workers, run_context.o.connect_in_flight)),
        opened(workers) {
    for (int w = 0; w < 3; ++w) windows.push_back(std::make_unique<LatencyRecorder>(workers));
  }

  SoakContext& c;
  std::size_t workers;
  std::size_t flood_worker;
  std::size_t client_workers;
  std::vector<std::unique_ptr<Semaphore>> connects;
  std::vector<std::uint64_t> opened;  // per worker: clients connected
  std::vector<std::unique_ptr<LatencyRecorder>> windows;
  std::atomic<int> phase{kWarmup};
  WaitGroup connected;
  WaitGroup finished;
  WaitGroup flood_done;
  Event go;
  Event flood_over;  // the last attempt was made: admitted connections may close
  FloodTally tally;
  Clock::time_point flood_start{};
  Clock::time_point flood_sent{};  // when the last attempt started
};

// Runs fn(i) for i in [0, n) as detached fibers on the first `workers` workers, i % workers.
template <typename Fn>
void spread_on(std::size_t n, std::size_t workers, std::string_view name, Fn fn) {
  for (std::size_t worker = 0; worker < workers && worker < n; ++worker) {
    Result<void> posted = post(worker, [fn, worker, workers, n, name] {
      for (std::size_t i = worker; i < n; i += workers)
        spawn([fn, i] { fn(i); }, {.name = name}).detach();
    });
    if (!posted) throw std::runtime_error("a worker of the client runtime refused work");
  }
}

void client(FloodRun& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  Result<net::TcpStream> stream =
      connect_paced(run.c.address, *run.connects[worker], run.c.io_deadline());
  if (!stream) {
    run.c.fail(worker, "client connect: " + stream.error().message(),
               fmt::format("client {}: connect: {}", i, stream.error().message()));
  } else {
    (void)stream->set_nodelay();
    ++run.opened[worker];
  }
  run.connected.done();
  if (!stream || !run.go.wait()) return run.finished.done();
  std::vector<std::byte> request(run.c.o.message_bytes);
  std::vector<std::byte> reply(request.size());
  for (std::uint64_t seq = 0;; ++seq) {
    const int phase = run.phase.load(std::memory_order_relaxed);
    if (phase == kStop) break;
    fill_request(request, i, seq);
    const Clock::time_point begin = Clock::now();
    if (std::optional<ExchangeFailure> failed =
            echo_round_trip(*stream, request, reply, run.c.io_deadline())) {
      run.c.fail(
          worker, "client " + failed->kind,
          fmt::format("client {}, round trip {} ({}): {}", i, seq,
                      phase >= kBefore ? kWindowNames[phase - 1] : "warm-up", failed->detail));
      break;
    }
    const Clock::time_point end = Clock::now();
    if (phase >= kBefore) run.windows[phase - 1]->record(worker, end - begin);
    run.c.meter.add_done(worker, 1, request.size());
  }
  stream->close();
  run.finished.done();
}

// Whether an error of a write or read means the server reset the connection.
bool is_reset(const std::error_code& error) {
  return error == std::errc::connection_reset || error == std::errc::broken_pipe;
}

// One flood attempt: connect and send one request. A server at its limit has accepted and
// closed the connection (the request meets end of stream or a reset); one that kept it echoes
// the request back.
void attempt(FloodRun& run, std::uint64_t k) {
  FloodTally& t = run.tally;
  Semaphore& in_flight = *run.connects[run.flood_worker];
  Result<net::TcpStream> stream = net::TcpStream::connect(run.c.address, run.c.io_deadline());
  if (!stream) {
    ++t.connect_failures[stream.error().message()];
    in_flight.release();
    return run.flood_done.done();
  }
  ++t.connected;
  std::vector<std::byte> request(run.c.o.message_bytes);
  std::vector<std::byte> reply(request.size());
  fill_request(request, run.c.o.connections + k, 0);
  std::size_t got = 0;
  Result<void> exchange = stream->write_all(request, run.c.io_deadline());  // then the echo
  while (exchange && got < reply.size()) {
    Result<std::size_t> n = stream->read(std::span(reply).subspan(got), run.c.io_deadline());
    if (!n) {
      exchange = fail(n.error());
      break;
    }
    if (*n == 0) break;
    got += *n;
  }
  in_flight.release();
  if (got == 0 && exchange) {
    ++t.closed_at_once;
  } else if (got == 0 && is_reset(exchange.error())) {
    ++t.reset_at_once;
  } else if (!exchange || got < reply.size() ||
             std::memcmp(request.data(), reply.data(), reply.size()) != 0) {
    const std::string what = !exchange            ? exchange.error().message()
                             : got < reply.size() ? "a short echo"
                                                  : "an echo that differs";
    run.c.fail(run.flood_worker, "admitted flood connection: " + what,
               fmt::format("flood connect {}: {} after {} bytes of the echo", k, what, got));
  } else {
    ++t.admitted;  // served: held open until the flood is over
    if (t.held < kMaxHeld) {
      ++t.held;
      (void)run.flood_over.wait();
      --t.held;
    }
  }
  stream->close();
  run.flood_done.done();
}

// The flood: attempts paced evenly over --flood-seconds. Runs on the flood worker.
void flood(FloodRun& run) {
  const std::uint64_t total = run.c.o.flood_connects;
  const auto span = seconds(run.c.o.flood_s);
  Semaphore& in_flight = *run.connects[run.flood_worker];
  run.flood_start = Clock::now();
  for (std::uint64_t k = 0; k < total; ++k) {
    const Clock::time_point due =
        run.flood_start + std::chrono::duration_cast<Clock::duration>(
                              span * (static_cast<double>(k) / static_cast<double>(total)));
    if (due > Clock::now() && !this_fiber::sleep_until(due)) break;
    if (!in_flight.acquire()) break;
    ++run.tally.attempts;
    run.flood_done.add();
    spawn([&run, k] { attempt(run, k); }, {.name = "soak-flood"}).detach();
  }
  run.flood_sent = Clock::now();
  // Every attempt has either finished or is admitted and waiting: none is under way.
  while (in_flight.available() < run.c.o.connect_in_flight) (void)this_fiber::sleep_for(10ms);
  run.flood_over.set();
  run.flood_done.done();
}

}  // namespace

void run_flood_scenario(SoakContext& c) {
  FloodRun run(c);
  c.monitor.set_phase("connect");
  run.connected.add(c.o.connections);
  run.finished.add(c.o.connections);
  spread_on(c.o.connections, run.client_workers, "soak-client",
            [&run](std::size_t i) { client(run, i); });
  (void)run.connected.wait();
  std::uint64_t opened = 0;
  for (std::uint64_t n : run.opened) opened += n;

  const auto window = seconds(c.o.flood_s);
  c.monitor.set_phase("warmup");
  c.monitor.mark_load_start();
  run.go.set();
  (void)this_fiber::sleep_for(seconds(c.o.warmup_s));
  c.monitor.set_phase("before");
  run.phase.store(kBefore, std::memory_order_relaxed);
  (void)this_fiber::sleep_for(window);
  c.monitor.set_phase("flood");
  run.phase.store(kDuring, std::memory_order_relaxed);
  run.flood_done.add();
  if (!post(run.flood_worker, [&run] { flood(run); })) {
    run.flood_done.done();
    c.report.add_error("the flood worker refused work");
  }
  (void)run.flood_done.wait();
  const Clock::time_point flood_end = Clock::now();
  c.monitor.set_phase("after");
  run.phase.store(kAfter, std::memory_order_relaxed);
  (void)this_fiber::sleep_for(window);
  c.monitor.mark_load_end();
  run.phase.store(kStop, std::memory_order_relaxed);
  (void)run.finished.wait();
  c.monitor.set_phase("closed");

  Json& f = c.report.figures;
  const FloodTally& t = run.tally;
  f["clients_open"] = opened;
  f["round_trips"] = c.meter.totals().done;
  for (int w = 0; w < 3; ++w) {
    const prof::Histogram h = run.windows[w]->merged();
    const std::string prefix = std::string(kWindowNames[w]) + "_";
    f[prefix + "round_trips"] = h.count();
    add_latency_figures(f, h, prefix);
    c.report.summary.push_back(
        latency_line(fmt::format("clients' round trip {} the flood", kWindowNames[w]), h));
  }
  const double flood_s = seconds_between(run.flood_start, flood_end);
  const double sent_s = seconds_between(run.flood_start, run.flood_sent);
  std::uint64_t connect_failed = 0;
  Json failures = Json::object();
  for (const auto& [kind, count] : t.connect_failures) {
    failures[kind] = count;
    connect_failed += count;
  }
  f["flood_attempts"] = t.attempts;
  f["flood_connected"] = t.connected;
  f["flood_closed_at_once"] = t.closed_at_once;
  f["flood_reset_at_once"] = t.reset_at_once;
  f["flood_admitted"] = t.admitted;
  f["flood_connect_failed"] = connect_failed;
  f["flood_connect_failures"] = failures;
  f["flood_sent_s"] = round_to(sent_s, 3);
  f["flood_s"] = round_to(flood_s, 3);
  f["flood_attempts_per_s"] =
      round_to(sent_s > 0 ? static_cast<double>(t.attempts) / sent_s : 0, 1);
  c.report.summary.insert(
      c.report.summary.begin(),
      fmt::format("{} of {} clients ping-pong; flood of {} connects in {:.2f} s ({:.0f}/s): {} "
                  "connected, {} closed at once, {} reset at once, {} admitted and served, {} "
                  "failed to connect",
                  opened, c.o.connections, t.attempts, sent_s,
                  sent_s > 0 ? static_cast<double>(t.attempts) / sent_s : 0.0, t.connected,
                  t.closed_at_once, t.reset_at_once, t.admitted, connect_failed));
  if (t.closed_at_once + t.reset_at_once + connect_failed == 0)
    c.report.notes.push_back(
        "the server turned no flood connect away: is its --max-connections below the clients "
        "plus the flood?");
  if (opened == 0) c.report.add_error("no client connected");
}

}  // namespace tern::bench
