// tern::rpc under faults, over real loopback sockets and under the backend TERN_IO names: a client
// that resets (RST) in the middle of a request frame and a server connection that resets in the
// middle of a reply (both cut by a proxy between a real Channel and a real Server), a client out
// of file descriptors, a handler that blocks its worker's thread for a second while the other
// worker keeps serving and the loop profiler records the stall, and protobuf's own complaints
// (a string that is not UTF-8) logged through tern::log.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "reliability.tern.h"
#include "reliability/fault_proxy.h"
#include "reliability/reliability_util.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/prof/loop_profiler.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;
using tern::Deadline;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::ServerContext;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern_test::FaultProxy;
namespace rel = tern::reliability;

// How long anything a test waits for may take before the test fails.
constexpr std::chrono::milliseconds kPatience = 20s;

// Waits until pred() holds, checking every millisecond; false at the deadline.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = kPatience) {
  const Deadline deadline = tern::deadline_after(limit);
  while (!pred()) {
    if (tern::Clock::now() >= deadline) return false;
    if (!tern::this_fiber::sleep_for(1ms)) return pred();
  }
  return true;
}

rel::Request request(std::string payload, std::uint32_t reply_size = 0) {
  rel::Request r;
  r.set_payload(std::move(payload));
  r.set_reply_size(reply_size);
  return r;
}

// Echo, Hold and Block (see reliability.proto). Handlers run on every worker.
class ReliabilityService final : public rel::ReliabilityBase {
 public:
  Status Echo(ServerContext&, const rel::Request& request, rel::Reply& reply) override {
    if (request.reply_size() > 0) {
      reply.mutable_payload()->assign(request.reply_size(), 'r');
    } else {
      reply.set_payload(request.payload());
    }
    reply.set_worker(static_cast<std::uint32_t>(tern::this_worker::index()));
    return {};
  }

  Status Hold(ServerContext& context, const rel::Request&, rel::Reply&) override {
    ++holding;
    const Deadline limit = tern::deadline_after(20s);
    while (!context.cancelled() && tern::Clock::now() < limit) {
      if (!tern::this_fiber::sleep_for(2ms)) break;
    }
    --holding;
    return {StatusCode::cancelled, "held until the call was cancelled"};
  }

  Status Block(ServerContext&, const rel::Request& request, rel::Reply& reply) override {
    block_started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(request.block_ms()));
    block_done = true;
    reply.set_worker(static_cast<std::uint32_t>(tern::this_worker::index()));
    return {};
  }

  std::atomic<int> holding{0};
  std::atomic<bool> block_started{false};
  std::atomic<bool> block_done{false};
};

// One connection, no pings, quick reconnects: every fault shows on the one connection.
ChannelOptions one_connection() {
  ChannelOptions options;
  options.connections_per_endpoint = 1;
  options.ping_interval = 0ms;
  options.reconnect.initial_backoff = 20ms;
  options.reconnect.max_backoff = 100ms;
  options.reconnect.attempt_timeout = 2s;
  return options;
}

// A ReliabilityService on a Server at 127.0.0.1:0. Lives on one worker fiber.
struct Served {
  explicit Served(tern::rpc::ServerOptions options = {}) : server(std::move(options)) {
    EXPECT_TRUE(server.add_service(service));
    tern::Result<Address> bound = server.start(Address::loopback(0));
    EXPECT_TRUE(bound) << bound.error().message();
    if (bound) address = *bound;
  }
  ~Served() {
    if (server.running()) {
      EXPECT_EQ(server.stop(tern::deadline_after(kPatience)), 0u);
    }
  }

  ReliabilityService service;
  tern::rpc::Server server;
  Address address = Address::loopback(1);
};

// Opens a channel to `target` and waits until it is connected (fatal failures end the test).
void open_connected(std::optional<Channel>& channel, const std::string& target,
                    ChannelOptions options = one_connection()) {
  tern::rpc::Result<Channel> opened = Channel::open(target, std::move(options));
  ASSERT_TRUE(opened) << opened.error().to_string();
  channel.emplace(std::move(*opened));
  ASSERT_TRUE(channel->wait_connected(tern::deadline_after(kPatience)).ok());
}

// A fiber that calls Echo on its own channel until stopped; every call must succeed.
class GoodTraffic {
 public:
  // Starts calling (fatal failures end the test).
  void start(const Address& server) {
    ASSERT_NO_FATAL_FAILURE(open_connected(channel_, server.to_string()));
    fiber_ = tern::spawn([this] { run(); }, {.name = "good traffic"});
    expect_flowing();
  }
  // Waits until `calls` more calls have succeeded.
  void expect_flowing(int calls = 20) {
    const int target = ok_ + calls;
    EXPECT_TRUE(eventually([&] { return ok_ >= target || failed_ > 0; }))
        << "the good channel made " << ok_ << " calls";
    EXPECT_EQ(failed_, 0) << first_failure_;
  }
  // Stops calling, closes the channel, checks that every call succeeded.
  void finish() {
    if (!fiber_.joinable()) return;
    stop_ = true;
    fiber_.join();
    channel_->close();
    EXPECT_GT(ok_, 0);
    EXPECT_EQ(failed_, 0) << first_failure_;
  }
  ~GoodTraffic() { finish(); }

 private:
  void run() {
    rel::ReliabilityClient client(*channel_);
    for (int i = 0; !stop_; ++i) {
      ClientContext context;
      context.set_timeout(kPatience);
      const std::string payload = "good call " + std::to_string(i);
      tern::rpc::Result<rel::Reply> reply = client.Echo(context, request(payload));
      if (reply && reply->payload() == payload) {
        ++ok_;
      } else if (failed_++ == 0) {
        first_failure_ = reply ? "wrong payload " + reply->payload() : reply.error().to_string();
      }
    }
  }

  std::optional<Channel> channel_;
  tern::Fiber fiber_;
  bool stop_ = false;
  int ok_ = 0;
  int failed_ = 0;
  std::string first_failure_;
};

TEST(RpcReset, ClientResetInTheMiddleOfARequestIsLoggedCountedAndClosed) {
  // WARN and up only: the client logs its lost connection (INFO) at the moment the server logs
  // the reset, and a peer line waits at most 1 ms for the sink lock before it is dropped (under
  // ThreadSanitizer on a loaded machine the client's line held it longer).
  tern_test::LogCapture log(tern::log::Level::warn);
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    Served served;
    GoodTraffic good;
    ASSERT_NO_FATAL_FAILURE(good.start(served.address));
    // The first connection through the proxy is reset after 1000 bytes of its first request.
    FaultProxy proxy(served.address, [](int index) -> std::optional<FaultProxy::Fault> {
      if (index == 0) return FaultProxy::Fault{FaultProxy::Direction::to_server, 1000};
      return std::nullopt;
    });
    const Address through = proxy.start();
    std::optional<Channel> cut;
    ASSERT_NO_FATAL_FAILURE(open_connected(cut, through.to_string()));
    ASSERT_TRUE(eventually([&] { return served.server.stats().connections == 2; }));
    const tern::rpc::ServerStats before = served.server.stats();

    rel::ReliabilityClient client(*cut);
    ClientContext context;
    context.set_timeout(kPatience);
    const tern::Clock::time_point start = tern::Clock::now();
    tern::rpc::Result<rel::Reply> reply =
        client.Echo(context, request(std::string(64u << 10, 'q')));
    ASSERT_FALSE(reply) << "a call whose request was cut off succeeded";
    EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    EXPECT_LT(tern::Clock::now() - start, 5s) << "the call failed only at its deadline";
    EXPECT_EQ(proxy.faults(), 1);
    cut->close();

    EXPECT_TRUE(eventually([&] { return served.server.stats().connections == 1; }))
        << served.server.stats().connections
        << " connections open; only the good channel's should be";
    EXPECT_TRUE(eventually([&] {
      return served.server.stats().protocol_errors == before.protocol_errors + 1;
    })) << "a request cut off by a reset is counted like one cut off by a close: "
        << served.server.stats().protocol_errors << " protocol errors";
    // The counter moves before the peer line reaches the log: wait for the line too.
    EXPECT_TRUE(eventually([&] { return log.has_line({"WARN", "middle of a frame"}); }))
        << log.text();
    good.expect_flowing();
    good.finish();
  });
}

TEST(RpcProtobufLog, ProtobufsOwnComplaintsGoToTernLog) {
  tern_test::LogCapture log;
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Served served;
    std::optional<Channel> channel;
    ASSERT_NO_FATAL_FAILURE(open_connected(channel, served.address.to_string()));
    rel::ReliabilityClient client(*channel);
    // A proto3 string that is not UTF-8: protobuf complains when the client encodes it and
    // refuses to decode it on the server.
    rel::Request bad = request("p");
    bad.set_note("\xff\xfe not UTF-8");
    ClientContext context;
    context.set_timeout(kPatience);
    tern::rpc::Result<rel::Reply> reply = client.Echo(context, bad);
    ASSERT_FALSE(reply);
    EXPECT_EQ(reply.error().code(), StatusCode::invalid_argument) << reply.error().to_string();
    EXPECT_TRUE(log.has_line({"ERROR", "protobuf (", "invalid UTF-8"})) << log.text();
    // The connection is fine: the next call succeeds.
    ClientContext next;
    next.set_timeout(kPatience);
    EXPECT_TRUE(client.Echo(next, request("after")));
    channel->close();
  });
}

TEST(RpcReset, ServerResetInTheMiddleOfAReplyFailsThePendingCallsThenReconnects) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    Served served;
    // The first connection through the proxy is reset after 1000 bytes of replies.
    FaultProxy proxy(served.address, [](int index) -> std::optional<FaultProxy::Fault> {
      if (index == 0) return FaultProxy::Fault{FaultProxy::Direction::to_client, 1000};
      return std::nullopt;
    });
    const Address through = proxy.start();
    std::optional<Channel> channel;
    ASSERT_NO_FATAL_FAILURE(open_connected(channel, through.to_string()));
    rel::ReliabilityClient client(*channel);

    // Two calls wait on the server, then a call whose 256 KiB reply is cut after 1000 bytes.
    ClientContext context;
    context.set_timeout(kPatience);
    std::vector<tern::rpc::Future<rel::Reply>> calls;
    for (int i = 0; i < 2; ++i) calls.push_back(client.HoldAsync(context, request("hold")));
    ASSERT_TRUE(eventually([&] { return served.service.holding.load() == 2; }));
    const tern::Clock::time_point start = tern::Clock::now();
    calls.push_back(client.EchoAsync(context, request("big", 256u << 10)));
    for (auto& call : calls) {
      tern::rpc::Result<rel::Reply> reply = call.get();
      ASSERT_FALSE(reply) << "a call on the reset connection succeeded";
      EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
      EXPECT_NE(reply.error().message().find("reset"), std::string::npos)
          << reply.error().to_string();
    }
    EXPECT_LT(tern::Clock::now() - start, 5s) << "the calls failed only at their deadline";
    EXPECT_EQ(proxy.faults(), 1);
    EXPECT_EQ(channel->stats().connection_losses, 1u);
    EXPECT_TRUE(eventually([&] { return served.service.holding.load() == 0; }))
        << "the server's calls did not see their connection go";

    // The channel reconnects (through the proxy, faithfully now) and calls succeed again.
    tern::rpc::Result<rel::Reply> reply;
    EXPECT_TRUE(eventually([&] {
      ClientContext again;
      again.set_timeout(kPatience);
      reply = client.Echo(again, request("after the reset"));
      return reply.has_value();
    })) << reply.error().to_string();
    EXPECT_EQ(reply->payload(), "after the reset");
    EXPECT_GE(channel->stats().connects, 2u);
    EXPECT_EQ(channel->stats().protocol_errors, 0u);
    channel->close();
  });
}

TEST(RpcOutOfDescriptors, ChannelFailsWithEmfileThenRecovers) {
  tern_test::DescriptorHog hog(64);
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    Served served;
    std::optional<Channel> steady;
    ASSERT_NO_FATAL_FAILURE(open_connected(steady, served.address.to_string()));
    rel::ReliabilityClient steady_client(*steady);
    // A call first: the server has accepted the steady connection before the table fills.
    ClientContext first;
    first.set_timeout(kPatience);
    ASSERT_TRUE(steady_client.Echo(first, request("accepted")));

    ASSERT_GT(hog.fill(), 0);
    tern::rpc::Result<Channel> opened = Channel::open(served.address.to_string(), one_connection());
    ASSERT_TRUE(opened) << opened.error().to_string();
    rel::ReliabilityClient client(*opened);
    for (int i = 0; i < 3; ++i) {
      ClientContext context;
      context.set_timeout(2s);
      tern::rpc::Result<rel::Reply> reply = client.Echo(context, request("no descriptors"));
      ASSERT_FALSE(reply);
      EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
      EXPECT_NE(reply.error().message().find("Too many open files"), std::string::npos)
          << reply.error().to_string();
      ClientContext steady_context;
      steady_context.set_timeout(kPatience);
      tern::rpc::Result<rel::Reply> kept = steady_client.Echo(steady_context, request("kept"));
      ASSERT_TRUE(kept) << "a connected channel stopped working: " << kept.error().to_string();
    }

    hog.release_all();
    tern::rpc::Result<rel::Reply> reply;
    EXPECT_TRUE(eventually([&] {
      ClientContext context;
      context.set_timeout(kPatience);
      reply = client.Echo(context, request("descriptors again"));
      return reply.has_value();
    })) << reply.error().to_string();
    EXPECT_EQ(reply->payload(), "descriptors again");
    opened->close();
    steady->close();
  });
}

#if TERN_PROF_ENABLED
// The "max-usec" of the "run fibers" line of a profiler table, or -1.
double run_phase_max_usec(const std::string& table) {
  static const std::regex run_line(R"(run fibers cnt=\d+ total-usec=\d+ avg=\S+ max-usec=(\S+))");
  std::smatch match;
  return std::regex_search(table, match, run_line) ? std::stod(match[1]) : -1.0;
}
#endif

TEST(RpcBlockingHandler, TheOtherWorkerKeepsServingAndTheProfilerShowsTheStall) {
  constexpr std::uint32_t kBlockMs = 1000;
  std::mutex reports_mutex;
  std::map<std::size_t, std::string> final_reports;
  tern::Runtime runtime({.workers = 2,
                         .prof_interval = std::chrono::milliseconds(3'600'000),
                         .prof_report = [&](std::size_t worker, std::string_view table) {
                           std::lock_guard lock(reports_mutex);
                           final_reports[worker] += std::string(table);
                         }});
  std::uint32_t blocked_worker = 0;
  runtime.run([&] {
    tern::rpc::ServerOptions options;
    options.tcp.accept_mode = tern::net::AcceptMode::round_robin;  // connections alternate
    Served served(options);
    // Two channels, one connection each, accepted one after the other: one per worker.
    std::optional<Channel> fast;
    ASSERT_NO_FATAL_FAILURE(open_connected(fast, served.address.to_string()));
    std::optional<Channel> slow;
    ASSERT_NO_FATAL_FAILURE(open_connected(slow, served.address.to_string()));
    rel::ReliabilityClient fast_client(*fast);
    rel::ReliabilityClient slow_client(*slow);
    auto worker_of = [](rel::ReliabilityClient& client) -> int {
      ClientContext context;
      context.set_timeout(kPatience);
      tern::rpc::Result<rel::Reply> reply = client.Echo(context, request("where"));
      return reply ? static_cast<int>(reply->worker()) : -1;
    };
    const int fast_worker = worker_of(fast_client);
    const int slow_worker = worker_of(slow_client);
    ASSERT_GE(fast_worker, 0);
    ASSERT_GE(slow_worker, 0);
    ASSERT_NE(fast_worker, slow_worker) << "round robin put both connections on one worker";
    blocked_worker = static_cast<std::uint32_t>(slow_worker);

    ClientContext block_context;
    block_context.set_timeout(kPatience);
    rel::Request block = request("block");
    block.set_block_ms(kBlockMs);
    const tern::Clock::time_point block_start = tern::Clock::now();
    tern::rpc::Future<rel::Reply> blocked = slow_client.BlockAsync(block_context, block);
    ASSERT_TRUE(eventually([&] { return served.service.block_started.load(); }));

    // While the slow worker's thread sleeps, the fast worker answers call after call.
    const int calls = tern_test::scaled(50) + 10;
    int before_unblocked = 0;
    std::chrono::nanoseconds slowest{0};
    for (int i = 0; i < calls; ++i) {
      ClientContext context;
      context.set_timeout(kPatience);
      const std::string payload = "while blocked " + std::to_string(i);
      const tern::Clock::time_point start = tern::Clock::now();
      tern::rpc::Result<rel::Reply> reply = fast_client.Echo(context, request(payload));
      slowest = std::max(slowest, tern::Clock::now() - start);
      ASSERT_TRUE(reply) << reply.error().to_string();
      EXPECT_EQ(reply->payload(), payload);
      EXPECT_EQ(reply->worker(), static_cast<std::uint32_t>(fast_worker));
      if (!served.service.block_done.load()) ++before_unblocked;
    }
    EXPECT_EQ(before_unblocked, calls) << "calls on the other worker waited for the blocked one";
    EXPECT_LT(slowest, 500ms);

    tern::rpc::Result<rel::Reply> unblocked = blocked.get();
    ASSERT_TRUE(unblocked) << unblocked.error().to_string();
    EXPECT_EQ(unblocked->worker(), static_cast<std::uint32_t>(slow_worker));
    EXPECT_GE(tern::Clock::now() - block_start, std::chrono::milliseconds(kBlockMs));

#if TERN_PROF_ENABLED
    // The blocked worker's loop did not get control back for the whole second: one run of its
    // "run fibers" phase lasted that long. The other worker had no such stall.
    auto run_max = [](std::size_t worker) {
      std::uint64_t max_ns = 0;
      tern::prof::LoopProfiler::for_each_totals(
          [&](std::size_t w, tern::prof::LoopPhase phase, const tern::prof::PhaseTotals& totals) {
            if (w == worker && phase == tern::prof::LoopPhase::run) max_ns = totals.max_ns;
          });
      return std::chrono::nanoseconds(max_ns);
    };
    const auto stall = std::chrono::milliseconds(kBlockMs * 9 / 10);
    EXPECT_TRUE(eventually([&] { return run_max(static_cast<std::size_t>(slow_worker)) >= stall; }))
        << "the profiler's longest run phase on the blocked worker: "
        << std::chrono::duration_cast<std::chrono::microseconds>(
               run_max(static_cast<std::size_t>(slow_worker)))
               .count()
        << " us";
    EXPECT_LT(run_max(static_cast<std::size_t>(fast_worker)), stall);
#endif
    slow->close();
    fast->close();
  });
#if TERN_PROF_ENABLED
  // The report each worker printed at shutdown shows the stall in its "max-usec".
  std::lock_guard lock(reports_mutex);
  ASSERT_EQ(final_reports.count(blocked_worker), 1u);
  EXPECT_GE(run_phase_max_usec(final_reports[blocked_worker]), kBlockMs * 900.0)
      << final_reports[blocked_worker];
  std::printf("the blocked worker's report at shutdown:\n%s",
              final_reports[blocked_worker].c_str());
#endif
}

}  // namespace
