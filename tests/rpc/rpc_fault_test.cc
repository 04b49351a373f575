// tern::rpc against peers that break the protocol, under the backend named by TERN_IO. The server
// faces raw connections that send malformed frames, vanish with calls in flight or never read
// their replies, while a well-behaved channel keeps calling it; a channel faces a fake server
// that answers calls never made, sends garbage, ignores pings or closes in the middle of a frame.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fake_server.h"
#include "fault_test.tern.h"
#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;
using tern::Deadline;
using tern::net::Address;
using tern::net::TcpListener;
using tern::net::TcpStream;
using tern::rpc::Channel;
using tern::rpc::ChannelOptions;
using tern::rpc::ClientContext;
using tern::rpc::ServerContext;
using tern::rpc::ServerOptions;
using tern::rpc::Status;
using tern::rpc::StatusCode;
using tern::rpc::detail::FrameHeader;
using tern::rpc::detail::FrameType;
using tern::rpc::detail::ProtocolErrc;
namespace fault = tern::fault_test;
namespace wire = tern::rpc::wire;
namespace detail = tern::rpc::detail;

// How long anything a test waits for may take before the test fails.
constexpr std::chrono::milliseconds kPatience = 10s;

// Waits until pred() holds, checking every millisecond; false at the deadline.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = kPatience) {
  const Deadline deadline = tern::deadline_after(limit);
  while (!pred()) {
    if (tern::Clock::now() >= deadline) return false;
    if (!tern::this_fiber::sleep_for(1ms)) return false;
  }
  return true;
}

std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// One frame as the codec builds it.
std::string encode_frame(FrameType type, std::uint64_t call_id, const wire::Metadata* metadata,
                         std::string_view body, bool compress = false) {
  tern::net::Buffer out;
  detail::append_frame(out, type, call_id, metadata, bytes_of(body), compress);
  const std::span<const std::byte> bytes = out.readable();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A 24-byte header holding exactly the fields given, valid or not.
std::string raw_header(std::uint32_t magic, std::uint8_t version, std::uint8_t type,
                       std::uint16_t flags, std::uint64_t call_id, std::uint32_t metadata_size,
                       std::uint32_t body_size) {
  std::string header(detail::kHeaderSize, '\0');
  auto* out = reinterpret_cast<std::byte*>(header.data());
  tern::net::store_big_endian(out, 4, magic);
  out[4] = std::byte{version};
  out[5] = std::byte{type};
  tern::net::store_big_endian(out + 6, 2, flags);
  tern::net::store_big_endian(out + 8, 8, call_id);
  tern::net::store_big_endian(out + 16, 4, metadata_size);
  tern::net::store_big_endian(out + 20, 4, body_size);
  return header;
}

// A well-formed header of a frame of `type`, except for whatever the caller changes.
std::string header_of(FrameType type, std::uint64_t call_id, std::uint32_t metadata_size,
                      std::uint32_t body_size, std::uint16_t flags = 0) {
  return raw_header(detail::kMagic, detail::kVersion, static_cast<std::uint8_t>(type), flags,
                    call_id, metadata_size, body_size);
}

// Bytes that end every protobuf parse early: field 1, length 16, then one byte.
constexpr std::string_view kBadProtobuf("\x0a\x10z", 3);

std::string encode_message(const google::protobuf::MessageLite& message) {
  std::string bytes;
  EXPECT_TRUE(message.SerializeToString(&bytes));
  return bytes;
}

wire::Metadata call_metadata(std::string_view service, std::string_view method) {
  wire::Metadata metadata;
  metadata.set_service(std::string(service));
  metadata.set_method(std::string(method));
  return metadata;
}

fault::EchoRequest echo_request(std::string payload, std::uint32_t reply_size = 0) {
  fault::EchoRequest request;
  request.set_payload(std::move(payload));
  request.set_reply_size(reply_size);
  return request;
}

// A request frame for `method` of the test service (or of `service`).
std::string request_frame(std::uint64_t call_id, std::string_view method,
                          const fault::EchoRequest& request,
                          std::string_view service = fault::FaultBase::kServiceName) {
  const wire::Metadata metadata = call_metadata(service, method);
  return encode_frame(FrameType::request, call_id, &metadata, encode_message(request));
}

// A response frame: ok with `reply` as its body.
std::string reply_frame(std::uint64_t call_id, std::string_view payload) {
  fault::EchoReply reply;
  reply.set_payload(std::string(payload));
  return encode_frame(FrameType::response, call_id, nullptr, encode_message(reply));
}

// A frame read off a raw connection, its metadata parsed.
struct ReadFrame {
  FrameHeader header;
  wire::Metadata metadata;
  std::string body;
};

// Reads frames from a raw connection with the codec's own parser.
class FrameReader {
 public:
  explicit FrameReader(TcpStream& stream) : stream_(stream) {}

  // The next frame; Errc::eof at a clean end of stream, std::errc::bad_message when the stream
  // ends in the middle of a frame or the bytes are not frames.
  tern::Result<ReadFrame> next(Deadline deadline) {
    for (;;) {
      tern::Result<std::optional<detail::RawFrame>> found =
          detail::next_frame(in_.readable(), detail::Limits{});
      if (!found) return tern::fail(std::errc::bad_message);
      if (found->has_value()) {
        const detail::RawFrame& raw = **found;
        ReadFrame frame;
        frame.header = raw.header;
        if (!detail::parse_metadata(raw.metadata, frame.metadata)) {
          return tern::fail(std::errc::bad_message);
        }
        frame.body.assign(reinterpret_cast<const char*>(raw.body.data()), raw.body.size());
        in_.consume(raw.size());
        return frame;
      }
      tern::Result<std::size_t> got = in_.read_from(stream_, deadline);
      if (!got) return tern::fail(got.error());
      if (*got == 0) {
        return in_.empty() ? tern::fail(tern::Errc::eof) : tern::fail(std::errc::bad_message);
      }
    }
  }

  // Every frame until the peer closes the connection; fails if it does not close cleanly by the
  // deadline.
  tern::Result<std::vector<ReadFrame>> until_closed(Deadline deadline) {
    std::vector<ReadFrame> frames;
    for (;;) {
      tern::Result<ReadFrame> frame = next(deadline);
      if (!frame) {
        if (frame.error() == tern::Errc::eof) return frames;
        return tern::fail(frame.error());
      }
      frames.push_back(std::move(*frame));
    }
  }

 private:
  TcpStream& stream_;
  tern::net::Buffer in_;
};

// Reads and drops bytes until the peer closes the connection; how many there were.
tern::Result<std::size_t> read_until_end(TcpStream& stream, Deadline deadline) {
  std::vector<std::byte> chunk(64u << 10);
  std::size_t total = 0;
  for (;;) {
    tern::Result<std::size_t> got = stream.read(chunk, deadline);
    if (!got) return tern::fail(got.error());
    if (*got == 0) return total;
    total += *got;
  }
}

// Echo echoes; Hold keeps its call until the call is cancelled. Handlers run on every worker.
class FaultService final : public fault::FaultBase {
 public:
  Status Echo(ServerContext&, const fault::EchoRequest& request, fault::EchoReply& reply) override {
    if (request.reply_size() > 0) {
      reply.mutable_payload()->assign(request.reply_size(), 'r');
    } else {
      reply.set_payload(request.payload());
    }
    return {};
  }

  Status Hold(ServerContext& context, const fault::EchoRequest&, fault::EchoReply&) override {
    ++holding;
    const Deadline limit = tern::deadline_after(20s);
    while (!context.cancelled() && tern::Clock::now() < limit) {
      if (!tern::this_fiber::sleep_for(2ms)) break;
    }
    if (context.cancelled()) ++saw_cancel;
    --holding;
    return {StatusCode::cancelled, "held until the call was cancelled"};
  }

  Status Chat(
      ServerContext&,
      tern::rpc::ServerReaderWriter<fault::EchoRequest, fault::EchoReply>& stream) override {
    fault::EchoRequest next;
    fault::EchoReply reply;
    for (;;) {
      tern::rpc::Result<bool> got = stream.read(next);
      if (!got) return got.error();
      if (!*got) return {};
      reply.set_payload(next.payload());
      if (Status status = stream.write(reply); !status.ok()) return status;
    }
  }

  std::atomic<int> holding{0};
  std::atomic<int> saw_cancel{0};
};

// What the faulty peers attack: FaultService on a Server at 127.0.0.1, and a well-behaved
// Channel whose fiber keeps calling Echo the whole time; every one of those calls must succeed.
// Lives on one fiber of worker 0.
class ServerUnderFault {
 public:
  explicit ServerUnderFault(ServerOptions options = {}) : server_(std::move(options)) {}
  ~ServerUnderFault() { finish(); }

  // Starts the server, the channel and its traffic (fatal failures end the test).
  void start() {
    ASSERT_TRUE(server_.add_service(service_));
    tern::Result<Address> bound = server_.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    address_ = *bound;
    ChannelOptions options;
    options.connections_per_endpoint = 1;
    options.ping_interval = 0ms;
    tern::rpc::Result<Channel> channel = Channel::open(address_.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();
    channel_.emplace(std::move(*channel));
    ASSERT_TRUE(channel_->wait_connected(tern::deadline_after(kPatience)).ok());
    traffic_ = tern::spawn([this] { keep_calling(); }, {.name = "good traffic"});
    expect_traffic_flows();
  }

  // Waits until the good channel has made `calls` more successful calls.
  void expect_traffic_flows(int calls = 20) {
    const int target = good_calls_ + calls;
    EXPECT_TRUE(eventually([&] { return good_calls_ >= target || bad_calls_ > 0; }))
        << "the good channel made " << good_calls_ << " calls";
    EXPECT_EQ(bad_calls_, 0) << first_failure_;
  }

  // Stops the good traffic and checks that every call of it succeeded.
  void stop_traffic() {
    if (!traffic_.joinable()) return;
    stop_traffic_ = true;
    traffic_.join();
    EXPECT_GT(good_calls_, 0);
    EXPECT_EQ(bad_calls_, 0) << first_failure_;
  }

  // Stops the traffic, closes the channel and stops the server.
  void finish() {
    stop_traffic();
    if (channel_) {
      channel_->close();
      channel_.reset();
    }
    if (server_.running()) {
      EXPECT_EQ(server_.stop(tern::deadline_after(kPatience)), 0u);
    }
  }

  // A raw connection to the server.
  TcpStream connect_raw() {
    tern::Result<TcpStream> stream = TcpStream::connect(address_, tern::deadline_after(kPatience));
    EXPECT_TRUE(stream) << stream.error().message();
    return stream ? std::move(*stream) : TcpStream();
  }

  tern::rpc::Server& server() { return server_; }
  FaultService& service() { return service_; }

 private:
  void keep_calling() {
    fault::FaultClient client(*channel_);
    for (int i = 0; !stop_traffic_; ++i) {
      ClientContext context;
      context.set_timeout(kPatience);
      const std::string payload = "good call " + std::to_string(i);
      tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, echo_request(payload));
      if (reply && reply->payload() == payload) {
        ++good_calls_;
      } else if (bad_calls_++ == 0) {
        first_failure_ = reply ? "wrong payload " + reply->payload() : reply.error().to_string();
      }
    }
  }

  FaultService service_;
  tern::rpc::Server server_;
  Address address_;
  std::optional<Channel> channel_;
  tern::Fiber traffic_;
  bool stop_traffic_ = false;
  int good_calls_ = 0;
  int bad_calls_ = 0;
  std::string first_failure_;
};

// Limits small enough for the oversized frames to stay small.
constexpr std::uint32_t kMaxFrame = 64u << 10;
constexpr std::uint32_t kMaxMetadata = 4u << 10;

ServerOptions small_limits() {
  ServerOptions options;
  options.max_frame_size = kMaxFrame;
  options.max_metadata_size = kMaxMetadata;
  return options;
}

// Bytes a client sends, and the protocol error the server must name in its goaway.
struct Malformed {
  std::string name;
  std::string bytes;
  ProtocolErrc error;
};

std::vector<Malformed> malformed_inputs() {
  const wire::Metadata echo = call_metadata(fault::FaultBase::kServiceName, "Echo");
  const std::string echo_metadata = echo.SerializeAsString();
  const std::string echo_body = encode_message(echo_request("hello"));
  std::string bad_metadata = header_of(FrameType::request, 1, kBadProtobuf.size(),
                                       static_cast<std::uint32_t>(echo_body.size()));
  bad_metadata += kBadProtobuf;
  bad_metadata += echo_body;
  constexpr std::string_view kNotZstd = "these bytes are not a zstd frame";
  std::string not_zstd =
      header_of(FrameType::request, 1, static_cast<std::uint32_t>(echo_metadata.size()),
                kNotZstd.size(), detail::kFlagCompressed);
  not_zstd += echo_metadata;
  not_zstd += kNotZstd;
  const std::uint8_t request = static_cast<std::uint8_t>(FrameType::request);
  const wire::Metadata chat = call_metadata(fault::FaultBase::kServiceName, "Chat");
  const std::string open_chat = encode_frame(FrameType::stream_open, 1, &chat, "");
  wire::Metadata why;
  why.set_status(static_cast<std::uint32_t>(StatusCode::cancelled));
  why.set_status_message("the client gave up");
  const std::string reset_chat = encode_frame(FrameType::stream_reset, 1, &why, "");
  return {
      // A second stream under the id of one still open.
      {"StreamOpenedTwice", open_chat + open_chat, ProtocolErrc::unexpected_frame},
      // A second stream under the id of one reset, whose handler has not ended yet.
      {"StreamReopenedAfterReset", open_chat + reset_chat + open_chat,
       ProtocolErrc::unexpected_frame},
      // A stream under an id below one the connection took already.
      {"StreamOpenBelowTheLastId", encode_frame(FrameType::stream_open, 2, &chat, "") + open_chat,
       ProtocolErrc::unexpected_frame},
      {"Garbage", "GET / HTTP/1.1\r\nHost: tern.example\r\n\r\n", ProtocolErrc::bad_magic},
      {"WrongMagic", raw_header(0x54525044, 1, request, 0, 1, 0, 0), ProtocolErrc::bad_magic},
      {"Version0", raw_header(detail::kMagic, 0, request, 0, 1, 0, 0),
       ProtocolErrc::unsupported_version},
      {"Version3", raw_header(detail::kMagic, 3, request, 0, 1, 0, 0),
       ProtocolErrc::unsupported_version},
      // A stream frame exists only from version 2 on.
      {"StreamFrameInVersion1", raw_header(detail::kMagic, 1, 10, 0, 1, 0, 0),
       ProtocolErrc::unknown_frame_type},
      {"FrameType14", raw_header(detail::kMagic, 2, 14, 0, 1, 0, 0),
       ProtocolErrc::unknown_frame_type},
      {"EndStreamOnARequest", header_of(FrameType::request, 1, 0, 0, detail::kFlagEndStream),
       ProtocolErrc::unknown_flags},
      {"StreamFrameForAStreamNeverOpened",
       encode_frame(FrameType::stream_message, 99, nullptr, "x"), ProtocolErrc::unknown_call_id},
      {"StreamStatusFromClient", encode_frame(FrameType::stream_status, 1, nullptr, ""),
       ProtocolErrc::unexpected_frame},
      {"FrameType0", raw_header(detail::kMagic, 1, 0, 0, 1, 0, 0),
       ProtocolErrc::unknown_frame_type},
      {"FrameType9", raw_header(detail::kMagic, 1, 9, 0, 1, 0, 0),
       ProtocolErrc::unknown_frame_type},
      {"FrameType255", raw_header(detail::kMagic, 1, 255, 0, 1, 0, 0),
       ProtocolErrc::unknown_frame_type},
      {"FlagBit2", header_of(FrameType::request, 1, 0, 0, 1u << 2), ProtocolErrc::unknown_flags},
      {"FlagBit15", header_of(FrameType::ping, 1, 0, 0, 1u << 15), ProtocolErrc::unknown_flags},
      // Only the header is sent: the server must not wait for the body it announces.
      {"BodyOverLimit", header_of(FrameType::request, 1, 0, kMaxFrame),
       ProtocolErrc::frame_too_large},
      {"BodyOf4GiB", header_of(FrameType::request, 1, 0, 0xffffffffu),
       ProtocolErrc::frame_too_large},
      {"MetadataOverLimit", header_of(FrameType::request, 1, kMaxMetadata + 1, 0),
       ProtocolErrc::metadata_too_large},
      {"MetadataOf4GiB", header_of(FrameType::request, 1, 0xffffffffu, 0),
       ProtocolErrc::metadata_too_large},
      {"MetadataNotProtobuf", bad_metadata, ProtocolErrc::bad_metadata},
      {"CompressedBodyNotZstd", not_zstd, ProtocolErrc::bad_compression},
      {"ResponseFromClient", reply_frame(1, "a reply nobody asked for"),
       ProtocolErrc::unexpected_frame},
      {"PushFromClient", encode_frame(FrameType::push, 1, &echo, "x"),
       ProtocolErrc::unexpected_frame},
      {"PongFromClient", encode_frame(FrameType::pong, 1, nullptr, ""),
       ProtocolErrc::unexpected_frame},
  };
}

class ServerRejects : public testing::TestWithParam<Malformed> {};

TEST_P(ServerRejects, SendsGoawayClosesAndServesTheOthers) {
  const Malformed& input = GetParam();
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerUnderFault target(small_limits());
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();

    TcpStream raw = target.connect_raw();
    ASSERT_TRUE(raw.write_all(bytes_of(input.bytes), tern::deadline_after(kPatience)));
    FrameReader reader(raw);
    tern::Result<std::vector<ReadFrame>> frames =
        reader.until_closed(tern::deadline_after(kPatience));

    ASSERT_TRUE(frames) << "the server did not close the connection cleanly: "
                        << frames.error().message();
    // Only what the server sent for frames before the bad one (a stream's credit) may come first.
    ASSERT_FALSE(frames->empty()) << "a goaway, then the end of the stream";
    for (std::size_t at = 0; at + 1 < frames->size(); ++at) {
      EXPECT_EQ((*frames)[at].header.type, FrameType::stream_credit) << "frame " << at;
    }
    const ReadFrame& goaway = frames->back();
    EXPECT_EQ(goaway.header.type, FrameType::goaway);
    EXPECT_EQ(goaway.metadata.status(), static_cast<std::uint32_t>(StatusCode::internal));
    const std::string expected = detail::make_error_code(input.error).message();
    EXPECT_TRUE(contains(goaway.metadata.status_message(), expected))
        << "goaway says '" << goaway.metadata.status_message() << "', expected '" << expected
        << "'";
    EXPECT_TRUE(eventually([&] {
      return target.server().stats().protocol_errors == before.protocol_errors + 1;
    })) << target.server().stats().protocol_errors;
    target.expect_traffic_flows();
    target.finish();
    EXPECT_EQ(target.server().stats().protocol_errors, before.protocol_errors + 1);
    EXPECT_EQ(target.server().stats().connections, 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Frames, ServerRejects, testing::ValuesIn(malformed_inputs()),
                         [](const testing::TestParamInfo<Malformed>& info) {
                           return info.param.name;
                         });

TEST(ServerFaults, PeerClosingInTheMiddleOfAFrameIsAProtocolError) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    ServerUnderFault target(small_limits());
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();

    TcpStream raw = target.connect_raw();
    const std::string whole = request_frame(1, "Echo", echo_request(std::string(100, 'p')));
    const std::string part = whole.substr(0, whole.size() - 40);
    ASSERT_TRUE(raw.write_all(bytes_of(part), tern::deadline_after(kPatience)));
    ASSERT_TRUE(raw.shutdown(SHUT_WR));
    FrameReader reader(raw);
    tern::Result<std::vector<ReadFrame>> frames =
        reader.until_closed(tern::deadline_after(kPatience));

    ASSERT_TRUE(frames) << frames.error().message();
    for (const ReadFrame& frame : *frames) {
      EXPECT_EQ(frame.header.type, FrameType::goaway) << "no reply to the truncated call";
    }
    EXPECT_TRUE(
        eventually([&] { return target.server().stats().connections == before.connections; }));
    EXPECT_TRUE(eventually(
        [&] { return target.server().stats().protocol_errors == before.protocol_errors + 1; }, 1s))
        << "a frame cut off by the end of the stream counts as a protocol error";
    target.expect_traffic_flows();
  });
}

TEST(ServerFaults, GoawayAfterAProtocolErrorAnswersTheCallsItCounts) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    ServerUnderFault target(small_limits());
    ASSERT_NO_FATAL_FAILURE(target.start());
    TcpStream raw = target.connect_raw();
    std::string bytes = request_frame(1, "Echo", echo_request("before the garbage"));
    bytes += "GET / HTTP/1.1\r\nHost: tern.example\r\n\r\n";
    ASSERT_TRUE(raw.write_all(bytes_of(bytes), tern::deadline_after(kPatience)));
    FrameReader reader(raw);
    tern::Result<std::vector<ReadFrame>> frames =
        reader.until_closed(tern::deadline_after(kPatience));

    ASSERT_TRUE(frames) << frames.error().message();
    const ReadFrame* goaway = nullptr;
    bool answered = false;
    for (const ReadFrame& frame : *frames) {
      if (frame.header.type == FrameType::goaway) goaway = &frame;
      answered =
          answered || (frame.header.type == FrameType::response && frame.header.call_id == 1);
    }
    ASSERT_NE(goaway, nullptr) << "no goaway among " << frames->size() << " frames";
    // metadata.proto: a goaway's last_call_id is the highest call the sender will still answer.
    if (goaway->metadata.last_call_id() >= 1) {
      EXPECT_TRUE(answered) << "the goaway counts call 1 (last_call_id "
                            << goaway->metadata.last_call_id() << ") but it was never answered";
    }
    target.expect_traffic_flows();
  });
}

TEST(ServerFaults, UnknownServiceOrMethodIsAnsweredAndTheConnectionStays) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    ServerUnderFault target;
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();
    TcpStream raw = target.connect_raw();
    FrameReader reader(raw);
    const Deadline deadline = tern::deadline_after(kPatience);

    std::string calls = request_frame(1, "Echo", echo_request("a"), "tern.fault_test.Nothing");
    calls += request_frame(2, "Nothing", echo_request("b"));
    calls += request_frame(3, "Echo", echo_request("still here"));
    // Names are bytes on the wire: one that is not UTF-8 is an unknown name, not bad metadata.
    calls += request_frame(4, "Echo\xff\xfe", echo_request("c"));
    ASSERT_TRUE(raw.write_all(bytes_of(calls), deadline));

    std::vector<ReadFrame> replies;
    for (int i = 0; i < 4; ++i) {
      tern::Result<ReadFrame> reply = reader.next(deadline);
      ASSERT_TRUE(reply) << reply.error().message();
      EXPECT_EQ(reply->header.type, FrameType::response);
      replies.push_back(std::move(*reply));
    }
    std::sort(replies.begin(), replies.end(), [](const ReadFrame& a, const ReadFrame& b) {
      return a.header.call_id < b.header.call_id;
    });
    ASSERT_EQ(replies[0].header.call_id, 1u);
    EXPECT_EQ(replies[0].metadata.status(), static_cast<std::uint32_t>(StatusCode::unimplemented));
    EXPECT_TRUE(contains(replies[0].metadata.status_message(), "tern.fault_test.Nothing"))
        << replies[0].metadata.status_message();
    ASSERT_EQ(replies[1].header.call_id, 2u);
    EXPECT_EQ(replies[1].metadata.status(), static_cast<std::uint32_t>(StatusCode::unimplemented));
    EXPECT_TRUE(contains(replies[1].metadata.status_message(), "Nothing"))
        << replies[1].metadata.status_message();
    ASSERT_EQ(replies[2].header.call_id, 3u);
    EXPECT_EQ(replies[2].metadata.status(), 0u);
    fault::EchoReply echoed;
    ASSERT_TRUE(echoed.ParseFromString(replies[2].body));
    EXPECT_EQ(echoed.payload(), "still here");
    ASSERT_EQ(replies[3].header.call_id, 4u);
    EXPECT_EQ(replies[3].metadata.status(), static_cast<std::uint32_t>(StatusCode::unimplemented));

    // The connection is still open: a ping gets its pong.
    ASSERT_TRUE(raw.write_all(bytes_of(encode_frame(FrameType::ping, 77, nullptr, "")), deadline));
    tern::Result<ReadFrame> pong = reader.next(deadline);
    ASSERT_TRUE(pong) << pong.error().message();
    EXPECT_EQ(pong->header.type, FrameType::pong);
    EXPECT_EQ(pong->header.call_id, 77u);

    const tern::rpc::ServerStats after = target.server().stats();
    EXPECT_EQ(after.unimplemented_calls, before.unimplemented_calls + 3);
    EXPECT_EQ(after.protocol_errors, before.protocol_errors);
    target.expect_traffic_flows();
  });
}

TEST(ServerFaults, PeerVanishingWithCallsInFlight) {
  const int kCalls = tern_test::scaled(200);
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerUnderFault target;
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();
    {
      TcpStream raw = target.connect_raw();
      std::string calls;
      for (int i = 1; i <= kCalls; ++i) {
        calls += request_frame(static_cast<std::uint64_t>(i), "Hold", echo_request("hold"));
      }
      ASSERT_TRUE(raw.write_all(bytes_of(calls), tern::deadline_after(kPatience)));
      ASSERT_TRUE(eventually([&] { return target.service().holding.load() == kCalls; }))
          << target.service().holding.load() << " calls held";
      EXPECT_GE(target.server().stats().in_flight, static_cast<std::uint64_t>(kCalls));
      raw.close();
    }
    EXPECT_TRUE(eventually([&] { return target.service().holding.load() == 0; }))
        << target.service().holding.load() << " calls still held";
    EXPECT_EQ(target.service().saw_cancel.load(), kCalls) << "every call saw its client go";
    EXPECT_TRUE(
        eventually([&] { return target.server().stats().connections == before.connections; }));
    target.expect_traffic_flows();
    target.stop_traffic();
    EXPECT_TRUE(eventually([&] { return target.server().stats().in_flight == 0; }))
        << target.server().stats().in_flight << " calls in flight";
    target.finish();
    const tern::rpc::ServerStats after = target.server().stats();
    EXPECT_EQ(after.connections, 0u);
    EXPECT_EQ(after.protocol_errors, 0u);
  });
}

TEST(ServerFaults, SlowReaderIsCutOff) {
  constexpr std::uint32_t kReplySize = 512u << 10;
  constexpr int kCalls = 32;  // 16 MiB of replies, far past the limit and the socket buffers
  ServerOptions options;
  options.max_pending_reply_bytes = 1u << 20;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerUnderFault target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();

    TcpStream raw = target.connect_raw();
    ASSERT_TRUE(raw.set_receive_buffer(4096));
    std::string calls;
    for (int i = 1; i <= kCalls; ++i) {
      calls += request_frame(static_cast<std::uint64_t>(i), "Echo", echo_request("", kReplySize));
    }
    ASSERT_TRUE(raw.write_all(bytes_of(calls), tern::deadline_after(kPatience)));
    EXPECT_TRUE(eventually([&] {
      return target.server().stats().slow_readers == before.slow_readers + 1;
    })) << target.server().stats().slow_readers;
    EXPECT_TRUE(eventually([&] {
      return target.server().stats().connections == before.connections;
    })) << "the slow reader's connection is closed";
    target.expect_traffic_flows();

    // The reader now gets part of the replies, then the end of the stream (or a reset).
    tern::Result<std::size_t> received = read_until_end(raw, tern::deadline_after(kPatience));
    if (received) {
      EXPECT_LT(*received, static_cast<std::size_t>(kCalls) * kReplySize);
    } else {
      EXPECT_EQ(received.error(), std::errc::connection_reset) << received.error().message();
    }
    target.stop_traffic();
    EXPECT_TRUE(eventually([&] { return target.server().stats().in_flight == 0; }));
    target.finish();
    const tern::rpc::ServerStats after = target.server().stats();
    EXPECT_EQ(after.slow_readers, before.slow_readers + 1);
    EXPECT_EQ(after.protocol_errors, 0u);
  });
}

TEST(ServerFaults, SlowSenderIsCutButAnIdleConnectionBetweenFramesIsNot) {
  constexpr auto kFrameTimeout = 300ms;
  ServerOptions options;
  options.frame_read_timeout = kFrameTimeout;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    ServerUnderFault target(options);
    ASSERT_NO_FATAL_FAILURE(target.start());
    const tern::rpc::ServerStats before = target.server().stats();

    // A patient client: whole frames with pauses longer than the frame timeout between them.
    TcpStream patient = target.connect_raw();
    FrameReader patient_reader(patient);
    for (std::uint64_t id = 1; id <= 2; ++id) {
      ASSERT_TRUE(tern::this_fiber::sleep_for(kFrameTimeout * 2));
      const std::string frame = request_frame(id, "Echo", echo_request("patient"));
      ASSERT_TRUE(patient.write_all(bytes_of(frame), tern::deadline_after(kPatience)));
      tern::Result<ReadFrame> reply = patient_reader.next(tern::deadline_after(kPatience));
      ASSERT_TRUE(reply) << reply.error().message();
      EXPECT_EQ(reply->header.call_id, id);
    }

    // A trickling client: one byte every 50 ms, so a frame would take seconds to arrive.
    TcpStream trickler = target.connect_raw();
    const std::string frame = request_frame(1, "Echo", echo_request(std::string(200, 't')));
    std::size_t sent = 0;
    const Deadline give_up = tern::deadline_after(kPatience);
    while (sent < frame.size() && tern::Clock::now() < give_up) {
      if (!trickler.write_all(bytes_of(std::string_view(frame).substr(sent, 1)), give_up)) break;
      ++sent;
      if (target.server().stats().slow_senders > before.slow_senders) break;
      ASSERT_TRUE(tern::this_fiber::sleep_for(50ms));
    }
    EXPECT_LT(sent, frame.size()) << "the whole frame went out before the server cut it";
    EXPECT_TRUE(eventually(
        [&] { return target.server().stats().slow_senders == before.slow_senders + 1; }));
    tern::Result<std::size_t> rest = read_until_end(trickler, tern::deadline_after(kPatience));
    EXPECT_TRUE(rest || rest.error() == std::errc::connection_reset) << rest.error().message();

    // The patient connection is still served after the trickler is gone.
    const std::string last = request_frame(3, "Echo", echo_request("still here"));
    ASSERT_TRUE(patient.write_all(bytes_of(last), tern::deadline_after(kPatience)));
    tern::Result<ReadFrame> reply = patient_reader.next(tern::deadline_after(kPatience));
    ASSERT_TRUE(reply) << reply.error().message();
    EXPECT_EQ(reply->header.call_id, 3u);
    target.expect_traffic_flows();
    target.finish();
    const tern::rpc::ServerStats after = target.server().stats();
    EXPECT_EQ(after.slow_senders, before.slow_senders + 1);
    EXPECT_EQ(after.protocol_errors, 0u);
  });
}

using tern_test::FakeServer;

// Reads (and drops) frames until the peer closes the connection or the fiber is interrupted.
void drain(FrameReader& reader) {
  while (reader.next(tern::deadline_after(kPatience * 3))) {
  }
}

// Writes bytes to a raw connection; false if it failed.
bool send(TcpStream& stream, std::string_view bytes) {
  return stream.write_all(bytes_of(bytes), tern::deadline_after(kPatience)).has_value();
}

ChannelOptions fake_channel_options() {
  ChannelOptions options;
  options.connections_per_endpoint = 1;
  options.ping_interval = 0ms;
  options.reconnect.initial_backoff = 20ms;
  options.reconnect.max_backoff = 200ms;
  options.reconnect.attempt_timeout = 2s;
  return options;
}

// What a fake server sends in answer to the first request (its call id given) while the call
// waits: each must close the connection and fail the call with unavailable.
struct BadAnswer {
  std::string name;
  std::function<std::string(std::uint64_t call_id)> bytes;
};

std::vector<BadAnswer> bad_answers() {
  return {
      {"ReplyForACallNeverSent",
       [](std::uint64_t id) { return reply_frame(id + 1000, "to nobody"); }},
      {"ReplyForCallIdZero", [](std::uint64_t) { return reply_frame(0, "to nobody"); }},
      {"Garbage",
       [](std::uint64_t) { return std::string("HTTP/1.1 400 Bad Request\r\n\r\nnot tern"); }},
      {"FrameOverTheLimit",
       [](std::uint64_t id) { return header_of(FrameType::response, id, 0, 1u << 30); }},
      {"UnknownFlags",
       [](std::uint64_t id) { return header_of(FrameType::response, id, 0, 0, 1u << 7); }},
      {"RequestFromTheServer",
       [](std::uint64_t) { return request_frame(1, "Echo", echo_request("turned around")); }},
      {"CancelFromTheServer",
       [](std::uint64_t id) { return encode_frame(FrameType::cancel, id, nullptr, ""); }},
  };
}

class ChannelRejects : public testing::TestWithParam<BadAnswer> {};

TEST_P(ChannelRejects, ClosesTheConnectionAndFailsTheCall) {
  const BadAnswer& answer = GetParam();
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    bool first_closed = false;
    FakeServer fake([&](TcpStream& stream, int index) {
      FrameReader reader(stream);
      if (index == 0) {
        tern::Result<ReadFrame> request = reader.next(tern::deadline_after(kPatience));
        if (!request) return;
        if (!send(stream, answer.bytes(request->header.call_id))) return;
        first_closed = !reader.next(tern::deadline_after(kPatience)).has_value();
        return;
      }
      drain(reader);
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), fake_channel_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    fault::FaultClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);

    tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, echo_request("hello"));

    ASSERT_FALSE(reply) << "the call succeeded";
    EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.protocol_errors, 1u);
    EXPECT_EQ(stats.connection_losses, 1u);
    EXPECT_TRUE(eventually([&] { return fake.finished() >= 1; }));
    EXPECT_TRUE(first_closed) << "the channel closed the connection";
    channel->close();
  });
}

INSTANTIATE_TEST_SUITE_P(Answers, ChannelRejects, testing::ValuesIn(bad_answers()),
                         [](const testing::TestParamInfo<BadAnswer>& info) {
                           return info.param.name;
                         });

TEST(ChannelFaults, ReplyWithInvalidMetadataFailsTheCall) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    bool closed = false;
    FakeServer fake([&](TcpStream& stream, int index) {
      FrameReader reader(stream);
      if (index == 0) {
        tern::Result<ReadFrame> request = reader.next(tern::deadline_after(kPatience));
        if (!request) return;
        std::string reply =
            header_of(FrameType::response, request->header.call_id, kBadProtobuf.size(), 0);
        reply += kBadProtobuf;
        if (!send(stream, reply)) return;
        closed = !reader.next(tern::deadline_after(kPatience)).has_value();
        return;
      }
      drain(reader);
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), fake_channel_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    fault::FaultClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);

    tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, echo_request("hello"));

    ASSERT_FALSE(reply);
    EXPECT_NE(reply.error().code(), StatusCode::deadline_exceeded) << "the call hung";
    EXPECT_EQ(reply.error().code(), StatusCode::internal) << reply.error().to_string();
    EXPECT_EQ(channel->stats().protocol_errors, 1u);
    EXPECT_EQ(channel->stats().connection_losses, 1u);
    EXPECT_TRUE(eventually([&] { return fake.finished() >= 1; }));
    EXPECT_TRUE(closed);
    channel->close();
  });
}

TEST(ChannelFaults, StatusCodePastTheTableIsNotOk) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    FakeServer fake([&](TcpStream& stream, int) {
      FrameReader reader(stream);
      tern::Result<ReadFrame> request = reader.next(tern::deadline_after(kPatience));
      if (!request) return;
      wire::Metadata status;
      status.set_status(256);  // StatusCode is one byte: 256 must not read as 0 (ok)
      status.set_status_message("a status no table knows");
      if (!send(stream, encode_frame(FrameType::response, request->header.call_id, &status, ""))) {
        return;
      }
      drain(reader);
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), fake_channel_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    fault::FaultClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);

    tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, echo_request("hello"));

    EXPECT_FALSE(reply) << "a reply with status 256 was taken for a success";
    channel->close();
  });
}

TEST(ChannelFaults, ServerThatNeverAnswersPingsIsDroppedAndReconnected) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // Per connection: the pings it saw, and whether the channel has closed it.
    std::vector<int> pings(64, 0);
    std::vector<bool> ended(64, false);
    FakeServer fake([&](TcpStream& stream, int index) {
      if (index >= static_cast<int>(pings.size())) return;
      FrameReader reader(stream);
      while (tern::Result<ReadFrame> frame = reader.next(tern::deadline_after(kPatience * 3))) {
        if (frame->header.type == FrameType::ping) ++pings[index];
      }
      ended[index] = true;
    });
    const Address address = fake.start();
    ChannelOptions options = fake_channel_options();
    options.ping_interval = 50ms;
    options.ping_timeout = 50ms;
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();

    // The server never answers: the call fails when the channel drops the connection, and the
    // status says why (this side gave up on pongs, not "closed by the server").
    fault::FaultClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);
    tern::rpc::Result<fault::EchoReply> reply = client.Echo(context, echo_request("unanswered"));
    ASSERT_FALSE(reply);
    EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    EXPECT_NE(reply.error().message().find("no pong within 50 ms"), std::string::npos)
        << reply.error().to_string();

    ASSERT_TRUE(eventually([&] { return ended[0] && ended[1]; }))
        << "the channel closed the silent connections";
    EXPECT_GE(pings[0], 1);
    EXPECT_GE(pings[1], 1) << "the second connection was dropped before it sent a ping";
    EXPECT_TRUE(eventually([&] {
      const tern::rpc::ChannelStats stats = channel->stats();
      return stats.connection_losses >= 2 && stats.connects >= 3;
    })) << channel->stats().connection_losses
        << " losses, " << channel->stats().connects << " connects";
    EXPECT_GE(fake.accepted(), 3);
    EXPECT_EQ(channel->stats().protocol_errors, 0u);
    channel->close();
  });
}

TEST(ChannelFaults, ConnectionAfterAMissedPongStaysWhileItsPongsCome) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    // The first connection ignores pings; the later ones answer every ping.
    std::vector<int> pongs_sent(8, 0);
    FakeServer fake([&](TcpStream& stream, int index) {
      FrameReader reader(stream);
      while (tern::Result<ReadFrame> frame = reader.next(tern::deadline_after(kPatience * 3))) {
        if (frame->header.type != FrameType::ping || index == 0) continue;
        if (!send(stream, encode_frame(FrameType::pong, frame->header.call_id, nullptr, ""))) {
          return;
        }
        if (index < static_cast<int>(pongs_sent.size())) ++pongs_sent[index];
      }
    });
    const Address address = fake.start();
    ChannelOptions options = fake_channel_options();
    options.ping_interval = 50ms;
    options.ping_timeout = 50ms;
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();

    // Five pongs on the second connection, or a second loss (the bug this guards against).
    EXPECT_TRUE(
        eventually([&] { return pongs_sent[1] >= 5 || channel->stats().connection_losses >= 2; }));
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.connection_losses, 1u)
        << "a connection whose server answers every ping was dropped for a missing pong";
    EXPECT_EQ(stats.connects, 2u);
    EXPECT_EQ(stats.connected, 1u);
    channel->close();
  });
}

TEST(ChannelFaults, ServerClosingInTheMiddleOfAFrameFailsEveryCallInFlight) {
  constexpr int kCalls = 3;
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    FakeServer fake([&](TcpStream& stream, int index) {
      FrameReader reader(stream);
      if (index == 0) {
        std::vector<std::uint64_t> ids;
        while (ids.size() < kCalls) {
          tern::Result<ReadFrame> request = reader.next(tern::deadline_after(kPatience));
          if (!request) return;
          ids.push_back(request->header.call_id);
        }
        const std::string reply = reply_frame(ids[0], std::string(1000, 'x'));
        (void)send(stream, std::string_view(reply).substr(0, reply.size() / 2));
        stream.close();
        return;
      }
      drain(reader);
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), fake_channel_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    fault::FaultClient client(*channel);
    ClientContext context;
    context.set_timeout(kPatience);

    std::vector<tern::rpc::Future<fault::EchoReply>> calls;
    for (int i = 0; i < kCalls; ++i) {
      calls.push_back(client.EchoAsync(context, echo_request("call " + std::to_string(i))));
    }
    for (auto& call : calls) {
      tern::rpc::Result<fault::EchoReply> reply = call.get();
      ASSERT_FALSE(reply);
      EXPECT_EQ(reply.error().code(), StatusCode::unavailable) << reply.error().to_string();
    }
    EXPECT_EQ(channel->stats().connection_losses, 1u);
    channel->close();
  });
}

TEST(ChannelFaults, LateReplyIsCountedAndTheConnectionStays) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    tern::Event gave_up;
    std::uint64_t cancelled_id = 0;
    FakeServer fake([&](TcpStream& stream, int index) {
      FrameReader reader(stream);
      if (index != 0) return drain(reader);
      const Deadline deadline = tern::deadline_after(kPatience);
      tern::Result<ReadFrame> first = reader.next(deadline);
      if (!first || !gave_up.wait_until(deadline)) return;
      tern::Result<ReadFrame> cancel = reader.next(deadline);
      if (!cancel) return;
      if (cancel->header.type == FrameType::cancel) cancelled_id = cancel->header.call_id;
      if (!send(stream, reply_frame(first->header.call_id, "too late"))) return;
      tern::Result<ReadFrame> second = reader.next(deadline);
      if (!second) return;
      fault::EchoRequest request;
      if (!request.ParseFromString(second->body)) return;
      if (!send(stream, reply_frame(second->header.call_id, request.payload()))) return;
      drain(reader);
    });
    const Address address = fake.start();
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), fake_channel_options());
    ASSERT_TRUE(channel) << channel.error().to_string();
    fault::FaultClient client(*channel);

    ClientContext hurried;
    hurried.set_timeout(50ms);
    tern::rpc::Result<fault::EchoReply> late = client.Echo(hurried, echo_request("first"));
    ASSERT_FALSE(late);
    EXPECT_EQ(late.error().code(), StatusCode::deadline_exceeded) << late.error().to_string();
    gave_up.set();

    ClientContext patient;
    patient.set_timeout(kPatience);
    tern::rpc::Result<fault::EchoReply> reply = client.Echo(patient, echo_request("second"));
    ASSERT_TRUE(reply) << reply.error().to_string();
    EXPECT_EQ(reply->payload(), "second");
    EXPECT_EQ(cancelled_id, 1u) << "the channel told the server it gave up on call 1";
    const tern::rpc::ChannelStats stats = channel->stats();
    EXPECT_EQ(stats.late_replies, 1u);
    EXPECT_EQ(stats.connection_losses, 0u);
    EXPECT_EQ(stats.connects, 1u);
    EXPECT_EQ(stats.protocol_errors, 0u);
    EXPECT_EQ(fake.accepted(), 1);
    channel->close();
  });
}

TEST(ChannelFaults, ServerClosingEveryConnectionAtOnceIsRetriedWithBackoff) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    FakeServer fake([](TcpStream& stream, int) { stream.close(); });
    const Address address = fake.start();
    ChannelOptions options = fake_channel_options();
    options.reconnect.initial_backoff = 20ms;
    options.reconnect.multiplier = 2.0;
    options.reconnect.jitter = 0.0;
    options.reconnect.max_backoff = 1s;
    tern::rpc::Result<Channel> channel = Channel::open(address.to_string(), std::move(options));
    ASSERT_TRUE(channel) << channel.error().to_string();

    ASSERT_TRUE(eventually([&] { return fake.accepted() >= 5; }));
    // Backoffs of 20, 40, 80 and 160 ms between the five connections (minus scheduling slack).
    const auto spread = fake.accept_times()[4] - fake.accept_times()[0];
    EXPECT_GE(spread, 250ms)
        << "five connections in "
        << std::chrono::duration_cast<std::chrono::microseconds>(spread).count()
        << " us: the channel reconnects without backing off";
    channel->close();
  });
}

}  // namespace
