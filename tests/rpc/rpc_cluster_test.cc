// The cluster behaviour of tern::rpc::Channel, under the backend named by TERN_IO: several
// rpc::Servers on 127.0.0.1 behind one channel, some made slow, failing or stopped, and a fake
// server that accepts and never answers. Breakers eject and readmit endpoints, hedged requests
// race, the retry budget caps retries, least_loaded and locality choose endpoints, health checks
// mark endpoints down and up, and a handler's call to another service carries its deadline and
// cancellation.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cluster_test.tern.h"
#include "fake_server.h"
#include "rpc/hedging.h"
#include "rpc_fixture.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/tcp_stream.h"
#include "tern/prof/metrics.h"
#include "tern/prof/status_sections.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::EndpointSpec;
using tern::rpc::EndpointStatus;
using tern::rpc::LoadBalancing;
using tern::rpc::ServerContext;
using tern::rpc::Status;
using tern::rpc::StatusCode;
namespace node = tern::cluster_test;

using tern_test::eventually;

constexpr std::chrono::milliseconds kPatience = tern_test::kRpcPatience;

enum class Mode { ok, unavailable, slow };

// One server of the cluster. Handlers run on the test's only worker.
class Node final : public node::NodeBase {
 public:
  explicit Node(std::string name) : name_(std::move(name)) {}

  Status Who(ServerContext& context, const node::WhoRequest&, node::WhoReply& reply) override {
    ++calls;
    if (mode == Mode::unavailable) return {StatusCode::unavailable, name_ + " is failing"};
    if (mode == Mode::slow) {
      const tern::Deadline until = tern::deadline_after(slow_for);
      while (!context.cancelled() && tern::Clock::now() < until) {
        if (!tern::this_fiber::sleep_for(1ms)) break;
      }
      if (context.cancelled()) ++saw_cancel;
    }
    reply.set_server(name_);
    return {};
  }

  Status Hold(ServerContext& context, const node::WhoRequest&, node::WhoReply&) override {
    if (context.deadline() != tern::kNoDeadline) {
      deadline_left = std::chrono::duration_cast<std::chrono::milliseconds>(context.deadline() -
                                                                            tern::Clock::now());
    }
    ++holding;
    const tern::Deadline limit = tern::deadline_after(20s);
    while (!context.cancelled() && tern::Clock::now() < limit) {
      if (!tern::this_fiber::sleep_for(1ms)) break;
    }
    if (context.cancelled()) ++saw_cancel;
    return {StatusCode::cancelled, "held until cancelled"};
  }

  Status Relay(ServerContext& context, const node::WhoRequest& request,
               node::WhoReply& reply) override {
    ClientContext downstream = ClientContext::from_server_context(context);
    node::NodeClient client(*relay);
    tern::rpc::Result<node::WhoReply> got = client.Hold(downstream, request);
    relay_status = got ? Status() : got.error();
    if (!got) return got.error();
    reply = *got;
    return {};
  }

  Status Health(ServerContext&, const node::WhoRequest&, node::WhoReply&) override {
    if (mode == Mode::unavailable) return {StatusCode::unavailable, name_ + " is failing"};
    return {};
  }

  const std::string& name() const { return name_; }

  Mode mode = Mode::ok;
  std::chrono::milliseconds slow_for{10s};
  int calls = 0;
  int holding = 0;
  int saw_cancel = 0;
  std::chrono::milliseconds deadline_left{0};
  Channel* relay = nullptr;
  std::optional<Status> relay_status;

 private:
  std::string name_;
};

// Servers "n0", "n1", ... on loopback, each serving its Node; stopped when it goes.
class Cluster {
 public:
  explicit Cluster(int size) {
    for (int i = 0; i < size; ++i) {
      nodes_.push_back(std::make_unique<Node>("n" + std::to_string(i)));
      servers_.push_back(std::make_unique<tern::rpc::Server>());
      addresses_.push_back(
          tern_test::start_on_loopback(*servers_.back(), *nodes_.back()).to_string());
    }
  }
  ~Cluster() {
    for (std::size_t i = 0; i < servers_.size(); ++i) stop(i);
  }

  Node& node(std::size_t i) { return *nodes_[i]; }
  const std::string& address(std::size_t i) const { return addresses_[i]; }
  std::string targets() const {
    std::string out;
    for (const std::string& address : addresses_) out += (out.empty() ? "" : ",") + address;
    return out;
  }
  void stop(std::size_t i) {
    if (servers_[i]->running()) (void)servers_[i]->stop(tern::deadline_after(kPatience));
  }
  int total_calls() const {
    int total = 0;
    for (const auto& n : nodes_) total += n->calls;
    return total;
  }

 private:
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<tern::rpc::Server>> servers_;
  std::vector<std::string> addresses_;
};

// Options with nothing on that a test does not turn on itself.
ChannelOptions quiet_options() {
  ChannelOptions options;
  options.connections_per_endpoint = 1;
  options.ping_interval = 0ms;
  options.health_check.interval = 0ms;
  options.breaker.enabled = false;
  return options;
}

Channel open_connected(std::string_view targets, ChannelOptions options, std::size_t endpoints) {
  tern::rpc::Result<Channel> channel = Channel::open(targets, std::move(options));
  EXPECT_TRUE(channel) << channel.error().to_string();
  EXPECT_TRUE(eventually([&] { return channel->stats().connected == endpoints; }))
      << channel->stats().connected << " of " << endpoints << " connected";
  return std::move(*channel);
}

tern::rpc::Result<node::WhoReply> who(Channel& channel, bool idempotent = false) {
  node::NodeClient client(channel);
  ClientContext context;
  context.set_timeout(kPatience);
  context.set_idempotent(idempotent);
  return client.Who(context, node::WhoRequest());
}

EndpointStatus status_of(const Channel& channel, const std::string& address) {
  for (const EndpointStatus& e : channel.endpoint_status()) {
    if (e.name == address) return e;
  }
  ADD_FAILURE() << "no endpoint " << address;
  return {};
}

std::string channels_section() {
  for (const auto& [name, json] : tern::prof::collect_status_sections()) {
    if (name == "channels") return json;
  }
  return {};
}

#if TERN_PROF_ENABLED
double metric_total(std::string_view name) {
  double sum = 0;
  for (const tern::prof::Family& family : tern::prof::MetricsRegistry::global().collect()) {
    if (family.name != name) continue;
    for (const tern::prof::Series& series : family.series) sum += series.value;
  }
  return sum;
}
#endif

TEST(Breaker, EjectsAFailingEndpointAndAProbeClosesItAfterRecovery) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(3);
    Node& failing = cluster.node(1);
    failing.mode = Mode::unavailable;
    ChannelOptions options = quiet_options();
    options.breaker.enabled = true;
    options.breaker.consecutive_failures = 3;
    options.breaker.min_calls = 0;
    options.breaker.base_ejection = 1s;
    Channel channel = open_connected(cluster.targets(), options, 3);

    int failed = 0;
    for (int i = 0; i < 30; ++i) failed += who(channel) ? 0 : 1;
    EXPECT_EQ(failing.calls, 3) << "the breaker opens after 3 failures in a row";
    EXPECT_EQ(failed, 3);
    EXPECT_EQ(channel.stats().ejections, 1u);
    EXPECT_EQ(channel.stats().ejected, 1u);
    EXPECT_EQ(status_of(channel, cluster.address(1)).breaker, "open");
    EXPECT_NE(channels_section().find("\"breaker\": \"open\""), std::string::npos)
        << channels_section();
    EXPECT_NE(channels_section().find(cluster.address(1)), std::string::npos);
#if TERN_PROF_ENABLED
    EXPECT_GE(metric_total("tern_rpc_channel_ejections_total"), 1.0);
#endif

    // Traffic has moved away: the ejected endpoint gets nothing while it is open.
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(who(channel));
    EXPECT_EQ(failing.calls, 3);

    // It recovers; once the ejection time is over a probe call reaches it and closes the breaker.
    failing.mode = Mode::ok;
    EXPECT_TRUE(eventually([&] {
      EXPECT_TRUE(who(channel));
      return status_of(channel, cluster.address(1)).breaker == "closed";
    }));
    EXPECT_EQ(failing.calls, 4) << "one probe closed it";
    const int before = failing.calls;
    for (int i = 0; i < 9; ++i) EXPECT_TRUE(who(channel));
    EXPECT_EQ(failing.calls, before + 3) << "round robin again";
    EXPECT_EQ(channel.stats().ejected, 0u);
  });
}

TEST(Breaker, NeverEjectsMoreThanItsShareEvenWhenAllFail) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(3);
    for (int i = 0; i < 3; ++i) cluster.node(i).mode = Mode::unavailable;
    ChannelOptions options = quiet_options();
    options.breaker.enabled = true;
    options.breaker.consecutive_failures = 2;
    options.breaker.min_calls = 0;
    options.breaker.base_ejection = 10s;
    Channel channel = open_connected(cluster.targets(), options, 3);
    for (int i = 0; i < 30; ++i) {
      EXPECT_FALSE(who(channel));
      EXPECT_LE(channel.stats().ejected, 1u) << "50% of 3 endpoints is 1";
    }
    EXPECT_EQ(channel.stats().ejections, 1u);
    EXPECT_EQ(cluster.total_calls(), 30);
    int reached = 0;
    for (int i = 0; i < 3; ++i) reached += cluster.node(i).calls > 2 ? 1 : 0;
    EXPECT_EQ(reached, 2) << "the two endpoints left keep getting calls";
  });
}

TEST(Hedging, ABackupAfterTheDelayWinsAndTheSlowRequestIsCancelled) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    Node& slow = cluster.node(0);
    slow.mode = Mode::slow;
    ChannelOptions options = quiet_options();
    options.hedging.delay = 50ms;
    Channel channel = open_connected(cluster.targets(), options, 2);

    // Round robin sends the first call to n0, which holds it; the backup goes to n1.
    tern::rpc::Result<node::WhoReply> reply = who(channel, /*idempotent=*/true);
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->server(), "n1");
    EXPECT_EQ(slow.calls, 1);
    EXPECT_EQ(cluster.node(1).calls, 1);
    EXPECT_EQ(channel.stats().hedges, 1u);
    EXPECT_EQ(channel.stats().hedge_wins, 1u);
    EXPECT_TRUE(eventually([&] { return slow.saw_cancel == 1; })) << "the loser is cancelled";

    // Calls answered before the delay send no backup (one to each server)...
    slow.mode = Mode::ok;
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(who(channel, /*idempotent=*/true));
    EXPECT_EQ(channel.stats().hedges, 1u);
    // ... and calls that are not idempotent never do, however slow.
    slow.mode = Mode::slow;
    slow.slow_for = 100ms;
    int from_slow = 0;
    for (int i = 0; i < 2; ++i) {
      reply = who(channel, /*idempotent=*/false);
      ASSERT_TRUE(reply);
      from_slow += reply->server() == "n0" ? 1 : 0;
    }
    EXPECT_EQ(from_slow, 1);
    EXPECT_EQ(channel.stats().hedges, 1u);
    EXPECT_EQ(cluster.total_calls(), 6);
  });
}

TEST(Hedging, LatencyWindowGivesNoPercentileBeforeEnoughSamples) {
  tern::rpc::detail::LatencyWindow window;
  for (std::size_t i = 1; i < tern::rpc::detail::LatencyWindow::kMinSamples; ++i) {
    window.record(std::chrono::milliseconds(i));
  }
  EXPECT_LT(window.percentile(50).count(), 0);
  window.record(1ms);
  EXPECT_GE(window.percentile(50).count(), 0);
}

TEST(Hedging, LatencyWindowPercentilesOfShuffledSamples) {
  std::vector<std::chrono::nanoseconds> samples;
  for (int ms = 1; ms <= 100; ++ms) samples.emplace_back(std::chrono::milliseconds(ms));
  std::shuffle(samples.begin(), samples.end(), std::mt19937(7));
  tern::rpc::detail::LatencyWindow window;
  for (std::chrono::nanoseconds sample : samples) window.record(sample);
  // The sample at rank percent × (count - 1), counted from the smallest.
  EXPECT_EQ(window.percentile(0), 1ms);
  EXPECT_EQ(window.percentile(50), 50ms);
  EXPECT_EQ(window.percentile(95), 95ms);
  EXPECT_EQ(window.percentile(100), 100ms);
  EXPECT_EQ(window.percentile(250), 100ms) << "clamped to 100";
  // Asking twice gives the same answer: the window itself is not reordered.
  EXPECT_EQ(window.percentile(50), 50ms);
}

TEST(Hedging, LatencyWindowForgetsSamplesOlderThanItsSize) {
  constexpr std::size_t kSize = tern::rpc::detail::LatencyWindow::kSize;
  tern::rpc::detail::LatencyWindow window;
  for (std::size_t i = 0; i < kSize; ++i) window.record(1s);
  for (std::size_t i = 0; i < kSize - 1; ++i) window.record(2ms);
  EXPECT_EQ(window.percentile(99), 2ms) << "one old sample left, above the 99th percentile";
  EXPECT_EQ(window.percentile(100), 1s);
  window.record(3ms);
  EXPECT_EQ(window.percentile(100), 3ms) << "every sample of the first round replaced";
}

TEST(Hedging, APercentileDelayFollowsTheLatenciesSeen) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    for (int i = 0; i < 2; ++i) {
      cluster.node(i).mode = Mode::slow;
      cluster.node(i).slow_for = 20ms;
    }
    ChannelOptions options = quiet_options();
    options.hedging.percentile = 95;
    Channel channel = open_connected(cluster.targets(), options, 2);
    // No delay and too few replies: no hedging yet.
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(who(channel, /*idempotent=*/true));
    EXPECT_EQ(channel.stats().hedges, 0u);

    // n0 now holds its calls until they are cancelled: every call that reaches it is hedged
    // after about the p95 seen so far, and n1 answers.
    Node& slow = cluster.node(0);
    slow.slow_for = 10s;
    const int before = slow.calls;
    const std::uint64_t hedges_before = channel.stats().hedges;
    for (int i = 0; i < 4; ++i) {
      tern::rpc::Result<node::WhoReply> reply = who(channel, /*idempotent=*/true);
      ASSERT_TRUE(reply) << reply.error().to_string();
      EXPECT_EQ(reply->server(), "n1");
    }
    const int reached_slow = slow.calls - before;
    EXPECT_GE(reached_slow, 1);
    EXPECT_GE(channel.stats().hedges - hedges_before, static_cast<std::uint64_t>(reached_slow));
    EXPECT_TRUE(eventually([&] { return slow.saw_cancel == reached_slow; }));
  });
}

TEST(RetryBudget, CapsRetriesWhenEveryEndpointFails) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(3);
    for (int i = 0; i < 3; ++i) cluster.node(i).mode = Mode::unavailable;
    ChannelOptions options = quiet_options();
    options.max_retries = 2;
    options.retry_budget.percent = 10;
    options.retry_budget.min_per_second = 1;
    options.retry_budget.window = 10s;
    Channel channel = open_connected(cluster.targets(), options, 3);
    constexpr int kCalls = 100;
    for (int i = 0; i < kCalls; ++i) {
      tern::rpc::Result<node::WhoReply> reply = who(channel, /*idempotent=*/true);
      ASSERT_FALSE(reply);
      EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    }
    const tern::rpc::ChannelStats stats = channel.stats();
    // 10% of 100 calls, plus 1 a second over the 10-second window.
    EXPECT_LE(stats.retries, 20u);
    EXPECT_GE(stats.retries, 10u) << "the allowance per second is spent";
    EXPECT_GT(stats.retries_throttled, 0u);
    EXPECT_EQ(cluster.total_calls(), kCalls + static_cast<int>(stats.retries));
  });
}

TEST(RetryBudget, RetriesAnUnavailableAnswerOnAnotherEndpoint) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    cluster.node(0).mode = Mode::unavailable;
    Channel channel = open_connected(cluster.targets(), quiet_options(), 2);
    tern::rpc::Result<node::WhoReply> reply = who(channel, /*idempotent=*/true);
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->server(), "n1");
    EXPECT_EQ(channel.stats().retries, 1u);
    EXPECT_EQ(cluster.node(0).calls, 1);
  });
}

TEST(Balancing, LeastLoadedAvoidsTheSlowServer) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(3);
    Node& slow = cluster.node(0);
    slow.mode = Mode::slow;
    // Far slower than a fast server can get: under TSan on a busy machine a fast server's calls
    // took several milliseconds, and against 30 ms a slow server with nothing in flight was then
    // rightly the least loaded.
    slow.slow_for = 250ms;
    ChannelOptions options = quiet_options();
    options.load_balancing = LoadBalancing::least_loaded;
    Channel channel = open_connected(cluster.targets(), options, 3);
    constexpr int kFibers = 8;
    constexpr int kCallsEach = 10;
    int failed = 0;
    std::vector<tern::Fiber> callers;
    for (int f = 0; f < kFibers; ++f) {
      callers.push_back(tern::spawn([&] {
        for (int i = 0; i < kCallsEach; ++i) failed += who(channel) ? 0 : 1;
      }));
    }
    for (tern::Fiber& caller : callers) caller.join();
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(cluster.total_calls(), kFibers * kCallsEach);
    // Round robin would give it a third (26 or 27 calls).
    EXPECT_LE(slow.calls, kFibers) << "n0 got " << slow.calls << " calls";
    EXPECT_GT(status_of(channel, cluster.address(0)).latency_ewma_ms,
              status_of(channel, cluster.address(1)).latency_ewma_ms);
  });
}

TEST(Balancing, LocalityPrefersTheLocalZoneAndSpillsOver) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(3);
    const std::vector<EndpointSpec> specs = {
        {.address = cluster.address(0), .zone = "west"},
        {.address = cluster.address(1), .zone = "east", .metadata = {{"rack", "e\"7"}}},
        {.address = cluster.address(2), .zone = "west"},
    };
    ChannelOptions options = quiet_options();
    options.load_balancing = LoadBalancing::locality;
    options.zone = "east";
    tern::rpc::Result<Channel> opened = Channel::open(specs, options);
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    ASSERT_TRUE(eventually([&] { return channel.stats().connected == 3; }));
    EXPECT_EQ(status_of(channel, cluster.address(1)).zone, "east");
    EXPECT_EQ(status_of(channel, cluster.address(1)).metadata.size(), 1u);
    EXPECT_NE(channels_section().find("\"zone\": \"east\", \"weight\": 1, \"healthy\": true"),
              std::string::npos)
        << channels_section();
    EXPECT_NE(channels_section().find("\"metadata\": {\"rack\": \"e\\\"7\"}"), std::string::npos)
        << channels_section();

    for (int i = 0; i < 20; ++i) {
      tern::rpc::Result<node::WhoReply> reply = who(channel);
      ASSERT_TRUE(reply);
      EXPECT_EQ(reply->server(), "n1");
    }
    EXPECT_EQ(cluster.node(1).calls, 20);

    // The local zone's only server stops: calls spill over to the other zone.
    cluster.stop(1);
    ASSERT_TRUE(eventually([&] { return status_of(channel, cluster.address(1)).connected == 0; }));
    for (int i = 0; i < 20; ++i) EXPECT_TRUE(who(channel, /*idempotent=*/true));
    EXPECT_EQ(cluster.node(1).calls, 20);
    EXPECT_EQ(cluster.node(0).calls + cluster.node(2).calls, 20);
  });
}

TEST(Balancing, LocalitySpillsOverWhenTheLocalZoneIsOverloaded) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    cluster.node(0).mode = Mode::slow;
    cluster.node(0).slow_for = 200ms;
    const std::vector<EndpointSpec> specs = {
        {.address = cluster.address(0), .zone = "east"},
        {.address = cluster.address(1), .zone = "west"},
    };
    ChannelOptions options = quiet_options();
    options.load_balancing = LoadBalancing::locality;
    options.zone = "east";
    options.locality_spill_in_flight = 2;
    tern::rpc::Result<Channel> opened = Channel::open(specs, options);
    ASSERT_TRUE(opened) << opened.error().to_string();
    Channel& channel = *opened;
    ASSERT_TRUE(eventually([&] { return channel.stats().connected == 2; }));
    std::vector<tern::Fiber> callers;
    int failed = 0;
    for (int f = 0; f < 5; ++f) {
      callers.push_back(tern::spawn([&] { failed += who(channel) ? 0 : 1; }));
    }
    for (tern::Fiber& caller : callers) caller.join();
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(cluster.node(0).calls, 2) << "two in flight fill the local zone";
    EXPECT_EQ(cluster.node(1).calls, 3);
  });
}

TEST(DeadlinePropagation, TheDownstreamCallSeesTheDeadlineAndIsCancelledWithTheCaller) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    Node& front = cluster.node(0);
    Node& back = cluster.node(1);
    Channel to_back = open_connected(cluster.address(1), quiet_options(), 1);
    front.relay = &to_back;
    Channel to_front = open_connected(cluster.address(0), quiet_options(), 1);

    ClientContext context;
    context.set_timeout(3s);
    std::optional<tern::rpc::Result<node::WhoReply>> got;
    tern::Fiber caller = tern::spawn([&] {
      node::NodeClient client(to_front);
      got = client.Relay(context, node::WhoRequest());
    });
    ASSERT_TRUE(eventually([&] { return back.holding == 1; }));
    EXPECT_GT(back.deadline_left, 2s) << "the caller's 3 s, less the time to get there";
    EXPECT_LE(back.deadline_left, 3s);
    context.cancel();
    caller.join();
    ASSERT_TRUE(got.has_value());
    ASSERT_FALSE(*got);
    EXPECT_EQ(got->error().code(), StatusCode::cancelled);
    EXPECT_TRUE(eventually([&] { return back.saw_cancel == 1; }))
        << "the cancel went on from the front server to the back one";
    EXPECT_TRUE(eventually([&] { return front.relay_status.has_value(); }));
    EXPECT_EQ(front.relay_status->code(), StatusCode::cancelled);
    to_front.close();
    to_back.close();
  });
}

TEST(HealthChecks, AServerThatAcceptsAndNeverAnswersIsMarkedUnhealthy) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(1);
    tern_test::FakeServer silent([](tern::net::TcpStream& stream, int) {
      std::byte buffer[4096];
      for (;;) {
        tern::Result<std::size_t> got = stream.read(buffer);
        if (!got || *got == 0) return;
      }
    });
    const Address silent_address = silent.start();
    ChannelOptions options = quiet_options();
    options.health_check.interval = 50ms;
    options.health_check.timeout = 50ms;
    options.health_check.unhealthy_after = 2;
    Channel channel =
        open_connected(silent_address.to_string() + "," + cluster.address(0), options, 2);
    ASSERT_TRUE(
        eventually([&] { return !status_of(channel, silent_address.to_string()).healthy; }));
    EXPECT_TRUE(status_of(channel, cluster.address(0)).healthy);
    EXPECT_EQ(channel.stats().unhealthy, 1u);
    EXPECT_GE(channel.stats().health_check_failures, 2u);
    for (int i = 0; i < 10; ++i) {
      tern::rpc::Result<node::WhoReply> reply = who(channel);
      ASSERT_TRUE(reply) << reply.error().to_string();
      EXPECT_EQ(reply->server(), "n0");
    }
    EXPECT_EQ(cluster.node(0).calls, 10);
    channel.close();
    silent.stop();
  });
}

TEST(HealthChecks, AHealthMethodMarksAnEndpointDownAndUpAgain) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Cluster cluster(2);
    Node& sick = cluster.node(1);
    sick.mode = Mode::unavailable;
    ChannelOptions options = quiet_options();
    options.health_check.interval = 20ms;
    options.health_check.unhealthy_after = 2;
    options.health_check.healthy_after = 2;
    options.health_check.service = std::string(node::NodeBase::kServiceName);
    options.health_check.method = "Health";
    Channel channel = open_connected(cluster.targets(), options, 2);
    ASSERT_TRUE(eventually([&] { return !status_of(channel, cluster.address(1)).healthy; }));
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(who(channel));
    EXPECT_EQ(sick.calls, 0) << "Who is never called on the unhealthy endpoint";

    sick.mode = Mode::ok;
    ASSERT_TRUE(eventually([&] { return status_of(channel, cluster.address(1)).healthy; }));
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(who(channel));
    EXPECT_EQ(sick.calls, 5);
    EXPECT_GT(channel.stats().health_checks, 4u);
  });
}

}  // namespace
