#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/latency.h"
#include "core/progress.h"
#include "core/report.h"
#include "soak/soak_monitor.h"
#include "soak/soak_options.h"
#include "tern/base/clock.h"
#include "tern/fiber/event.h"
#include "tern/fiber/semaphore.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/address.h"
#include "tern/net/tcp_stream.h"

// The pieces the scenarios of `tern-bench soak` share (modes/soak.cc runs them): the run's context,
// the failures counted by kind, and the request/echo exchange of the echo, idle and flood
// scenarios. A scenario runs on worker 0 of the client runtime and spreads its fibers over the
// workers; each fiber writes only its own worker's slots.
namespace tern::bench {

// Failures counted by kind ("read: Connection reset by peer"), one table per client worker,
// with the first message of each kind (naming the connection it happened to).
class FailureTally {
 public:
  explicit FailureTally(std::size_t workers) : slots_(workers == 0 ? 1 : workers) {}

  // Counts one failure of `kind` in slot `worker`; `message` is kept if it is the kind's first.
  // Only from that worker.
  void add(std::size_t worker, const std::string& kind, std::string message);
  // Every slot's counts summed, by kind. Once no fiber adds any more.
  std::map<std::string, std::uint64_t> by_kind() const;
  // The first message of each kind, at most `limit` of them.
  std::vector<std::string> first_messages(std::size_t limit) const;
  std::uint64_t total() const;

 private:
  struct Slot {
    std::map<std::string, std::uint64_t> counts;
    std::map<std::string, std::string> first;
  };
  std::vector<Slot> slots_;
};

// What one soak run shares between its driver and its scenario.
struct SoakContext {
  SoakContext(const SoakOptions& options, net::Address server, SoakMonitor& run_monitor,
              Meter& run_meter, Report& run_report)
      : o(options),
        address(server),
        monitor(run_monitor),
        meter(run_meter),
        report(run_report),
        failures(options.net.workers),
        latency(options.net.workers) {}

  // Counts a failure: in the tally and in the meter's errors. Worker `worker` only.
  void fail(std::size_t worker, const std::string& kind, std::string message) {
    failures.add(worker, kind, std::move(message));
    meter.add_error(worker);
  }
  Deadline io_deadline() const;

  const SoakOptions& o;
  net::Address address;
  SoakMonitor& monitor;
  Meter& meter;
  Report& report;
  FailureTally failures;    // what counts as the run's errors
  LatencyRecorder latency;  // per round trip or call (the flood scenario keeps its own)
};

// A failed exchange: a short stable kind for the tally and the details for the message.
struct ExchangeFailure {
  std::string kind;
  std::string detail;
};

// The request of round trip `seq` of connection `connection`: a pattern that differs from one
// round trip and one connection to the next, so a reply meant for another cannot match.
void fill_request(std::span<std::byte> request, std::uint64_t connection, std::uint64_t seq);

// Writes `request` and reads its echo into `reply` (the same size) before `deadline`; none when
// the echo matched the request byte for byte.
std::optional<ExchangeFailure> echo_round_trip(net::TcpStream& stream,
                                               std::span<const std::byte> request,
                                               std::span<std::byte> reply, Deadline deadline);

// Connects to `address` with at most as many connects under way as `in_flight` has permits
// (the semaphore of the calling worker).
Result<net::TcpStream> connect_paced(const net::Address& address, Semaphore& in_flight,
                                     Deadline deadline);

// One semaphore of `permits` per client worker, for connect_paced.
std::vector<std::unique_ptr<Semaphore>> per_worker_semaphores(std::size_t workers,
                                                              std::size_t permits);

// The timed window of the echo and rpc scenarios, after every client is ready: marks the load on
// the monitor, sets `end` to --duration from now and fires `go`, sleeps until `end` (the samples
// of the clients closing are not fitted), then waits for `done`. Returns the seconds from the
// start until every client was done. The scenario's fiber.
double run_timed_load(SoakContext& context, Event& go, Deadline& end, WaitGroup& done);

// The scenarios. Each runs on a worker fiber of the client runtime, marks the steady load on
// the monitor, counts failures in the context and puts its own figures in the report.
void run_echo_scenario(SoakContext& context);
void run_idle_scenario(SoakContext& context);
void run_flood_scenario(SoakContext& context);
void run_rpc_scenario(SoakContext& context);

// The first exchange of a run, before the server's baseline is read: one echo round trip, or
// one BenchmarkService/Say call (rpc). An empty string when it worked, else why not.
std::string echo_primer(const SoakContext& context);
std::string rpc_primer(const SoakContext& context);

}  // namespace tern::bench
