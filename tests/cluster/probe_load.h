#pragma once

// The client load of the cluster scenarios: caller fibers that call Probe/Whoami through one
// rpc::Channel again and again, each call recorded (when it started and ended, who answered, its
// status, how many endpoints it tried), and the questions the scenarios ask of those records.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster.tern.h"
#include "tern/base/clock.h"
#include "tern/fiber/wait_group.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/status.h"

namespace cluster_test {

// One finished call.
struct CallRecord {
  tern::Clock::time_point start;
  tern::Clock::time_point end;
  std::string server;  // who answered ("s1"); empty when the call failed
  tern::rpc::StatusCode code = tern::rpc::StatusCode::ok;
  std::uint32_t attempts = 0;  // endpoints the call tried
};

// Callers that keep calling until stop(). Everything on the channel's worker: construct, start,
// stop and read the records from its fibers.
class ProbeLoad {
 public:
  // `callers` fibers, each call with `timeout` as its deadline, marked idempotent.
  ProbeLoad(tern::rpc::Channel& channel, int callers, std::chrono::milliseconds timeout);
  ProbeLoad(const ProbeLoad&) = delete;
  ProbeLoad& operator=(const ProbeLoad&) = delete;
  // Stops the callers if still running.
  ~ProbeLoad();

  void start();
  // Lets each caller finish its call in flight, then returns.
  void stop();

  const std::vector<CallRecord>& calls() const noexcept { return calls_; }
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  // Calls that ended with a status other than ok.
  std::size_t failed() const;
  // The longest time a call took.
  std::chrono::nanoseconds longest() const;
  // Successful calls `server` answered that started at or after `from`.
  std::size_t served_by(const std::string& server, tern::Clock::time_point from) const;
  // The end of the first successful call answered by `server` (any server when empty) that
  // started at or after `from`, with at least `min_attempts` attempts; nullopt if none.
  std::optional<tern::Clock::time_point> first_ok(tern::Clock::time_point from,
                                                  const std::string& server = {},
                                                  std::uint32_t min_attempts = 1) const;
  // A line for failure messages: calls, failures by status, longest call.
  std::string summary() const;

 private:
  void call_until_stopped(std::uint64_t caller);

  tern::cluster_test::ProbeClient client_;
  int callers_;
  std::chrono::milliseconds timeout_;
  bool stop_ = false;
  bool running_ = false;
  tern::WaitGroup done_;
  std::vector<CallRecord> calls_;
  std::string first_failure_;  // the status of the first call that failed
};

// Milliseconds between two points, for the figures the scenarios print.
double ms_between(tern::Clock::time_point from, tern::Clock::time_point to);

}  // namespace cluster_test
