// A tern::rpc server killed with SIGKILL under load and restarted on the same port, under the
// backend TERN_IO names: tools' tern-rpc-server runs as a child process while caller fibers keep
// calling it through one rpc::Channel. Every call must return (ok, or unavailable /
// deadline_exceeded / cancelled) no later than its deadline plus a margin, and calls must succeed
// again once the server is back.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "benchmark_message.tern.h"
#include "net/net_test_util.h"
#include "rpc_message.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/offload.h"
#include "tern/rpc/channel.h"
#include "test_scale.h"
#include "tools/tern_bench_process.h"

namespace {

using namespace std::chrono_literals;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::StatusCode;

constexpr std::chrono::milliseconds kPatience = 20s;
constexpr std::chrono::milliseconds kCallTimeout = 2s;
// How late past its deadline a call may return: a correctness bound, not a speed test.
constexpr std::chrono::milliseconds kLateMargin = 1s;

std::string backend() {
  const char* io = std::getenv("TERN_IO");
  return io != nullptr ? io : "auto";
}

// tern-rpc-server as a child on `port` (0: the kernel picks), two workers, this run's backend.
std::unique_ptr<tern::test::ServerProcess> start_rpc_server(int port) {
  return std::make_unique<tern::test::ServerProcess>(std::vector<std::string>{
      TERN_RPC_SERVER_BINARY, "--port", std::to_string(port), "--threads", "2", "--io", backend()});
}

// tern-rpc-server restarted on the port of one just killed. The kernel tears a killed process's
// io_uring instance down asynchronously, and until then (6-8 ms after SIGKILL on this machine)
// the ring holds the sockets it has requests on, the listening one among them: bind fails with
// EADDRINUSE. A supervisor restarting a crashed server tries again, and so does this, until
// kPatience.
std::unique_ptr<tern::test::ServerProcess> restart_rpc_server(int port) {
  const auto give_up = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    std::unique_ptr<tern::test::ServerProcess> server = start_rpc_server(port);
    // A server that could not bind says so on stderr and prints no first line on stdout.
    if (server->port() != 0 || std::chrono::steady_clock::now() >= give_up) return server;
  }
}

// What the callers saw; touched only by fibers of worker 0.
struct Load {
  enum Phase { before_fault, during_fault, after_fault };
  Phase phase = before_fault;
  bool stop = false;
  int started = 0;
  int returned = 0;
  int ok_started_in[3] = {0, 0, 0};  // successful calls, by the phase they started in
  int failed = 0;
  int wrong_replies = 0;
  std::map<StatusCode, int> codes;
  std::set<int> callers_failed;     // callers that had a call fail
  std::set<int> callers_timed_out;  // callers that had a call end with deadline_exceeded
  std::string unexpected;           // the first status outside ok/unavailable/deadline/cancelled
  std::chrono::nanoseconds longest{0};
};

void call_until_stopped(tern::bench::BenchmarkServiceClient& client, Load& load, int caller) {
  tern::bench::BenchmarkMessage request;
  tern::bench::fill_rpc_request(request);
  while (!load.stop) {
    const Load::Phase phase = load.phase;
    ClientContext context;
    context.set_timeout(kCallTimeout);
    const tern::Clock::time_point start = tern::Clock::now();
    ++load.started;
    tern::rpc::Result<tern::bench::BenchmarkMessage> reply = client.Say(context, request);
    load.longest = std::max<std::chrono::nanoseconds>(load.longest, tern::Clock::now() - start);
    ++load.returned;
    if (reply) {
      ++load.ok_started_in[phase];
      if (!tern::bench::check_rpc_reply(*reply).empty()) ++load.wrong_replies;
      continue;
    }
    ++load.failed;
    const StatusCode code = reply.error().code();
    ++load.codes[code];
    load.callers_failed.insert(caller);
    if (code == StatusCode::deadline_exceeded) load.callers_timed_out.insert(caller);
    if (code != StatusCode::unavailable && code != StatusCode::deadline_exceeded &&
        code != StatusCode::cancelled && load.unexpected.empty()) {
      load.unexpected = reply.error().to_string();
    }
    // A client that backs off a little after a failure, as real ones do.
    (void)tern::this_fiber::sleep_for(5ms);
  }
}

// How many caller fibers make the load (50; fewer under ThreadSanitizer).
int callers() { return std::max(10, tern_test::scaled(50)); }

// Waits until pred() holds, checking every millisecond; false at the deadline.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = kPatience) {
  const tern::Deadline deadline = tern::deadline_after(limit);
  while (!pred()) {
    if (tern::Clock::now() >= deadline) return false;
    if (!tern::this_fiber::sleep_for(1ms)) return pred();
  }
  return true;
}

// tern-rpc-server, a Channel to it and caller fibers calling it without pause; `fault` runs on
// worker 0 once calls flow (it may replace the server) and returns the server that should be
// answering afterwards. Checks every call's outcome and time and that calls succeed afterwards.
void under_load(const std::function<std::unique_ptr<tern::test::ServerProcess>(
                    std::unique_ptr<tern::test::ServerProcess>, Load&)>& fault) {
  const int wanted = std::max(100, tern_test::scaled(2000));  // successful calls per phase
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    std::unique_ptr<tern::test::ServerProcess> server =
        tern::io::offload([] { return start_rpc_server(0); });
    ASSERT_GT(server->port(), 0) << server->first_line();
    const int port = server->port();

    ChannelOptions options;
    options.reconnect.initial_backoff = 20ms;
    options.reconnect.max_backoff = 200ms;
    options.reconnect.attempt_timeout = 1s;
    tern::rpc::Result<Channel> channel =
        Channel::open("127.0.0.1:" + std::to_string(port), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    ASSERT_TRUE(channel->wait_connected(tern::deadline_after(kPatience)).ok());
    tern::bench::BenchmarkServiceClient client(*channel);

    Load load;
    tern::WaitGroup callers_done;
    callers_done.add(static_cast<std::size_t>(callers()));
    for (int i = 0; i < callers(); ++i) {
      tern::spawn([&, i] {
        call_until_stopped(client, load, i);
        callers_done.done();
      }).detach();
    }
    tern_test::Defer stop_load([&] {
      load.stop = true;
      EXPECT_TRUE(callers_done.wait_for(kPatience))
          << load.started - load.returned << " calls never returned";
      channel->close();
      tern::io::offload([&] { server.reset(); });
    });

    EXPECT_TRUE(eventually([&] { return load.ok_started_in[Load::before_fault] >= wanted; }))
        << load.ok_started_in[Load::before_fault] << " calls before the fault";
    load.phase = Load::during_fault;
    server = fault(std::move(server), load);
    ASSERT_TRUE(server != nullptr);
    load.phase = Load::after_fault;
    EXPECT_TRUE(eventually([&] { return load.ok_started_in[Load::after_fault] >= wanted; }))
        << load.ok_started_in[Load::after_fault] << " calls succeeded after the fault";

    load.stop = true;
    ASSERT_TRUE(callers_done.wait_for(kPatience))
        << load.started - load.returned << " calls never returned";
    EXPECT_EQ(load.started, load.returned);
    EXPECT_LE(load.longest, kCallTimeout + kLateMargin)
        << "a call returned "
        << std::chrono::duration_cast<std::chrono::milliseconds>(load.longest).count()
        << " ms after it started; its deadline was " << kCallTimeout.count() << " ms";
    EXPECT_TRUE(load.unexpected.empty()) << load.unexpected;
    EXPECT_EQ(load.wrong_replies, 0);
    EXPECT_GT(load.failed, 0) << "no call noticed the fault";
    std::printf(
        "%d callers: %d calls (%d ok before the fault, %d ok after), %d failed (%d unavailable, "
        "%d deadline_exceeded, %d cancelled), longest %lld ms; channel: %llu connects, %llu "
        "losses\n",
        callers(), load.returned, load.ok_started_in[Load::before_fault],
        load.ok_started_in[Load::after_fault], load.failed, load.codes[StatusCode::unavailable],
        load.codes[StatusCode::deadline_exceeded], load.codes[StatusCode::cancelled],
        static_cast<long long>(
            std::chrono::duration_cast<std::chrono::milliseconds>(load.longest).count()),
        static_cast<unsigned long long>(channel->stats().connects),
        static_cast<unsigned long long>(channel->stats().connection_losses));
  });
}

TEST(RpcServerFaults, KilledWithSigkillAndRestartedOnTheSamePort) {
  under_load([](std::unique_ptr<tern::test::ServerProcess> server, Load& load) {
    const int port = server->port();
    EXPECT_EQ(tern::io::offload([&] { return server->kill_now(); }), 128 + SIGKILL);
    // Every caller meets the dead server before it comes back.
    EXPECT_TRUE(eventually([&] {
      return static_cast<int>(load.callers_failed.size()) == callers();
    })) << load.callers_failed.size()
        << " callers saw a call fail";
    EXPECT_GT(load.codes[StatusCode::unavailable], 0);
    std::unique_ptr<tern::test::ServerProcess> restarted =
        tern::io::offload([port] { return restart_rpc_server(port); });
    EXPECT_EQ(restarted->port(), port) << restarted->first_line();
    return restarted;
  });
}

TEST(RpcServerFaults, FrozenWithSigstopCallsEndAtTheirDeadlineThenSucceed) {
  under_load([](std::unique_ptr<tern::test::ServerProcess> server, Load& load) {
    server->signal(SIGSTOP);
    // The connections stay open but nothing answers: every caller's call ends at its deadline.
    EXPECT_TRUE(eventually([&] {
      return static_cast<int>(load.callers_timed_out.size()) == callers();
    })) << load.callers_timed_out.size()
        << " callers saw deadline_exceeded";
    server->signal(SIGCONT);
    return server;
  });
}

}  // namespace
