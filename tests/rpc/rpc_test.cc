// tern::rpc end to end over loopback, under the backend named by TERN_IO: unary, async and
// one-way calls, multiplexing, deadlines and cancellation on both sides, limits, interceptors,
// compression, load balancing, retries, server restart, wait-for-ready and graceful shutdown.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "rpc_fixture.h"
#include "rpc_test.tern.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::Server;
using tern::rpc::ServerContext;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern::rpc_test::EchoReply;
using tern::rpc_test::EchoRequest;
using tern::rpc_test::EchoServiceClient;

using tern_test::eventually;
using tern_test::quick_options;
using tern_test::start_on_loopback;

class TestService final : public tern::rpc_test::EchoServiceBase {
 public:
  explicit TestService(std::string name = "a") : name_(std::move(name)) {}

  Status Echo(ServerContext& context, const EchoRequest& request, EchoReply& reply) override {
    ++echoes;
    reply.set_text(request.text());
    reply.set_server(name_);
    if (auto tag = context.metadata("tag")) context.add_reply_metadata("seen", std::string(*tag));
    return {};
  }
  Status Sleep(ServerContext& context, const EchoRequest& request, EchoReply& reply) override {
    ++sleeping;
    const tern::Deadline until =
        tern::deadline_after(std::chrono::milliseconds(request.delay_ms()));
    while (tern::Clock::now() < until && !context.cancelled()) {
      (void)tern::this_fiber::sleep_for(1ms);
    }
    --sleeping;
    if (context.cancelled()) ++saw_cancel;
    reply.set_text(request.text());
    reply.set_server(name_);
    return {};
  }
  Status Record(ServerContext&, const EchoRequest& request, EchoReply&) override {
    recorded.push_back(request.text());
    return {};
  }

  int echoes = 0;
  int sleeping = 0;
  int saw_cancel = 0;
  std::vector<std::string> recorded;

 private:
  std::string name_;
};

EchoRequest request(std::string text, std::uint32_t delay_ms = 0) {
  EchoRequest r;
  r.set_text(std::move(text));
  r.set_delay_ms(delay_ms);
  return r;
}

// A TestService on a Server at 127.0.0.1:0 and a Channel to it, closed and stopped when it goes
// out of scope. Lives on one worker fiber; check ready() before use.
struct Served {
  explicit Served(tern::rpc::ServerOptions server_options = {},
                  ChannelOptions channel_options = quick_options())
      : server(std::move(server_options)) {
    address = start_on_loopback(server, service);
    auto opened = Channel::open(address.to_string(), std::move(channel_options));
    if (!opened) {
      ADD_FAILURE() << opened.error().to_string();
      return;
    }
    channel.emplace(std::move(*opened));
    client.emplace(*channel);
  }
  ~Served() {
    if (channel) channel->close();
    server.stop(tern::deadline_after(5s));
  }
  bool ready() const { return client.has_value(); }

  TestService service;
  Server server;
  Address address;
  std::optional<Channel> channel;
  std::optional<EchoServiceClient> client;
};

TEST(Rpc, UnaryCallCarriesMetadataBothWays) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    Server& server = served.server;
    EchoServiceClient& client = *served.client;
    ClientContext context;
    context.add_metadata("tag", "blue");
    auto reply = client.Echo(context, request("hello"));
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "hello");
    EXPECT_EQ(context.reply_metadata("seen").value_or(""), "blue");
    EXPECT_EQ(context.peer(), served.address.to_string());
    auto missing = client.Missing(request("x"));
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code(), StatusCode::unimplemented);
    EXPECT_NE(missing.error().message().find("Missing"), std::string::npos);
    EXPECT_EQ(server.stats().calls, 2u);
  });
}

TEST(Rpc, UnknownServiceIsUnimplemented) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    EchoReply reply;
    Status status = served.channel->call(context, "no.Such", "Echo", request("x"), reply);
    EXPECT_EQ(status.code(), StatusCode::unimplemented) << status.to_string();
    EXPECT_EQ(served.server.stats().unimplemented_calls, 1u);
  });
}

TEST(Rpc, ManyCallsShareOneConnectionAndASlowOneBlocksNone) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    ChannelOptions options = quick_options();
    options.connections_per_endpoint = 1;
    Served served({}, options);
    ASSERT_TRUE(served.ready());
    TestService& service = served.service;
    EchoServiceClient& client = *served.client;
    ClientContext slow_context;
    auto slow = client.SleepAsync(slow_context, request("slow", 60'000));
    ASSERT_TRUE(eventually([&] { return service.sleeping == 1; }));
    tern::WaitGroup group;
    int ok = 0;
    for (int i = 0; i < 200; ++i) {
      group.add();
      tern::spawn([&, i] {
        auto reply = client.Echo(request(std::to_string(i)));
        if (reply && reply->text() == std::to_string(i)) ++ok;
        group.done();
      }).detach();
    }
    ASSERT_TRUE(group.wait_for(30s));
    EXPECT_EQ(ok, 200);
    EXPECT_FALSE(slow.ready());
    slow.cancel();
    auto slow_reply = slow.get();
    ASSERT_FALSE(slow_reply);
    EXPECT_EQ(slow_reply.error().code(), StatusCode::cancelled);
    EXPECT_TRUE(eventually([&] { return service.saw_cancel == 1; }));
    EXPECT_EQ(served.channel->stats().connects, 1u);
  });
}

TEST(Rpc, DeadlineExpiresOnBothSides) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    TestService& service = served.service;
    EchoServiceClient& client = *served.client;
    ClientContext context;
    context.set_timeout(100ms);
    const auto began = tern::Clock::now();
    auto reply = client.Sleep(context, request("late", 60'000));
    const auto took = tern::Clock::now() - began;
    ASSERT_FALSE(reply);
    EXPECT_EQ(reply.error().code(), StatusCode::deadline_exceeded);
    EXPECT_GE(took, 100ms);
    EXPECT_LT(took, 5s);
    // The handler saw its deadline pass (or the cancel frame) and returned.
    EXPECT_TRUE(eventually([&] { return service.saw_cancel == 1 && service.sleeping == 0; }));
  });
}

TEST(Rpc, CancelFromAnotherFiber) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    TestService& service = served.service;
    EchoServiceClient& client = *served.client;
    ClientContext context;
    tern::Fiber canceller = tern::spawn([&] {
      ASSERT_TRUE(eventually([&] { return service.sleeping == 1; }));
      context.cancel();
    });
    auto reply = client.Sleep(context, request("x", 60'000));
    canceller.join();
    ASSERT_FALSE(reply);
    EXPECT_EQ(reply.error().code(), StatusCode::cancelled);
    EXPECT_TRUE(eventually([&] { return service.saw_cancel == 1; }));
  });
}

TEST(Rpc, ConcurrencyLimitAnswersResourceExhausted) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served({.max_concurrent_calls = 2});
    ASSERT_TRUE(served.ready());
    TestService& service = served.service;
    Server& server = served.server;
    EchoServiceClient& client = *served.client;
    ClientContext a, b;
    auto first = client.SleepAsync(a, request("1", 60'000));
    auto second = client.SleepAsync(b, request("2", 60'000));
    ASSERT_TRUE(eventually([&] { return service.sleeping == 2; }));
    auto third = client.Echo(request("3"));
    ASSERT_FALSE(third);
    EXPECT_EQ(third.error().code(), StatusCode::resource_exhausted);
    first.cancel();
    second.cancel();
    EXPECT_FALSE(first.get());
    EXPECT_FALSE(second.get());
    ASSERT_TRUE(eventually([&] { return server.stats().in_flight == 0; }));
    EXPECT_TRUE(client.Echo(request("4")));
    EXPECT_EQ(server.stats().rejected_calls, 1u);
  });
}

TEST(Rpc, ACallWhoseFiberCannotStartGetsResourceExhaustedAndTheConnectionStays) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // A handler stack no process can map: every call's fiber fails to start.
    Served served({.handler_stack_size = std::size_t{1} << 52});
    ASSERT_TRUE(served.ready());
    for (int i = 0; i < 3; ++i) {
      auto reply = served.client->Echo(request("x"));
      ASSERT_FALSE(reply);
      EXPECT_EQ(reply.error().code(), StatusCode::resource_exhausted) << reply.error().to_string();
      EXPECT_NE(reply.error().message().find("cannot start a fiber"), std::string::npos);
    }
    EXPECT_EQ(served.server.stats().rejected_calls, 3u);
    EXPECT_EQ(served.server.stats().in_flight, 0u);
    EXPECT_EQ(served.channel->stats().connection_losses, 0u)
        << "the connection survives the failures";
  });
}

TEST(Rpc, SharedStacksAreRefusedAtStart) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    TestService service;
    tern::rpc::ServerOptions options;
    options.tcp.stack_mode = tern::StackMode::shared;
    Server server(options);
    ASSERT_TRUE(server.add_service(service));
    tern::Result<tern::net::Address> started = server.start(Address::loopback(0));
    ASSERT_FALSE(started);
    EXPECT_EQ(started.error(), std::errc::invalid_argument);
    EXPECT_NE(started.error().message().find("StackMode::own"), std::string::npos)
        << started.error().message();
  });
}

TEST(Rpc, InterceptorChecksABearerToken) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    TestService service;
    Server server;
    std::vector<std::string> order;
    server.add_interceptor([&](ServerContext& context, const tern::rpc::Next& next) {
      order.push_back("log " + std::string(context.method()));
      return next(context);
    });
    server.add_interceptor([](ServerContext& context, const tern::rpc::Next& next) {
      if (context.metadata("authorization") != std::optional<std::string_view>("Bearer s3cret")) {
        return Status(StatusCode::unauthenticated, "a valid bearer token is required");
      }
      return next(context);
    });
    const Address address = start_on_loopback(server, service);
    auto channel = Channel::open(address.to_string(), quick_options());
    ASSERT_TRUE(channel);
    EchoServiceClient client(*channel);
    auto refused = client.Echo(request("x"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), StatusCode::unauthenticated);
    EXPECT_EQ(service.echoes, 0);
    ClientContext context;
    context.add_metadata("authorization", "Bearer s3cret");
    EXPECT_TRUE(client.Echo(context, request("y")));
    EXPECT_EQ(service.echoes, 1);
    EXPECT_EQ(order, (std::vector<std::string>{"log Echo", "log Echo"}));
    channel->close();
    server.stop(tern::deadline_after(5s));
  });
}

TEST(Rpc, CompressedCallsRoundTrip) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    EchoServiceClient& client = *served.client;
    ClientContext context;
    context.set_compression();
    const std::string big(1 << 20, 'z');
    auto reply = client.Echo(context, request(big));
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), big);
  });
}

TEST(Rpc, OneWayAndCallbackCalls) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    TestService& service = served.service;
    EchoServiceClient& client = *served.client;
    ClientContext context;
    ASSERT_TRUE(client.RecordOneWay(context, request("fire")).ok());
    ASSERT_TRUE(eventually([&] { return service.recorded.size() == 1; }));
    EXPECT_EQ(service.recorded[0], "fire");
    std::string got;
    client.EchoAsync(ClientContext(), request("cb"), [&](tern::rpc::Result<EchoReply> reply) {
      got = reply ? reply->text() : "!";
    });
    ASSERT_TRUE(eventually([&] { return !got.empty(); }));
    EXPECT_EQ(got, "cb");
  });
}

TEST(Rpc, RoundRobinAndConsistentHashSpreadCalls) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    TestService a("a"), b("b");
    Server server_a, server_b;
    const Address address_a = start_on_loopback(server_a, a);
    const Address address_b = start_on_loopback(server_b, b);
    const std::string targets = address_a.to_string() + "," + address_b.to_string();
    auto channel = Channel::open(targets, quick_options());
    ASSERT_TRUE(channel);
    ASSERT_TRUE(channel->wait_connected(tern::deadline_after(10s)).ok());
    ASSERT_TRUE(eventually([&] { return channel->stats().connected == 4; }));
    EchoServiceClient client(*channel);
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(client.Echo(request("rr")));
    EXPECT_EQ(a.echoes, 20);
    EXPECT_EQ(b.echoes, 20);
    channel->close();

    ChannelOptions hashed = quick_options();
    hashed.load_balancing = tern::rpc::LoadBalancing::consistent_hash;
    auto by_key = Channel::open(targets, hashed);
    ASSERT_TRUE(by_key);
    ASSERT_TRUE(eventually([&] { return by_key->stats().connected == 4; }));
    EchoServiceClient keyed(*by_key);
    for (int key = 0; key < 20; ++key) {
      std::string first;
      for (int i = 0; i < 5; ++i) {
        ClientContext context;
        context.set_call_key("user-" + std::to_string(key));
        auto reply = keyed.Echo(context, request("k"));
        ASSERT_TRUE(reply);
        if (i == 0) first = reply->server();
        EXPECT_EQ(reply->server(), first) << "key " << key;
      }
    }
    by_key->close();

    // One endpoint: the channel builds no ring, and keyed calls still reach it.
    auto single = Channel::open(address_b.to_string(), hashed);
    ASSERT_TRUE(single);
    ASSERT_TRUE(single->wait_connected(tern::deadline_after(10s)).ok());
    EchoServiceClient only(*single);
    for (int key = 0; key < 5; ++key) {
      ClientContext context;
      context.set_call_key("user-" + std::to_string(key));
      auto reply = only.Echo(context, request("k"));
      ASSERT_TRUE(reply);
      EXPECT_EQ(reply->server(), "b");
    }
    single->close();
    server_a.stop(tern::deadline_after(5s));
    server_b.stop(tern::deadline_after(5s));
  });
}

TEST(Rpc, IdempotentCallRetriesOnAnotherEndpoint) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    TestService a("a"), b("b");
    Server server_a, server_b;
    const Address address_a = start_on_loopback(server_a, a);
    const Address address_b = start_on_loopback(server_b, b);
    ChannelOptions options = quick_options();
    options.connections_per_endpoint = 1;
    auto channel = Channel::open(address_a.to_string() + "," + address_b.to_string(), options);
    ASSERT_TRUE(channel);
    ASSERT_TRUE(eventually([&] { return channel->stats().connected == 2; }));
    EchoServiceClient client(*channel);
    // Whichever server gets the call is cut off while it runs; the retry lands on the other.
    ClientContext context;
    context.set_idempotent();
    auto call = client.SleepAsync(context, request("again", 300));
    ASSERT_TRUE(eventually([&] { return a.sleeping + b.sleeping == 1; }));
    Server& victim = a.sleeping == 1 ? server_a : server_b;
    const std::string survivor = a.sleeping == 1 ? "b" : "a";
    EXPECT_EQ(victim.stop(tern::Clock::now()), 1u);
    auto reply = call.get();
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->server(), survivor);
    EXPECT_EQ(call.context().attempts(), 2u);
    EXPECT_GE(channel->stats().retries, 1u);
    channel->close();
    server_a.stop(tern::deadline_after(5s));
    server_b.stop(tern::deadline_after(5s));
  });
}

TEST(Rpc, ServerRestartFailsCallsInFlightThenReconnects) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    TestService service;
    auto server = std::make_unique<Server>();
    const Address address = start_on_loopback(*server, service);
    auto channel = Channel::open(address.to_string(), quick_options());
    ASSERT_TRUE(channel);
    EchoServiceClient client(*channel);
    ASSERT_TRUE(client.Echo(request("before")));
    ClientContext context;
    auto in_flight = client.SleepAsync(context, request("cut", 60'000));
    ASSERT_TRUE(eventually([&] { return service.sleeping == 1; }));
    EXPECT_EQ(server->stop(tern::Clock::now()), 1u);
    auto failed = in_flight.get();
    ASSERT_FALSE(failed);
    EXPECT_EQ(failed.error().code(), StatusCode::unavailable) << failed.error().to_string();
    server = std::make_unique<Server>();
    start_on_loopback(*server, service, address.port());
    EXPECT_TRUE(eventually([&] { return static_cast<bool>(client.Echo(request("after"))); }));
    EXPECT_GE(channel->stats().connection_losses, 1u);
    channel->close();
    server->stop(tern::deadline_after(5s));
  });
}

// ClientContext::set_wait_for_ready: with no server up, a call without it fails at once with
// unavailable; with it, a call waits for a connection until its deadline (deadline_exceeded), until
// it is cancelled (cancelled), or until the server comes up (the call succeeds).
TEST(Rpc, WaitForReadyCallWaitsForTheServerWithinItsDeadline) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // A port free a moment ago: a server bound it and stopped.
    std::uint16_t port = 0;
    {
      TestService unused;
      Server probe;
      port = start_on_loopback(probe, unused).port();
      probe.stop(tern::deadline_after(5s));
    }
    auto channel = Channel::open(Address::loopback(port).to_string(), quick_options());
    ASSERT_TRUE(channel);
    EchoServiceClient client(*channel);

    ClientContext plain;
    plain.set_timeout(30s);
    const auto began = tern::Clock::now();
    auto refused = client.Echo(plain, request("now"));
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().code(), StatusCode::unavailable) << refused.error().to_string();
    EXPECT_LT(tern::Clock::now() - began, 5s);

    ClientContext short_wait;
    short_wait.set_wait_for_ready();
    short_wait.set_timeout(100ms);
    const auto waited_from = tern::Clock::now();
    auto late = client.Echo(short_wait, request("late"));
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code(), StatusCode::deadline_exceeded) << late.error().to_string();
    EXPECT_GE(tern::Clock::now() - waited_from, 100ms);

    ClientContext cancelled;
    cancelled.set_wait_for_ready();
    cancelled.set_timeout(30s);
    auto waiting = client.EchoAsync(cancelled, request("never"));
    ASSERT_TRUE(eventually([&] { return channel->stats().calls == 3; }));
    EXPECT_FALSE(waiting.ready());
    waiting.cancel();
    auto gave_up = waiting.get();
    ASSERT_FALSE(gave_up);
    EXPECT_EQ(gave_up.error().code(), StatusCode::cancelled) << gave_up.error().to_string();

    // The server starts only once the fourth call has been issued and is waiting.
    TestService service;
    Server server;
    tern::Fiber starter = tern::spawn([&] {
      ASSERT_TRUE(eventually([&] { return channel->stats().calls == 4; }));
      EXPECT_EQ(service.echoes, 0);
      start_on_loopback(server, service, port);
    });
    ClientContext ready;
    ready.set_wait_for_ready();
    ready.set_timeout(30s);
    auto reply = client.Echo(ready, request("waited"));
    starter.join();
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "waited");
    EXPECT_EQ(service.echoes, 1);
    EXPECT_EQ(ready.attempts(), 1u);
    EXPECT_EQ(channel->stats().failed_calls, 3u);
    channel->close();
    server.stop(tern::deadline_after(5s));
  });
}

TEST(Rpc, GracefulStopFinishesCallsInFlight) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    Server& server = served.server;
    EchoServiceClient& client = *served.client;
    ClientContext context;
    auto in_flight = client.SleepAsync(context, request("finish me", 200));
    ASSERT_TRUE(eventually([&] { return server.stats().in_flight == 1; }));
    EXPECT_EQ(server.stop(tern::deadline_after(30s)), 0u);
    auto reply = in_flight.get();
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "finish me");
    // The server is gone: new calls fail, they do not hang.
    ClientContext later;
    later.set_timeout(5s);
    EXPECT_FALSE(client.Echo(later, request("x")));
  });
}

// Opening a channel off a runtime ends the program naming the call and what to do instead.
TEST(RpcDeathTest, OpeningAChannelOutsideARuntimeSaysWhereToCallIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)Channel::open("127.0.0.1:1"),
               "tern: tern::rpc::Channel::open called outside a tern::Runtime: call it from a "
               "fiber \\(inside Runtime::run\\)");
}

TEST(Rpc, BadTargetsAreRefused) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    auto bad = Channel::open("not a target");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().code(), StatusCode::invalid_argument);
    auto empty = Channel::open(" , ");
    ASSERT_FALSE(empty);
    auto unresolved = Channel::open("dns://name.invalid:80");
    ASSERT_FALSE(unresolved);
    EXPECT_EQ(unresolved.error().code(), StatusCode::unavailable);
    auto dns = Channel::open("dns://localhost:1");
    ASSERT_TRUE(dns) << dns.error().to_string();
    EXPECT_GE(dns->endpoints().size(), 1u);
    // Nothing listens on port 1: calls fail with unavailable, quickly.
    EchoServiceClient client(*dns);
    auto reply = client.Echo(request("x"));
    ASSERT_FALSE(reply);
    EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
  });
}

// A target that is not an address is the caller's mistake (invalid_argument, with
// Address::parse's explanation); a name that does not resolve reads as a resolver failure.
TEST(Rpc, BadTargetsSayWhatIsWrongWithThem) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    auto bad_port = Channel::open("127.0.0.1:99999");
    ASSERT_FALSE(bad_port);
    EXPECT_EQ(bad_port.error().code(), StatusCode::invalid_argument);
    EXPECT_EQ(bad_port.error().message(),
              "bad target '127.0.0.1:99999': port '99999' is not a number from 0 to 65535");
    auto no_port = Channel::open("127.0.0.1");
    ASSERT_FALSE(no_port);
    EXPECT_EQ(no_port.error().code(), StatusCode::invalid_argument);
    EXPECT_EQ(no_port.error().message(),
              "bad target '127.0.0.1': missing port (expected host:port or [ipv6]:port)");
    // The resolver rejects an empty label without asking a DNS server.
    auto unresolved = Channel::open("dns://no..such..host:80");
    ASSERT_FALSE(unresolved);
    EXPECT_EQ(unresolved.error().code(), StatusCode::unavailable);
    EXPECT_TRUE(unresolved.error().message().starts_with("resolve no..such..host: "))
        << unresolved.error().message();
  });
}

}  // namespace
