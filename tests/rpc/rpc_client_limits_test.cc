// A Channel's own bounds against a server that misbehaves, under the backend named by TERN_IO:
// pushes nobody handles are dropped unread, pushes over max_push_size are dropped before they are
// decompressed, and a frame that starts but never completes closes its connection at the frame
// read timeout (its calls fail over like on any broken connection) while a slow but whole answer
// does not. The servers are raw loopback listeners that write frames by hand.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client_limits_test.tern.h"
#include "fake_server.h"
#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/channel.h"
#include "wait_for_condition.h"

namespace {

using namespace std::chrono_literals;
using tern::Deadline;
using tern::net::Address;
using tern::net::TcpListener;
using tern::net::TcpStream;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::StatusCode;
using tern::rpc::detail::FrameType;
namespace limits = tern::client_limits_test;
namespace wire = tern::rpc::wire;
namespace detail = tern::rpc::detail;

// How long anything a test waits for may take before the test fails.
constexpr std::chrono::milliseconds kPatience = 10s;

bool eventually(const std::function<bool()>& pred) {
  return tern_test::wait_until_condition(pred, tern::deadline_after(kPatience));
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

std::string encode_frame(FrameType type, std::uint64_t call_id, const wire::Metadata* metadata,
                         std::string_view body, bool compress = false) {
  tern::net::Buffer out;
  detail::append_frame(out, type, call_id, metadata, bytes_of(body), compress);
  const std::span<const std::byte> bytes = out.readable();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A push frame for "tern.client_limits_test.Limits"/`method` whose body is `body` (compressed or
// not).
std::string push_frame(std::string_view method, std::string_view body, bool compress) {
  wire::Metadata metadata;
  metadata.set_service(std::string(limits::LimitsBase::kServiceName));
  metadata.set_method(std::string(method));
  return encode_frame(FrameType::push, 0, &metadata, body, compress);
}

// A push frame whose header is valid, flagged compressed, but whose metadata and body are not
// protobuf or zstd: whoever parses or decompresses it fails.
std::string unreadable_push_frame() {
  constexpr std::string_view kMetadata("\x0a\x10z", 3);  // a field longer than its block
  constexpr std::string_view kBody = "not a zstd frame at all";
  detail::FrameHeader header;
  header.type = FrameType::push;
  header.flags = detail::kFlagCompressed;
  header.metadata_size = static_cast<std::uint32_t>(kMetadata.size());
  header.body_size = static_cast<std::uint32_t>(kBody.size());
  std::string frame(detail::kHeaderSize, '\0');
  detail::encode_header(header, reinterpret_cast<std::byte*>(frame.data()));
  frame += kMetadata;
  frame += kBody;
  return frame;
}

std::string reply_frame(std::uint64_t call_id, std::string_view payload) {
  limits::Text reply;
  reply.set_text(std::string(payload));
  std::string body;
  EXPECT_TRUE(reply.SerializeToString(&body));
  return encode_frame(FrameType::response, call_id, nullptr, body);
}

// Reads frames off a raw connection with the codec's parser; the headers only.
class HeaderReader {
 public:
  explicit HeaderReader(TcpStream& stream) : stream_(stream) {}

  // The next frame's header; an error at the end of the stream or on garbage.
  tern::Result<detail::FrameHeader> next(Deadline deadline) {
    for (;;) {
      tern::Result<std::optional<detail::RawFrame>> found =
          detail::next_frame(in_.readable(), detail::Limits{});
      if (!found) return tern::fail(std::errc::bad_message);
      if (found->has_value()) {
        const detail::FrameHeader header = (*found)->header;
        in_.consume((*found)->size());
        return header;
      }
      tern::Result<std::size_t> got = in_.read_from(stream_, deadline);
      if (!got) return tern::fail(got.error());
      if (*got == 0) return tern::fail(tern::Errc::eof);
    }
  }

  // The next request's call id, skipping pings and cancels; nullopt when the stream ends.
  std::optional<std::uint64_t> next_request(Deadline deadline) {
    for (;;) {
      tern::Result<detail::FrameHeader> header = next(deadline);
      if (!header) return std::nullopt;
      if (header->type == FrameType::request) return header->call_id;
    }
  }

 private:
  TcpStream& stream_;
  tern::net::Buffer in_;
};

bool send(TcpStream& stream, std::string_view bytes) {
  return stream.write_all(bytes_of(bytes), tern::deadline_after(kPatience)).has_value();
}

using tern_test::FakeServer;

// Answers every request with a reply echoing "ok", until the client closes.
void answer_everything(TcpStream& stream) {
  HeaderReader reader(stream);
  while (std::optional<std::uint64_t> id = reader.next_request(tern::deadline_after(kPatience))) {
    if (!send(stream, reply_frame(*id, "ok"))) return;
  }
}

ChannelOptions test_options() {
  ChannelOptions options;
  options.connections_per_endpoint = 1;
  options.ping_interval = 0ms;
  options.reconnect.initial_backoff = 20ms;
  options.reconnect.max_backoff = 200ms;
  options.reconnect.attempt_timeout = 2s;
  return options;
}

limits::Text echo_request(std::string text) {
  limits::Text request;
  request.set_text(std::move(text));
  return request;
}

TEST(ChannelLimits, PushesWithoutAHandlerAreDroppedUnread) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    constexpr int kPushes = 50;
    FakeServer fake([](TcpStream& stream, int) {
      HeaderReader reader(stream);
      while (std::optional<std::uint64_t> id =
                 reader.next_request(tern::deadline_after(kPatience))) {
        // Pushes a handler could not even read, then a bomb, then the reply.
        std::string burst;
        for (int i = 0; i < kPushes; ++i) burst += unreadable_push_frame();
        burst += push_frame("Bomb", std::string(16u << 20, '\0'), true);
        burst += reply_frame(*id, "after the pushes");
        if (!send(stream, burst)) return;
      }
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), test_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    limits::LimitsClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    context.set_wait_for_ready();

    tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));

    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "after the pushes");
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.dropped_pushes, static_cast<std::uint64_t>(kPushes + 1));
    EXPECT_EQ(stats.protocol_errors, 0u) << "an unhandled push was parsed or decompressed";
    EXPECT_EQ(stats.connection_losses, 0u);
    EXPECT_EQ(fake.accepted(), 1);
    channel->close();
  });
}

TEST(ChannelLimits, PushesOverMaxPushSizeAreDroppedAndTheConnectionStays) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    FakeServer fake([](TcpStream& stream, int) {
      HeaderReader reader(stream);
      while (std::optional<std::uint64_t> id =
                 reader.next_request(tern::deadline_after(kPatience))) {
        std::string burst;
        burst += push_frame("Bomb", std::string(16u << 20, '\0'), true);  // ~500 bytes on the wire
        burst += push_frame("Large", std::string(8u << 10, 'x'), false);
        burst += push_frame("Small", "compressed and small", true);
        burst += push_frame("Plain", "plain and small", false);
        burst += push_frame("Bomb", std::string(16u << 20, '\0'), true);
        burst += reply_frame(*id, "after the pushes");
        if (!send(stream, burst)) return;
      }
    });
    const Address address = fake.start();
    ChannelOptions options = test_options();
    options.max_push_size = 4u << 10;
    std::vector<std::pair<std::string, std::string>> pushes;
    options.on_push = [&](std::string_view service, std::string_view method,
                          std::span<const std::byte> body) {
      EXPECT_EQ(service, limits::LimitsBase::kServiceName);
      pushes.emplace_back(std::string(method),
                          std::string(reinterpret_cast<const char*>(body.data()), body.size()));
    };
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    limits::LimitsClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    context.set_wait_for_ready();

    tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));

    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "after the pushes");
    ASSERT_EQ(pushes.size(), 2u);
    EXPECT_EQ(pushes[0].first, "Small");
    EXPECT_EQ(pushes[0].second, "compressed and small");
    EXPECT_EQ(pushes[1].first, "Plain");
    EXPECT_EQ(pushes[1].second, "plain and small");
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.oversized_pushes, 3u);
    EXPECT_EQ(stats.dropped_pushes, 0u);
    EXPECT_EQ(stats.protocol_errors, 0u);
    EXPECT_EQ(stats.connection_losses, 0u);
    channel->close();
  });
}

TEST(ChannelLimits, FrameThatNeverCompletesClosesTheConnectionAtTheFrameTimeout) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    bool first_closed = false;
    FakeServer fake([&](TcpStream& stream, int index) {
      if (index > 0) return answer_everything(stream);
      HeaderReader reader(stream);
      std::optional<std::uint64_t> id = reader.next_request(tern::deadline_after(kPatience));
      if (!id) return;
      // The first half of the reply's header, then nothing: the channel must give up on it.
      const std::string reply = reply_frame(*id, "never whole");
      if (!send(stream, std::string_view(reply).substr(0, detail::kHeaderSize / 2))) return;
      first_closed = !reader.next(tern::deadline_after(kPatience)).has_value();
    });
    const Address address = fake.start();
    ChannelOptions options = test_options();
    options.frame_read_timeout = 200ms;
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    limits::LimitsClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    context.set_wait_for_ready();

    tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));

    ASSERT_FALSE(reply) << "a reply that never completed was accepted";
    EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    EXPECT_NE(reply.error().message().find("frame read timeout"), std::string::npos)
        << reply.error().to_string();
    EXPECT_EQ(channel->stats().frame_timeouts, 1u);
    EXPECT_TRUE(eventually([&] { return fake.finished() >= 1; }));
    EXPECT_TRUE(first_closed) << "the channel kept the stalled connection open";

    // The channel reconnects and the next connection serves.
    ClientContext again;
    again.set_timeout(kPatience);
    again.set_wait_for_ready();
    tern::rpc::Result<limits::Text> second = client.Echo(again, echo_request("again"));
    ASSERT_TRUE(second) << second.error().to_string();
    EXPECT_EQ(second->text(), "ok");
    EXPECT_EQ(fake.accepted(), 2);
    channel->close();
  });
}

TEST(ChannelLimits, IdempotentCallCaughtInAStalledFrameIsRetriedOnAnotherEndpoint) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // Its first connection stalls in the middle of the first reply; the next ones answer.
    FakeServer stalling([](TcpStream& stream, int index) {
      if (index > 0) return answer_everything(stream);
      HeaderReader reader(stream);
      std::optional<std::uint64_t> id = reader.next_request(tern::deadline_after(kPatience));
      if (!id) return;
      const std::string reply = reply_frame(*id, "never whole");
      if (!send(stream, std::string_view(reply).substr(0, reply.size() - 1))) return;
      (void)reader.next(tern::deadline_after(kPatience));
    });
    FakeServer healthy([](TcpStream& stream, int) { answer_everything(stream); });
    const Address stalling_address = stalling.start();
    const Address healthy_address = healthy.start();
    ChannelOptions options = test_options();
    options.frame_read_timeout = 200ms;
    tern::rpc::Result<Channel> channel = Channel::open(
        stalling_address.to_string() + "," + healthy_address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    ASSERT_TRUE(eventually([&] { return channel->stats().connected == 2; }));
    limits::LimitsClient client(*channel);

    // Round robin sends one of the first two calls to the stalling server's first connection.
    for (int i = 0; i < 2; ++i) {
      ClientContext context;
      context.set_timeout(kPatience);
      context.set_idempotent();
      tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));
      ASSERT_TRUE(reply) << "call " << i << ": " << reply.error().to_string();
      EXPECT_EQ(reply->text(), "ok");
    }
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.frame_timeouts, 1u);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.failed_calls, 0u);
    channel->close();
  });
}

// A frame of `type` for call `id` whose metadata carries status unavailable (and, for a goaway,
// the last call the server took).
std::string unavailable_frame(FrameType type, std::uint64_t id, std::uint64_t last_call_id = 0) {
  wire::Metadata metadata;
  metadata.set_status(static_cast<std::uint32_t>(StatusCode::unavailable));
  metadata.set_status_message("the server is shutting down");
  if (type == FrameType::goaway) metadata.set_last_call_id(last_call_id);
  return encode_frame(type, id, &metadata, "");
}

// Two endpoints: `refusing` answers the first request of its first connection as `refuse` says,
// and everything after it; `healthy` answers everything. Sends two calls that are not idempotent
// (round robin gives one of them to `refusing`) and returns the channel's counters and how many
// of the calls failed.
// With `then_close`, `refusing` closes that first connection once it sent what `refuse` gave, and
// answers nothing more on it.
std::pair<tern::rpc::ChannelStats, int> two_plain_calls_one_refused(
    std::function<std::string(std::uint64_t id)> refuse, bool then_close = false) {
  FakeServer refusing([&](TcpStream& stream, int index) {
    if (index > 0) return answer_everything(stream);
    HeaderReader reader(stream);
    std::optional<std::uint64_t> id = reader.next_request(tern::deadline_after(kPatience));
    if (!id || !send(stream, refuse(*id))) return;
    if (then_close) {
      (void)stream.shutdown(SHUT_RDWR);
      return;
    }
    answer_everything(stream);
  });
  FakeServer healthy([](TcpStream& stream, int) { answer_everything(stream); });
  const Address refusing_address = refusing.start();
  const Address healthy_address = healthy.start();
  tern::rpc::Result<Channel> channel = Channel::open(
      refusing_address.to_string() + "," + healthy_address.to_string(), test_options());
  EXPECT_TRUE(channel) << channel.error().to_string();
  if (!channel) return {};
  EXPECT_TRUE(eventually([&] { return channel->stats().connected == 2; }));
  limits::LimitsClient client(*channel);
  int failed = 0;
  for (int i = 0; i < 2; ++i) {
    ClientContext context;
    context.set_timeout(kPatience);
    tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));
    if (!reply) {
      EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
      ++failed;
    } else {
      EXPECT_EQ(reply->text(), "ok");
    }
  }
  const tern::rpc::ChannelStats stats = channel->stats();
  channel->close();
  return {stats, failed};
}

TEST(ChannelLimits, CallRefusedAfterTheServersGoawayIsSentElsewhereEvenIfNotIdempotent) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // A stopping server: its goaway names the calls it took (none after id - 1), then it refuses
    // call `id` unrun.
    auto [stats, failed] = two_plain_calls_one_refused([](std::uint64_t id) {
      return unavailable_frame(FrameType::goaway, 0, id - 1) +
             unavailable_frame(FrameType::response, id);
    });
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.failed_calls, 0u);
  });
}

TEST(ChannelLimits, CallPendingWhenAStoppingServerClosesIsSentElsewhereEvenIfNotIdempotent) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // A stopping server whose goaway says it took no call after id - 1, and which then closes
    // the connection with call `id` unanswered: that call never ran and goes to the other server.
    auto [stats, failed] = two_plain_calls_one_refused(
        [](std::uint64_t id) { return unavailable_frame(FrameType::goaway, 0, id - 1); }, true);
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.failed_calls, 0u);
    // Its goaway counts the call as taken: it may have run, so it fails with the connection.
    auto [taken_stats, taken_failed] = two_plain_calls_one_refused(
        [](std::uint64_t id) { return unavailable_frame(FrameType::goaway, 0, id); }, true);
    EXPECT_EQ(taken_failed, 1);
    EXPECT_EQ(taken_stats.retries, 0u);
  });
}

TEST(ChannelLimits, CallAnsweredUnavailableWithoutAGoawayIsNotSentAgainUnlessIdempotent) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // Unavailable from a handler (or a goaway that says the call was taken): the call may have
    // run, so a call that is not idempotent fails with it.
    auto [stats, failed] = two_plain_calls_one_refused(
        [](std::uint64_t id) { return unavailable_frame(FrameType::response, id); });
    EXPECT_EQ(failed, 1);
    EXPECT_EQ(stats.retries, 0u);
    auto [taken_stats, taken_failed] = two_plain_calls_one_refused([](std::uint64_t id) {
      return unavailable_frame(FrameType::goaway, 0, id) +
             unavailable_frame(FrameType::response, id);
    });
    EXPECT_EQ(taken_failed, 1);
    EXPECT_EQ(taken_stats.retries, 0u);
  });
}

TEST(ChannelLimits, SlowButWholeFramesAndIdleTimeAreNotCut) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    FakeServer fake([](TcpStream& stream, int) {
      HeaderReader reader(stream);
      while (std::optional<std::uint64_t> id =
                 reader.next_request(tern::deadline_after(kPatience))) {
        // Idle for more than two frame timeouts before the reply starts, then the reply in two
        // writes with much less than a frame timeout between them.
        if (!tern::this_fiber::sleep_for(700ms)) return;
        const std::string reply = reply_frame(*id, "slow");
        if (!send(stream, std::string_view(reply).substr(0, 10))) return;
        if (!tern::this_fiber::sleep_for(20ms)) return;
        if (!send(stream, std::string_view(reply).substr(10))) return;
      }
    });
    const Address address = fake.start();
    ChannelOptions options = test_options();
    options.frame_read_timeout = 300ms;
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    limits::LimitsClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    context.set_wait_for_ready();

    tern::rpc::Result<limits::Text> reply = client.Echo(context, echo_request("hello"));

    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->text(), "slow");
    EXPECT_EQ(channel->stats().frame_timeouts, 0u);
    EXPECT_EQ(channel->stats().connection_losses, 0u);
    channel->close();
  });
}

}  // namespace
