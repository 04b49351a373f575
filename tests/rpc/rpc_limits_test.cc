// The per-connection limits of tern::rpc::Server (docs/rpc.md, "Limits"), under the backend named
// by TERN_IO: one test per attack an unauthenticated peer can make over a raw loopback connection
// (a zstd bomb, a ping flood it never reads, pipelined calls then a reset, metadata of 30,000
// empty entries, one huge frame), each asserting the bound through the server's stats while a
// well-behaved channel keeps calling the same server and every one of its calls succeeds.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <zstd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "limits_test.tern.h"
#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "wait_for_condition.h"

namespace {

using namespace std::chrono_literals;
using tern::Deadline;
using tern::net::Address;
using tern::net::TcpStream;
using tern::rpc::ServerOptions;
using tern::rpc::ServerStats;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern::rpc::detail::FrameType;
namespace fault = tern::limits_test;
namespace wire = tern::rpc::wire;
namespace detail = tern::rpc::detail;

// How long anything a test waits for may take before the test fails.
constexpr std::chrono::milliseconds kPatience = 10s;

template <typename Pred>
bool eventually(Pred pred) {
  return tern_test::wait_until_condition(pred, tern::deadline_after(kPatience));
}

std::string_view text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

wire::Metadata echo_metadata(std::string_view method = "Echo") {
  wire::Metadata metadata;
  metadata.set_service(std::string(fault::LimitsBase::kServiceName));
  metadata.set_method(std::string(method));
  return metadata;
}

std::string echo_body(std::string payload, std::uint32_t reply_size = 0) {
  fault::EchoRequest request;
  request.set_payload(std::move(payload));
  request.set_reply_size(reply_size);
  return request.SerializeAsString();
}

// A frame built by the codec (its body compressed by it when `compress`).
std::string frame(FrameType type, std::uint64_t call_id, const wire::Metadata* metadata,
                  std::string_view body, bool compress = false) {
  tern::net::Buffer out;
  detail::append_frame(out, type, call_id, metadata, bytes_of(body), compress);
  return std::string(text_of(out.readable()));
}

// A request frame whose body is `compressed`, already a zstd frame, flagged compressed.
std::string compressed_request(std::uint64_t call_id, std::string_view compressed) {
  const std::string metadata = echo_metadata().SerializeAsString();
  detail::FrameHeader header;
  header.type = FrameType::request;
  header.flags = detail::kFlagCompressed;
  header.call_id = call_id;
  header.metadata_size = static_cast<std::uint32_t>(metadata.size());
  header.body_size = static_cast<std::uint32_t>(compressed.size());
  std::string bytes(detail::kHeaderSize, '\0');
  detail::encode_header(header, reinterpret_cast<std::byte*>(bytes.data()));
  return bytes + metadata + std::string(compressed);
}

// `plain` compressed into one zstd frame; `declare_size`: whether its header records the size.
std::string zstd_frame(std::string_view plain, bool declare_size) {
  ZSTD_CCtx* context = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(context, ZSTD_c_contentSizeFlag, declare_size ? 1 : 0);
  std::string out(ZSTD_compressBound(plain.size()), '\0');
  std::size_t written = 0;
  if (declare_size) {
    written = ZSTD_compress2(context, out.data(), out.size(), plain.data(), plain.size());
  } else {
    // Streaming with no pledged size leaves the size out of the frame header.
    ZSTD_inBuffer in{plain.data(), plain.size(), 0};
    ZSTD_outBuffer to{out.data(), out.size(), 0};
    while (ZSTD_compressStream2(context, &to, &in, ZSTD_e_end) != 0) {
    }
    written = to.pos;
  }
  ZSTD_freeCCtx(context);
  EXPECT_FALSE(ZSTD_isError(written));
  out.resize(written);
  return out;
}

// A frame read from a raw connection, its metadata parsed.
struct Received {
  detail::FrameHeader header;
  wire::Metadata metadata;
  std::string body;
};

// A raw client connection that writes frames by hand and reads what the server sends.
class RawPeer {
 public:
  explicit RawPeer(const Address& address) {
    tern::Result<TcpStream> stream = TcpStream::connect(address, tern::deadline_after(kPatience));
    EXPECT_TRUE(stream) << stream.error().message();
    if (stream) stream_ = std::move(*stream);
  }

  TcpStream& stream() { return stream_; }

  bool send(std::string_view bytes) {
    tern::Result<void> written =
        stream_.write_all(bytes_of(bytes), tern::deadline_after(kPatience));
    EXPECT_TRUE(written) << written.error().message();
    return static_cast<bool>(written);
  }

  // The next frame from the server; an error at the end of the stream or past kPatience.
  tern::Result<Received> next() {
    const Deadline deadline = tern::deadline_after(kPatience);
    for (;;) {
      tern::Result<std::optional<detail::RawFrame>> found =
          detail::next_frame(in_.readable(), detail::Limits{});
      if (!found) return tern::fail(found.error());
      if (found->has_value()) {
        const detail::RawFrame& raw = **found;
        Received frame{
            .header = raw.header, .metadata = {}, .body = std::string(text_of(raw.body))};
        if (tern::Result<void> parsed = detail::parse_metadata(raw.metadata, frame.metadata);
            !parsed) {
          return tern::fail(parsed.error());
        }
        in_.consume(raw.size());
        return frame;
      }
      tern::Result<std::size_t> got = in_.read_from(stream_, deadline);
      if (!got) return tern::fail(got.error());
      if (*got == 0) return tern::fail(std::errc::connection_aborted);
    }
  }

  // Closes with a reset (SO_LINGER 0) instead of a FIN.
  void reset() {
    const linger abortive{.l_onoff = 1, .l_linger = 0};
    EXPECT_EQ(::setsockopt(stream_.fd(), SOL_SOCKET, SO_LINGER, &abortive, sizeof abortive), 0);
    stream_.close();
  }

 private:
  TcpStream stream_;
  tern::net::Buffer in_;
};

// Echo echoes; Hold keeps its call until it is cancelled (or 20 s pass).
class LimitsService final : public fault::LimitsBase {
 public:
  Status Echo(tern::rpc::ServerContext&, const fault::EchoRequest& request,
              fault::EchoReply& reply) override {
    if (request.reply_size() > 0) {
      reply.mutable_payload()->assign(request.reply_size(), 'r');
    } else {
      reply.set_payload(request.payload());
    }
    return {};
  }

  Status Hold(tern::rpc::ServerContext& context, const fault::EchoRequest&,
              fault::EchoReply&) override {
    ++holding;
    ++held;
    const Deadline limit = tern::deadline_after(20s);
    while (!context.cancelled() && tern::Clock::now() < limit) {
      if (!tern::this_fiber::sleep_for(2ms)) break;
    }
    if (context.cancelled()) ++saw_cancel;
    --holding;
    return {StatusCode::cancelled, "held until the call was cancelled"};
  }

  std::atomic<int> holding{0};     // Hold calls running now
  std::atomic<int> held{0};        // Hold calls started
  std::atomic<int> saw_cancel{0};  // Hold calls that ended cancelled
};

// The server under attack, and a well-behaved Channel whose fiber calls Echo the whole time.
// Lives on one fiber.
class Target {
 public:
  explicit Target(ServerOptions options) : server_(std::move(options)) {}
  ~Target() { finish(); }

  void start() {
    ASSERT_TRUE(server_.add_service(service_));
    tern::Result<Address> bound = server_.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    address_ = *bound;
    tern::rpc::ChannelOptions options;
    options.connections_per_endpoint = 1;
    options.ping_interval = 0ms;
    tern::rpc::Result<tern::rpc::Channel> channel =
        tern::rpc::Channel::open(address_.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    channel_.emplace(std::move(*channel));
    ASSERT_TRUE(channel_->wait_connected(tern::deadline_after(kPatience)).ok());
    traffic_ = tern::spawn([this] { keep_calling(); }, {.name = "good traffic"});
    expect_good_calls();
  }

  // Waits for `calls` more successful calls of the good channel; none may have failed.
  void expect_good_calls(int calls = 20) {
    const int target = good_calls_ + calls;
    EXPECT_TRUE(eventually([&] { return good_calls_ >= target || bad_calls_ > 0; }))
        << "the good channel made " << good_calls_ << " calls";
    EXPECT_EQ(bad_calls_, 0) << first_failure_;
  }

  void finish() {
    if (traffic_.joinable()) {
      stop_traffic_ = true;
      traffic_.join();
      EXPECT_EQ(bad_calls_, 0) << first_failure_;
    }
    if (channel_) {
      channel_->close();
      channel_.reset();
    }
    if (server_.running()) (void)server_.stop(tern::deadline_after(kPatience));
  }

  tern::rpc::Server& server() { return server_; }
  ServerStats stats() const { return server_.stats(); }
  int good_calls() const { return good_calls_; }
  LimitsService& service() { return service_; }
  const Address& address() const { return address_; }

 private:
  void keep_calling() {
    fault::LimitsClient client(*channel_);
    for (int i = 0; !stop_traffic_; ++i) {
      tern::rpc::ClientContext context;
      context.set_timeout(kPatience);
      const std::string payload = "good call " + std::to_string(i);
      fault::EchoRequest request;
      request.set_payload(payload);
      tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, request);
      if (reply && reply->payload() == payload) {
        ++good_calls_;
      } else if (bad_calls_++ == 0) {
        first_failure_ = reply ? "wrong payload " + reply->payload() : reply.error().to_string();
      }
    }
  }

  LimitsService service_;
  tern::rpc::Server server_;
  Address address_;
  std::optional<tern::rpc::Channel> channel_;
  tern::Fiber traffic_;
  bool stop_traffic_ = false;
  int good_calls_ = 0;
  int bad_calls_ = 0;
  std::string first_failure_;
};

// Reads one response and checks it is ok and echoes `payload`.
void expect_echo(RawPeer& peer, std::uint64_t call_id, std::string_view payload) {
  tern::Result<Received> reply = peer.next();
  ASSERT_TRUE(reply) << reply.error().message();
  EXPECT_EQ(reply->header.type, FrameType::response);
  EXPECT_EQ(reply->header.call_id, call_id);
  EXPECT_EQ(reply->metadata.status(), 0u) << reply->metadata.status_message();
  fault::EchoReply echoed;
  ASSERT_TRUE(echoed.ParseFromString(reply->body));
  EXPECT_EQ(echoed.payload(), payload);
}

TEST(ServerLimits, ZstdBombFailsItsCallWithoutAllocatingAndTheConnectionStays) {
  constexpr int kBombs = 200;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    Target target({});  // the default max_decompressed_size (4 MiB)
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    // 64 MiB of one byte: about 2 KiB compressed, declaring 64 MiB in its frame header.
    const std::string bomb = zstd_frame(echo_body(std::string(64u << 20, 'x')), true);
    ASSERT_LT(bomb.size(), 8u << 10);
    ASSERT_GT(ZSTD_getFrameContentSize(bomb.data(), bomb.size()), 64ull << 20);
    std::string bombs;
    for (int i = 1; i <= kBombs; ++i) bombs += compressed_request(i, bomb);
    RawPeer peer(target.address());
    ASSERT_TRUE(peer.send(bombs));
    for (int i = 1; i <= kBombs; ++i) {
      tern::Result<Received> reply = peer.next();
      ASSERT_TRUE(reply) << "reply " << i << ": " << reply.error().message();
      EXPECT_EQ(reply->header.type, FrameType::response);
      EXPECT_EQ(reply->metadata.status(),
                static_cast<std::uint32_t>(StatusCode::resource_exhausted));
      EXPECT_TRUE(contains(reply->metadata.status_message(), "max_decompressed_size"))
          << reply->metadata.status_message();
    }
    // The same connection still serves calls, compressed ones too.
    const wire::Metadata metadata = echo_metadata();
    ASSERT_TRUE(
        peer.send(frame(FrameType::request, 1000, &metadata, echo_body("after the bombs"), true)));
    expect_echo(peer, 1000, "after the bombs");

    const ServerStats after = target.stats();
    EXPECT_EQ(after.body_limit_rejected, before.body_limit_rejected + kBombs);
    EXPECT_EQ(after.rejected_calls, before.rejected_calls + kBombs);
    EXPECT_EQ(after.protocol_errors, before.protocol_errors);
    // Nothing near a bomb's size was ever held by a connection.
    EXPECT_LT(after.connection_bytes_peak, 2u << 20);
    target.expect_good_calls();
  });
}

TEST(ServerLimits, BodyWithoutADeclaredSizeIsBoundedWhileDecompressing) {
  constexpr std::size_t kLimit = 1u << 20;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerOptions options;
    options.max_decompressed_size = kLimit;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    const std::string bomb = zstd_frame(echo_body(std::string(64u << 20, 'x')), false);
    ASSERT_EQ(ZSTD_getFrameContentSize(bomb.data(), bomb.size()), ZSTD_CONTENTSIZE_UNKNOWN);
    const std::string small = zstd_frame(echo_body("streamed"), false);
    RawPeer peer(target.address());
    ASSERT_TRUE(peer.send(compressed_request(1, bomb) + compressed_request(2, small)));
    tern::Result<Received> refused = peer.next();
    ASSERT_TRUE(refused) << refused.error().message();
    EXPECT_EQ(refused->header.call_id, 1u);
    EXPECT_EQ(refused->metadata.status(),
              static_cast<std::uint32_t>(StatusCode::resource_exhausted));
    expect_echo(peer, 2, "streamed");

    const ServerStats after = target.stats();
    EXPECT_EQ(after.body_limit_rejected, before.body_limit_rejected + 1);
    // The scratch stopped at the limit (it doubles, so at most twice it, plus the buffers).
    EXPECT_LT(after.connection_bytes_peak, 3 * kLimit);
    target.expect_good_calls();
  });
}

// 4,096 pings in one buffer (96 KiB).
std::string ping_burst() {
  std::string pings;
  for (int i = 0; i < 4096; ++i) pings += frame(FrameType::ping, i, nullptr, "");
  return pings;
}

TEST(ServerLimits, PingFloodFromAPeerThatNeverReadsStopsBeingReadAtTheBudget) {
  constexpr std::size_t kBudget = 256u << 10;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerOptions options;
    options.max_connection_memory = kBudget;
    options.write_timeout = 0ms;  // this test is about the budget alone
    // A small kernel send buffer, so the pongs pile up in the server's own buffers soon.
    options.tcp.send_buffer = 16u << 10;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    RawPeer peer(target.address());
    const std::string pings = ping_burst();
    // The flood goes on until the test stops it; once the server stops reading, each write
    // waits (in steps of 50 ms, so that the fiber sees the stop).
    bool stop = false;
    std::size_t sent = 0;
    tern::Fiber flood = tern::spawn([&] {
      while (!stop) {
        tern::Result<void> written =
            peer.stream().write_all(bytes_of(pings), tern::deadline_after(50ms));
        if (written) {
          sent += pings.size();
        } else if (written.error() != std::errc::timed_out) {
          ADD_FAILURE() << "the flood's write failed: " << written.error().message();
          return;
        }
      }
    });
    EXPECT_TRUE(eventually(
        [&] { return target.stats().backpressure_pauses > before.backpressure_pauses; }));
    // Paused: the other client is served, and the pongs held stay within the budget plus one
    // read buffer.
    target.expect_good_calls();
    EXPECT_LE(target.stats().connection_bytes_peak, kBudget + (64u << 10));
    EXPECT_GT(sent, kBudget) << "the flood was larger than the budget";
    stop = true;
    flood.join();

    // Its reset ends the paused connection.
    peer.reset();
    EXPECT_TRUE(eventually([&] { return target.stats().connections == before.connections; }));
    const ServerStats after = target.stats();
    EXPECT_LE(after.connection_bytes_peak, kBudget + (64u << 10));
    EXPECT_EQ(after.write_timeouts, before.write_timeouts);
    target.expect_good_calls();
  });
}

TEST(ServerLimits, PeerThatNeverReadsIsCutAfterTheWriteTimeout) {
  constexpr std::size_t kBudget = 256u << 10;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerOptions options;
    options.max_connection_memory = kBudget;
    options.write_timeout = 300ms;
    options.tcp.send_buffer = 16u << 10;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    RawPeer peer(target.address());
    const std::string pings = ping_burst();
    // Pings until the server cuts the connection: the writes block once the server stops
    // reading (or is slower than the flood), and fail when it resets the connection.
    for (;;) {
      tern::Result<void> written =
          peer.stream().write_all(bytes_of(pings), tern::deadline_after(kPatience));
      if (!written) {
        EXPECT_NE(written.error(), std::errc::timed_out) << "the server never cut the flood";
        break;
      }
    }
    EXPECT_TRUE(
        eventually([&] { return target.stats().write_timeouts == before.write_timeouts + 1; }));
    EXPECT_TRUE(eventually([&] { return target.stats().connections == before.connections; }));
    const ServerStats after = target.stats();
    EXPECT_EQ(after.slow_readers, before.slow_readers + 1);
    EXPECT_LE(after.connection_bytes_peak, kBudget + (64u << 10));
    target.expect_good_calls();
  });
}

TEST(ServerLimits, PipelinedCallsWaitForRoomInsteadOfRunningAllAtOnce) {
  constexpr std::size_t kMaxCalls = 8;
  constexpr int kSent = 200;
  // One worker: the pipelining connection and the good channel share it.
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    ServerOptions options;
    options.max_calls_per_connection = kMaxCalls;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    // Every held call is cancelled by the frame right after it, so each ends once it started;
    // the server must never run more than kMaxCalls of them at once, and must serve every one
    // (it stops reading at the limit instead of refusing calls).
    RawPeer peer(target.address());
    std::string calls;
    const wire::Metadata metadata = echo_metadata("Hold");
    for (int i = 1; i <= kSent; ++i) {
      calls += frame(FrameType::request, i, &metadata, echo_body(std::string(1000, 'h')));
      calls += frame(FrameType::cancel, i, nullptr, "");
    }
    ASSERT_TRUE(peer.send(calls));
    const int good_before = target.good_calls();
    for (int i = 1; i <= kSent; ++i) {
      tern::Result<Received> reply = peer.next();
      ASSERT_TRUE(reply) << "reply " << i << ": " << reply.error().message();
      EXPECT_EQ(reply->metadata.status(), static_cast<std::uint32_t>(StatusCode::cancelled))
          << reply->metadata.status_message();
    }
    EXPECT_GT(target.good_calls(), good_before)
        << "the good channel's calls were served while the pipeline was";
    const ServerStats after = target.stats();
    EXPECT_EQ(target.service().held.load(), kSent);
    EXPECT_EQ(after.rejected_calls, before.rejected_calls) << "calls wait, they are not refused";
    EXPECT_EQ(target.service().saw_cancel.load(), kSent);
    EXPECT_LE(after.connection_calls_peak, kMaxCalls);
    EXPECT_GT(after.backpressure_pauses, before.backpressure_pauses);
    // kMaxCalls calls of 1 KiB each and the read buffer: far below a megabyte.
    EXPECT_LT(after.connection_bytes_peak, 1u << 20);
    target.expect_good_calls();
  });
}

TEST(ServerLimits, CallsOfAResetConnectionAreCancelledWhileItsReadingIsPaused) {
  constexpr std::size_t kMaxCalls = 8;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerOptions options;
    options.max_calls_per_connection = kMaxCalls;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    RawPeer peer(target.address());
    std::string calls;
    const wire::Metadata metadata = echo_metadata("Hold");
    for (int i = 1; i <= 100; ++i) calls += frame(FrameType::request, i, &metadata, echo_body("h"));
    ASSERT_TRUE(peer.send(calls));
    ASSERT_TRUE(
        eventually([&] { return target.service().holding.load() == static_cast<int>(kMaxCalls); }));
    EXPECT_TRUE(eventually(
        [&] { return target.stats().backpressure_pauses > before.backpressure_pauses; }));
    EXPECT_EQ(target.stats().connection_calls_peak, kMaxCalls);

    // Nothing is read from the connection now; its reset must still cancel the held calls.
    peer.reset();
    EXPECT_TRUE(eventually([&] { return target.service().holding.load() == 0; }))
        << target.service().holding.load() << " calls still held";
    EXPECT_EQ(target.service().saw_cancel.load(), static_cast<int>(kMaxCalls));
    EXPECT_TRUE(eventually([&] { return target.stats().in_flight <= 1; }));
    const ServerStats after = target.stats();
    EXPECT_EQ(after.cancelled_by_close, before.cancelled_by_close + kMaxCalls);
    EXPECT_EQ(target.service().held.load(), static_cast<int>(kMaxCalls))
        << "no call after the reset ran";
    target.expect_good_calls();
  });
}

TEST(ServerLimits, MetadataOf30000EmptyEntriesFailsItsCall) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    Target target({});
    ASSERT_NO_FATAL_FAILURE(target.start());
    const ServerStats before = target.stats();

    wire::Metadata many = echo_metadata();
    for (int i = 0; i < 30'000; ++i) many.add_entries();
    ASSERT_LE(many.ByteSizeLong(), 64u << 10) << "within max_metadata_size";
    wire::Metadata large = echo_metadata();
    wire::MetadataEntry* entry = large.add_entries();
    entry->set_key("big");
    entry->set_value(std::string(20u << 10, 'v'));
    wire::Metadata fine = echo_metadata();
    for (int i = 0; i < 10; ++i) {
      wire::MetadataEntry* e = fine.add_entries();
      e->set_key("key" + std::to_string(i));
      e->set_value("value");
    }

    RawPeer peer(target.address());
    ASSERT_TRUE(peer.send(frame(FrameType::request, 1, &many, echo_body("many")) +
                          frame(FrameType::request, 2, &large, echo_body("large")) +
                          frame(FrameType::request, 3, &fine, echo_body("fine"))));
    tern::Result<Received> first = peer.next();
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(first->header.call_id, 1u);
    EXPECT_EQ(first->metadata.status(), static_cast<std::uint32_t>(StatusCode::resource_exhausted));
    EXPECT_TRUE(contains(first->metadata.status_message(), "max_metadata_entries"))
        << first->metadata.status_message();
    tern::Result<Received> second = peer.next();
    ASSERT_TRUE(second) << second.error().message();
    EXPECT_EQ(second->header.call_id, 2u);
    EXPECT_EQ(second->metadata.status(),
              static_cast<std::uint32_t>(StatusCode::resource_exhausted));
    EXPECT_TRUE(contains(second->metadata.status_message(), "max_metadata_entry_size"))
        << second->metadata.status_message();
    expect_echo(peer, 3, "fine");

    const ServerStats after = target.stats();
    EXPECT_EQ(after.metadata_limit_rejected, before.metadata_limit_rejected + 2);
    EXPECT_EQ(after.rejected_calls, before.rejected_calls + 2);
    EXPECT_EQ(after.protocol_errors, before.protocol_errors);
    target.expect_good_calls();
  });
}

TEST(ServerLimits, BuffersShrinkOnceALargeFrameIsDone) {
  constexpr std::size_t kLarge = 8u << 20;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerOptions options;
    options.retained_buffer_size = 64u << 10;
    Target target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());

    RawPeer peer(target.address());
    const wire::Metadata metadata = echo_metadata();
    ASSERT_TRUE(peer.send(
        frame(FrameType::request, 1, &metadata, echo_body(std::string(kLarge, 'l'), 16))));
    tern::Result<Received> reply = peer.next();
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_EQ(reply->metadata.status(), 0u);
    EXPECT_GE(target.stats().connection_bytes_peak, kLarge);
    // The next frame finds the connection holding a small buffer again.
    ASSERT_TRUE(peer.send(frame(FrameType::request, 2, &metadata, echo_body("small"))));
    expect_echo(peer, 2, "small");
    EXPECT_TRUE(eventually([&] { return target.stats().connection_bytes < (512u << 10); }))
        << target.stats().connection_bytes << " bytes held by the connections";
    target.expect_good_calls();
  });
}

}  // namespace
