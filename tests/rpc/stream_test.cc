// tern::rpc streams end to end over loopback, under the backend named by TERN_IO: each kind of
// streaming method with every message checked, half-close, cancellation from either side,
// deadlines, flow control against peers that do not read, 100 streams and unary calls on one
// connection with one stream stalled, peers that go away mid-stream, a version-1 peer, methods
// of the wrong kind, and server push.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fake_server.h"
#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "rpc_fixture.h"
#include "stream_test.tern.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "tern/rpc/stream.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::Server;
using tern::rpc::ServerContext;
using tern::rpc::ServerOptions;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern::stream_test::Item;
using tern::stream_test::StreamServiceBase;
using tern::stream_test::StreamServiceClient;
using tern::stream_test::Summary;

using tern_test::eventually;
using tern_test::quick_options;

constexpr auto kPatience = tern_test::kRpcPatience;
constexpr std::uint32_t kSmallWindow = 64u << 10;

Item item(std::uint32_t seq, std::string text = {}, std::uint32_t count = 0) {
  Item result;
  result.set_seq(seq);
  result.set_text(std::move(text));
  result.set_count(count);
  return result;
}

class StreamService final : public StreamServiceBase {
 public:
  Status Range(ServerContext&, const Item& request,
               tern::rpc::ServerWriter<Item>& writer) override {
    for (std::uint32_t i = 0; i < request.count(); ++i) {
      if (Status status = writer.write(item(request.seq() + i, request.text())); !status.ok()) {
        return status;
      }
    }
    return {};
  }
  Status Sum(ServerContext&, tern::rpc::ServerReader<Item>& reader, Summary& reply) override {
    Item next;
    for (;;) {
      tern::rpc::Result<bool> got = reader.read(next);
      if (!got) return got.error();
      if (!*got) break;
      reply.set_count(reply.count() + 1);
      reply.set_sum(reply.sum() + next.seq());
    }
    return {};
  }
  Status Chat(ServerContext&, tern::rpc::ServerReaderWriter<Item, Item>& stream) override {
    Item next;
    for (;;) {
      tern::rpc::Result<bool> got = stream.read(next);
      if (!got) return record(got.error());
      if (!*got) return record(Status());
      if (Status status = stream.write(next); !status.ok()) return record(status);
    }
  }
  Status Flood(ServerContext&, const Item& request,
               tern::rpc::ServerWriter<Item>& writer) override {
    for (std::uint32_t seq = 0;; ++seq) {
      if (Status status = writer.write(item(seq, request.text())); !status.ok()) {
        return record(status);
      }
      flood_written.store(seq + 1);
    }
  }
  Status Stall(ServerContext& context, tern::rpc::ServerReaderWriter<Item, Item>& stream) override {
    Item first;
    if (tern::rpc::Result<bool> got = stream.read(first); !got || !*got) {
      return record(got ? Status(StatusCode::invalid_argument, "no first item") : got.error());
    }
    ++stalled;
    // Reads nothing more: the client's writes fill the window. The stream failing (reset,
    // deadline, connection closed) cancels the call.
    while (!context.cancelled()) (void)tern::this_fiber::sleep_for(1ms);
    --stalled;
    tern::rpc::Result<bool> got = stream.read(first);
    return record(got ? Status(StatusCode::internal, "the stalled stream still reads")
                      : got.error());
  }
  Status Refuse(ServerContext&, tern::rpc::ServerReaderWriter<Item, Item>& stream) override {
    Item first;
    (void)stream.read(first);
    return Status(StatusCode::aborted, "refused by the test service");
  }
  Status Push(ServerContext& context, const Item& request, Summary& reply) override {
    for (std::uint32_t i = 0; i < request.count(); ++i) {
      if (Status status = context.push(kServiceName, "Pushed", item(i, request.text()));
          !status.ok()) {
        return status;
      }
      reply.set_count(i + 1);
    }
    return {};
  }
  Status Echo(ServerContext&, const Item& request, Item& reply) override {
    reply = request;
    return {};
  }

  // How the handlers that record their outcome ended, in order.
  std::vector<Status> outcomes() {
    std::lock_guard lock(mutex_);
    return outcomes_;
  }
  std::size_t outcome_count() {
    std::lock_guard lock(mutex_);
    return outcomes_.size();
  }

  std::atomic<std::uint32_t> flood_written{0};
  std::atomic<int> stalled{0};

 private:
  Status record(Status status) {
    std::lock_guard lock(mutex_);
    outcomes_.push_back(status);
    return status;
  }

  std::mutex mutex_;
  std::vector<Status> outcomes_;
};

// A StreamService on a Server at 127.0.0.1:0 and a connected Channel to it, closed and stopped
// when it goes out of scope. Lives on one worker fiber; check ready() before use.
struct Served {
  explicit Served(ServerOptions server_options = {},
                  ChannelOptions channel_options = quick_options())
      : server(std::move(server_options)) {
    address = tern_test::start_on_loopback(server, service);
    if (!server.running()) return;
    auto opened = Channel::open(address.to_string(), std::move(channel_options));
    if (!opened) {
      ADD_FAILURE() << opened.error().to_string();
      return;
    }
    channel.emplace(std::move(*opened));
    if (Status connected = channel->wait_connected(tern::deadline_after(kPatience));
        !connected.ok()) {
      ADD_FAILURE() << connected.to_string();
      return;
    }
    client.emplace(*channel);
  }
  ~Served() {
    if (channel) channel->close();
    server.stop(tern::deadline_after(5s));
  }
  bool ready() const { return client.has_value(); }

  StreamService service;
  Server server;
  Address address;
  std::optional<Channel> channel;
  std::optional<StreamServiceClient> client;
};

void run(auto body) {
  tern::Runtime runtime({.workers = 2});
  runtime.run(body);
}

TEST(RpcStream, ServerStreamingDeliversEveryReplyInOrder) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto reader = served.client->Range(context, item(5, "range", 1000));
    Item reply;
    for (std::uint32_t i = 0; i < 1000; ++i) {
      tern::rpc::Result<bool> got = reader.read(reply);
      ASSERT_TRUE(got) << got.error().to_string();
      ASSERT_TRUE(*got) << "the stream ended after " << i << " replies";
      ASSERT_EQ(reply.seq(), 5 + i);
      ASSERT_EQ(reply.text(), "range");
    }
    tern::rpc::Result<bool> end = reader.read(reply);
    ASSERT_TRUE(end) << end.error().to_string();
    EXPECT_FALSE(*end);
    EXPECT_TRUE(reader.finish().ok());
    EXPECT_EQ(served.server.stats().streams, 1u);
  });
}

TEST(RpcStream, ClientStreamingSumsEveryRequest) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto writer = served.client->Sum(context);
    std::uint64_t sum = 0;
    for (std::uint32_t i = 0; i < 500; ++i) {
      ASSERT_TRUE(writer.write(item(i * 3, "sum")).ok());
      sum += i * 3;
    }
    Summary summary;
    Status status = writer.finish(summary);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(summary.count(), 500u);
    EXPECT_EQ(summary.sum(), sum);
  });
}

TEST(RpcStream, BidirectionalEchoesEachMessage) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = served.client->Chat(context);
    Item reply;
    for (std::uint32_t i = 0; i < 200; ++i) {
      ASSERT_TRUE(stream.write(item(i, "chat " + std::to_string(i))).ok());
      tern::rpc::Result<bool> got = stream.read(reply);
      ASSERT_TRUE(got && *got) << (got ? "the stream ended" : got.error().to_string());
      ASSERT_EQ(reply.seq(), i);
      ASSERT_EQ(reply.text(), "chat " + std::to_string(i));
    }
    ASSERT_TRUE(stream.close_send().ok());
    tern::rpc::Result<bool> end = stream.read(reply);
    ASSERT_TRUE(end) << end.error().to_string();
    EXPECT_FALSE(*end);
    EXPECT_TRUE(stream.finish().ok());
  });
}

TEST(RpcStream, HalfCloseLetsTheServerFinishItsSide) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = served.client->Chat(context);
    for (std::uint32_t i = 0; i < 50; ++i) ASSERT_TRUE(stream.write(item(i)).ok());
    ASSERT_TRUE(stream.close_send().ok());
    Status late = stream.write(item(99));
    EXPECT_EQ(late.code(), StatusCode::failed_precondition) << late.to_string();
    Item reply;
    for (std::uint32_t i = 0; i < 50; ++i) {
      tern::rpc::Result<bool> got = stream.read(reply);
      ASSERT_TRUE(got && *got) << "reply " << i;
      ASSERT_EQ(reply.seq(), i);
    }
    tern::rpc::Result<bool> end = stream.read(reply);
    ASSERT_TRUE(end);
    EXPECT_FALSE(*end);
    EXPECT_TRUE(stream.finish().ok());
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
    EXPECT_TRUE(served.service.outcomes()[0].ok());
  });
}

TEST(RpcStream, ClientCancelEndsTheStreamOnBothSides) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = served.client->Stall(context);
    ASSERT_TRUE(stream.write(item(1)).ok());
    ASSERT_TRUE(eventually([&] { return served.service.stalled.load() == 1; }));
    stream.cancel();
    Item reply;
    tern::rpc::Result<bool> got = stream.read(reply);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::cancelled) << got.error().to_string();
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
    const Status server_side = served.service.outcomes()[0];
    EXPECT_EQ(server_side.code(), StatusCode::cancelled) << server_side.to_string();
    EXPECT_NE(server_side.message().find("the client reset the stream"), std::string::npos)
        << server_side.message();
  });
}

TEST(RpcStream, ServerStatusEndsTheClientsStream) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = served.client->Refuse(context);
    ASSERT_TRUE(stream.write(item(1)).ok());
    Item reply;
    tern::rpc::Result<bool> got = stream.read(reply);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::aborted);
    EXPECT_EQ(got.error().message(), "refused by the test service");
    Status finished = stream.finish();
    EXPECT_EQ(finished.code(), StatusCode::aborted);
    Status late = stream.write(item(2));
    EXPECT_EQ(late.code(), StatusCode::aborted) << late.to_string();
  });
}

TEST(RpcStream, DeadlineEndsTheStreamOnBothSides) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(200ms);
    auto stream = served.client->Stall(context);
    ASSERT_TRUE(stream.write(item(1)).ok());
    Item reply;
    const tern::Deadline limit = tern::deadline_after(kPatience);
    tern::rpc::Result<bool> got = stream.read(reply);
    EXPECT_LT(tern::Clock::now(), limit);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::deadline_exceeded) << got.error().to_string();
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
    const StatusCode server_side = served.service.outcomes()[0].code();
    // The client's reset or the server's own deadline, whichever it saw first.
    EXPECT_TRUE(server_side == StatusCode::cancelled ||
                server_side == StatusCode::deadline_exceeded)
        << served.service.outcomes()[0].to_string();
  });
}

TEST(RpcStream, ReaderThatDoesNotReadParksTheServersWriter) {
  run([] {
    ChannelOptions options = quick_options();
    options.stream_window = kSmallWindow;
    Served served({}, options);
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    const std::string text(1000, 'f');
    auto reader = served.client->Flood(context, item(0, text));
    // Nothing is read: the server sends a window's worth (the last message may overdraw it),
    // then its writer parks: what it wrote and what waits here stay within the window.
    const std::size_t message = item(0, text).ByteSizeLong() + 8;  // seq of any size
    ASSERT_TRUE(eventually([&] { return reader.stream().buffered_bytes() >= kSmallWindow; }));
    const std::size_t written = served.service.flood_written.load();
    EXPECT_LE((written - 1) * item(0, text).ByteSizeLong(), kSmallWindow);
    EXPECT_LE(reader.stream().buffered_bytes(), kSmallWindow + message);
    // Reading lets it go on: every message arrives, in order.
    Item reply;
    for (std::uint32_t i = 0; i < 2000; ++i) {
      tern::rpc::Result<bool> got = reader.read(reply);
      ASSERT_TRUE(got && *got) << "message " << i;
      ASSERT_EQ(reply.seq(), i);
    }
    EXPECT_GE(served.service.flood_written.load(), 2000u);
    EXPECT_LE(reader.stream().peak_buffered_bytes(), kSmallWindow + message);
    reader.cancel();
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
    EXPECT_EQ(served.service.outcomes()[0].code(), StatusCode::cancelled);
  });
}

TEST(RpcStream, ServerThatDoesNotReadParksTheClientsWriter) {
  run([] {
    ServerOptions server_options;
    server_options.stream_window = kSmallWindow;
    Served served(server_options);
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = served.client->Stall(context);
    const Item big = item(7, std::string(1000, 's'));
    std::size_t written = 0;
    Status stopped;
    tern::Fiber writer = tern::spawn([&] {
      for (;;) {
        stopped = stream.write(big);
        if (!stopped.ok()) return;
        ++written;
      }
    });
    ASSERT_TRUE(eventually([&] { return stream.stream().write_waits() > 0; }));
    EXPECT_LE((written - 1) * big.ByteSizeLong(), kSmallWindow);
    EXPECT_GE(written * big.ByteSizeLong(), kSmallWindow / 2);
    stream.cancel();
    writer.join();
    EXPECT_EQ(stopped.code(), StatusCode::cancelled) << stopped.to_string();
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
  });
}

TEST(RpcStream, HundredStreamsAndUnaryCallsShareAConnectionWithOneStalled) {
  run([] {
    ChannelOptions options = quick_options();
    options.connections_per_endpoint = 1;
    ServerOptions server_options;
    server_options.stream_window = kSmallWindow;
    Served served(server_options, options);
    ASSERT_TRUE(served.ready());
    StreamServiceClient& client = *served.client;
    // One stream whose server reads nothing: its writer parks on a full window.
    ClientContext stall_context;
    stall_context.set_timeout(kPatience * 2);
    auto stalled = client.Stall(stall_context);
    const Item big = item(1, std::string(1000, 'x'));
    tern::Fiber stuck = tern::spawn([&] {
      while (stalled.write(big).ok()) {
      }
    });
    ASSERT_TRUE(eventually([&] { return stalled.stream().write_waits() > 0; }));

    constexpr int kStreams = 99;
    constexpr int kRounds = 20;
    constexpr int kCalls = 100;
    std::atomic<int> streams_ok{0};
    std::atomic<int> calls_ok{0};
    tern::WaitGroup done;
    for (int s = 0; s < kStreams; ++s) {
      done.add();
      tern::spawn([&, s] {
        ClientContext context;
        context.set_timeout(kPatience);
        auto stream = client.Chat(context);
        Item reply;
        bool good = true;
        for (int r = 0; r < kRounds && good; ++r) {
          const std::uint32_t seq = static_cast<std::uint32_t>(s * 1000 + r);
          good = stream.write(item(seq)).ok();
          tern::rpc::Result<bool> got = good ? stream.read(reply) : false;
          good = good && got && *got && reply.seq() == seq;
        }
        good = good && stream.finish().ok();
        if (good) ++streams_ok;
        done.done();
      }).detach();
    }
    for (int c = 0; c < kCalls; ++c) {
      done.add();
      tern::spawn([&, c] {
        ClientContext context;
        context.set_timeout(kPatience);
        auto reply = client.Echo(context, item(static_cast<std::uint32_t>(c)));
        if (reply && reply->seq() == static_cast<std::uint32_t>(c)) ++calls_ok;
        done.done();
      }).detach();
    }
    ASSERT_TRUE(done.wait_until(tern::deadline_after(kPatience * 2)));
    EXPECT_EQ(streams_ok.load(), kStreams);
    EXPECT_EQ(calls_ok.load(), kCalls);
    // All of it went over the one connection, with the stalled stream still parked.
    EXPECT_EQ(served.channel->stats().connects, 1u);
    EXPECT_EQ(served.service.stalled.load(), 1);
    stalled.cancel();
    stuck.join();
  });
}

TEST(RpcStream, ClientGoingAwayEndsTheServersStream) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    auto stream = served.client->Chat(context);
    ASSERT_TRUE(stream.write(item(1)).ok());
    Item reply;
    ASSERT_TRUE(stream.read(reply).value_or(false));
    served.channel->close();
    tern::rpc::Result<bool> got = stream.read(reply);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::cancelled) << got.error().to_string();
    ASSERT_TRUE(eventually([&] { return served.service.outcome_count() == 1; }));
    const Status server_side = served.service.outcomes()[0];
    EXPECT_EQ(server_side.code(), StatusCode::unavailable) << server_side.to_string();
  });
}

TEST(RpcStream, ServerGoingAwayEndsTheClientsStream) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    ClientContext context;
    auto stream = served.client->Chat(context);
    ASSERT_TRUE(stream.write(item(1)).ok());
    Item reply;
    ASSERT_TRUE(stream.read(reply).value_or(false));
    // The handler waits in read: the server closes the connection at the end of the grace.
    served.server.stop(tern::deadline_after(50ms));
    const tern::Deadline limit = tern::deadline_after(kPatience);
    tern::rpc::Result<bool> got = stream.read(reply);
    EXPECT_LT(tern::Clock::now(), limit);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::unavailable) << got.error().to_string();
    ASSERT_EQ(served.service.outcome_count(), 1u);
    EXPECT_EQ(served.service.outcomes()[0].code(), StatusCode::unavailable)
        << served.service.outcomes()[0].to_string();
  });
}

TEST(RpcStream, VersionOnePeerEndsTheStreamWithItsReason) {
  run([] {
    namespace detail = tern::rpc::detail;
    // Answers as a version-1 tern server does: a goaway naming the protocol error, then close.
    tern_test::FakeServer old_server([](tern::net::TcpStream& stream, int) {
      std::byte header[detail::kHeaderSize];
      if (!stream.read_exact(header, tern::deadline_after(kPatience))) return;
      tern::rpc::wire::Metadata goaway;
      goaway.set_status(static_cast<std::uint32_t>(StatusCode::internal));
      goaway.set_status_message("protocol error: unsupported protocol version (version " +
                                std::to_string(static_cast<int>(header[4])) +
                                ", this side speaks 1)");
      tern::net::Buffer out;
      detail::append_frame(out, detail::FrameType::goaway, 0, &goaway, {}, false);
      (void)stream.write_all(out.readable(), tern::deadline_after(kPatience));
      stream.close();
    });
    const Address address = old_server.start();
    auto channel = Channel::open(address.to_string(), quick_options());
    ASSERT_TRUE(channel);
    ASSERT_TRUE(channel->wait_connected(tern::deadline_after(kPatience)).ok());
    StreamServiceClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    auto stream = client.Chat(context);
    Item reply;
    tern::rpc::Result<bool> got = stream.read(reply);
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error().code(), StatusCode::unavailable);
    EXPECT_NE(got.error().message().find("unsupported protocol version (version 2"),
              std::string::npos)
        << got.error().message();
    channel->close();
    old_server.stop();
  });
}

TEST(RpcStream, MethodsOfTheWrongKindOrUnknownGetAClearStatus) {
  run([] {
    Served served;
    ASSERT_TRUE(served.ready());
    Channel& channel = *served.channel;
    Item reply;
    {
      ClientContext context;
      tern::rpc::StreamCall stream =
          channel.open_stream(context, StreamServiceBase::kServiceName, "Nope");
      tern::rpc::Result<bool> got = stream.read(reply);
      ASSERT_FALSE(got);
      EXPECT_EQ(got.error().code(), StatusCode::unimplemented);
      EXPECT_EQ(got.error().message(),
                "no method tern.stream_test.StreamService/Nope on this server");
    }
    {
      ClientContext context;
      tern::rpc::StreamCall stream =
          channel.open_stream(context, StreamServiceBase::kServiceName, "Echo");
      tern::rpc::Result<bool> got = stream.read(reply);
      ASSERT_FALSE(got);
      EXPECT_EQ(got.error().code(), StatusCode::unimplemented);
      EXPECT_NE(got.error().message().find("Echo is a unary method"), std::string::npos)
          << got.error().message();
    }
    {
      ClientContext context;
      Status status =
          channel.call(context, StreamServiceBase::kServiceName, "Chat", item(1), reply);
      EXPECT_EQ(status.code(), StatusCode::unimplemented);
      EXPECT_NE(status.message().find("Chat is a streaming method"), std::string::npos)
          << status.message();
    }
    // The connection is still there for the right calls.
    ClientContext context;
    auto echoed = served.client->Echo(context, item(4));
    ASSERT_TRUE(echoed);
    EXPECT_EQ(echoed->seq(), 4u);
  });
}

TEST(RpcStream, PushesReachTheClientsHandlerAndAreCounted) {
  run([] {
    std::vector<std::uint32_t> pushed;
    bool wrong = false;
    ChannelOptions options = quick_options();
    options.on_push = [&](std::string_view service, std::string_view method,
                          std::span<const std::byte> body) {
      Item got;
      wrong = wrong || service != StreamServiceBase::kServiceName || method != "Pushed" ||
              !got.ParseFromArray(body.data(), static_cast<int>(body.size())) ||
              got.text() != "news";
      pushed.push_back(got.seq());
    };
    Served served({}, options);
    ASSERT_TRUE(served.ready());
    ClientContext context;
    context.set_timeout(kPatience);
    auto reply = served.client->Push(context, item(0, "news", 50));
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->count(), 50u);
    // The pushes went out before the reply, on the same connection: all are in.
    ASSERT_EQ(pushed.size(), 50u);
    EXPECT_FALSE(wrong);
    for (std::uint32_t i = 0; i < 50; ++i) EXPECT_EQ(pushed[i], i);
    EXPECT_EQ(served.channel->stats().pushes, 50u);
    EXPECT_EQ(served.server.stats().pushes, 50u);
  });
}

}  // namespace
