#pragma once

// The fixture of the cluster scenarios (docs/cluster.md): a fresh network per test with a client
// host (c1, 10.213.0.2) that the test's own tern::Runtime runs in, server hosts s1..sN
// (10.213.0.11...) each running cluster_server on port 7000, and what the scenarios share: their
// constants, the channel options, and the checks they make of a ProbeLoad. The test skips with
// one line where namespaces cannot be made.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host_process.h"
#include "netns.h"
#include "probe_load.h"
#include "tern/base/clock.h"
#include "tern/rpc/channel.h"

namespace cluster_test {

class ClusterTest : public ::testing::Test {
 protected:
  static constexpr int kServerPort = 7000;
  // The deadline of every call of the scenarios' load.
  static constexpr std::chrono::milliseconds kCallTimeout{2'000};
  // How late past its deadline a call may return: a correctness bound, not a speed test.
  static constexpr std::chrono::milliseconds kLateMargin{1'000};
  // How long a scenario waits for a state it expects (a server answering again, ...).
  static constexpr std::chrono::seconds kPatience{20};
  // Calls each surviving server must answer after a fault before the load stops.
  static constexpr std::size_t kCallsAfterFault = 200;

  // Caller fibers of a scenario's load: 16, fewer under ThreadSanitizer (at least 4).
  static int callers();

  void SetUp() override;
  void TearDown() override;

  // Adds hosts s1..s<count> and starts cluster_server on each; fails the test when one does not
  // start.
  void start_servers(int count);
  // Adds the next server host, s<n> at 10.213.0.<10 + n>, without starting its server; nullptr
  // (with a test failure) if it cannot be made.
  const Host* add_server_host();
  // Starts (or restarts) the server of server host `index` (0: s1) and waits for it to listen;
  // false, with a test failure, if it does not. Plain threads (use tern::io::offload in fibers).
  bool start_server(std::size_t index);
  // "10.213.0.11:7000,10.213.0.12:7000,...": every server host's endpoint.
  std::string server_targets() const;
  // Runs `body` on worker 0 of a one-worker tern::Runtime whose threads live in the client host.
  void run_in_client(const std::function<void()>& body);
  // Channel options of the scenarios: pings every 100 ms, dropped after 200 ms of silence;
  // reconnects that back off at most 200 ms with 200 ms per attempt; health checks every 100 ms
  // (unhealthy after 2 failures); breakers that open after 3 failures in a row and eject for
  // 200 ms at first and 1 s at most. A
  // dead or cut endpoint is noticed and a returning one found within a few hundred ms.
  static tern::rpc::ChannelOptions channel_options();
  // What `channel` knows of the server endpoint on `host` now; nullopt if it has none.
  // From the channel's worker.
  static std::optional<tern::rpc::EndpointStatus> endpoint_status(const tern::rpc::Channel& channel,
                                                                  const Host& host);
  // Waits up to kPatience until every server host answered a call of `load` started at or after
  // `from`; false, with a test failure, if one did not. From the channel's worker.
  bool all_servers_answer(const ProbeLoad& load, tern::Clock::time_point from);
  // Waits up to kPatience until every server host but `down` (empty: every one) answered
  // kCallsAfterFault calls started at or after `from`; false, with a test failure, if one did
  // not. From the channel's worker.
  bool others_keep_answering(const ProbeLoad& load, const std::string& down,
                             tern::Clock::time_point from);
  // Restarts the servers one after the other (SIGTERM, then the same address again), each once
  // the previous one answers `load` again; returns the longest time from a restarted server
  // listening to its first answer, in ms, or nullopt (with a test failure) if one did not come
  // back. From the channel's worker.
  std::optional<double> restart_each_server(const ProbeLoad& load);
  // Every call of `load` succeeded and returned within its deadline plus kLateMargin.
  static void expect_no_call_lost(const ProbeLoad& load);
  // Prints a measured figure ("[cluster figure] name: value") and records it in the test's XML.
  void report_figure(const std::string& name, const std::string& value);

  Network& network() { return *network_; }
  const Host& client() const { return *client_; }

  // Arguments every cluster_server start gets besides its name, address and backend (e.g.
  // "--etcd", endpoints).
  std::vector<std::string> server_args_;
  std::vector<const Host*> server_hosts_;
  std::vector<std::unique_ptr<HostProcess>> servers_;

 private:
  std::unique_ptr<Network> network_;
  const Host* client_ = nullptr;
};

// This run's I/O backend (TERN_IO), passed on to the programs the scenarios start.
std::string backend();

}  // namespace cluster_test
