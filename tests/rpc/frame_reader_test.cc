// The RPC FrameReader (src/rpc/frame_reader.h) over a real socketpair, under the backend named
// by TERN_IO: frames split byte by byte, many frames in one read, a frame larger than the read
// buffer, an oversized declared length, a garbage header, the peer closing between frames and
// in the middle of one, and the frame read timeout.
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "metadata.pb.h"
#include "rpc/codec.h"
#include "rpc/frame.h"
#include "rpc/frame_reader.h"
#include "rpc/transport.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/buffer.h"
#include "tern/net/socket.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;
using tern::net::TcpStream;
using tern::rpc::detail::FrameReader;
using tern::rpc::detail::FrameReadErrc;
using tern::rpc::detail::FrameType;
using tern::rpc::detail::Limits;
using tern::rpc::detail::ProtocolErrc;
using tern::rpc::detail::RawFrame;

// Both ends of a connected Unix stream socket pair.
std::pair<TcpStream, TcpStream> stream_pair() {
  int fds[2];
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  return {TcpStream(tern::net::Socket(fds[0])), TcpStream(tern::net::Socket(fds[1]))};
}

// A FrameReader on one end (`near`) of a socket pair whose other end (`far`) plays the peer.
struct ReaderOnAPair {
  explicit ReaderOnAPair(Limits reader_limits = {},
                         std::chrono::milliseconds frame_timeout = std::chrono::milliseconds(0))
      : limits(reader_limits), reader(near, limits, frame_timeout) {}

  std::pair<TcpStream, TcpStream> ends = stream_pair();
  tern::rpc::detail::Transport near{std::move(ends.first)};
  TcpStream& far = ends.second;
  Limits limits;
  FrameReader reader;
};

// Bytes sent to `stream` that it has not read yet.
int unread_bytes(TcpStream& stream) {
  int n = 0;
  return ::ioctl(stream.fd(), FIONREAD, &n) == 0 ? n : -1;
}

// Runs fn as the first fiber of a one-worker runtime (with the reactor TERN_IO names).
template <typename Fn>
void on_one_worker(Fn&& fn) {
  tern::Runtime runtime({.workers = 1});
  runtime.run(std::forward<Fn>(fn));
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// What a test expects of one frame.
struct Expected {
  FrameType type;
  std::uint64_t call_id;
  std::string method;  // in the metadata; empty: no metadata
  std::string body;
};

// Appends the frame `e` describes to out.
void append(tern::net::Buffer& out, const Expected& e) {
  tern::rpc::wire::Metadata metadata;
  if (!e.method.empty()) {
    metadata.set_service("test.Service");
    metadata.set_method(e.method);
  }
  tern::rpc::detail::append_frame(out, e.type, e.call_id, e.method.empty() ? nullptr : &metadata,
                                  tern::rpc::detail::as_bytes(e.body), false);
}

void expect_frame(const tern::Result<RawFrame>& frame, const Expected& e) {
  ASSERT_TRUE(frame.has_value()) << frame.error().message();
  EXPECT_EQ(frame->header.type, e.type);
  EXPECT_EQ(frame->header.call_id, e.call_id);
  EXPECT_EQ(text_of(frame->body), e.body);
  tern::rpc::wire::Metadata metadata;
  ASSERT_TRUE(tern::rpc::detail::parse_metadata(frame->metadata, metadata));
  EXPECT_EQ(metadata.method(), e.method);
}

const std::vector<Expected>& sample_frames() {
  static const std::vector<Expected> frames = {
      {FrameType::request, 1, "Echo", "hello"},
      {FrameType::ping, 7, "", ""},
      {FrameType::one_way, 2, "Notify", std::string(300, 'n')},
      {FrameType::cancel, 1, "", ""},
      {FrameType::request, 3, "Big", std::string(100'000, 'b')},  // larger than a read
  };
  return frames;
}

TEST(FrameReader, FramesSplitByteByByte) {
  on_one_worker([] {
    ReaderOnAPair pair;
    TcpStream& near = pair.near.tcp();
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    const std::vector<Expected> frames(sample_frames().begin(), sample_frames().begin() + 4);
    tern::net::Buffer wire;
    for (const Expected& e : frames) append(wire, e);
    const std::span<const std::byte> bytes = wire.readable();
    std::size_t reads_seen = 0;
    tern::Fiber writer = tern::spawn([&] {
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        ASSERT_TRUE(far.write_all(bytes.subspan(i, 1)));
        // Each byte is read on its own: wait (with a deadline) until the reader drained it.
        const tern::Deadline deadline = tern::deadline_after(10s);
        while (unread_bytes(near) > 0 && tern::Clock::now() < deadline) {
          tern::this_fiber::yield();
        }
        if (unread_bytes(near) == 0) ++reads_seen;
      }
      far.close();
    });
    for (const Expected& e : frames) expect_frame(reader.next(), e);
    tern::Result<RawFrame> end = reader.next();
    ASSERT_FALSE(end.has_value());
    EXPECT_EQ(end.error(), FrameReadErrc::closed) << end.error().message();
    EXPECT_EQ(reader.buffered(), 0u);
    writer.join();
    EXPECT_EQ(reads_seen, bytes.size()) << "every byte was read before the next was sent";
  });
}

TEST(FrameReader, SeveralFramesInOneReadAndOneLargerThanTheBuffer) {
  on_one_worker([] {
    ReaderOnAPair pair;
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    tern::net::Buffer wire;
    for (const Expected& e : sample_frames()) append(wire, e);
    // The small frames come in one write, so one read holds all of them; the big one follows.
    tern::Fiber writer = tern::spawn([&] {
      ASSERT_TRUE(far.write_all(wire.readable()));
      ASSERT_TRUE(far.shutdown());
    });
    for (const Expected& e : sample_frames()) expect_frame(reader.next(), e);
    tern::Result<RawFrame> end = reader.next();
    ASSERT_FALSE(end.has_value());
    EXPECT_EQ(end.error(), FrameReadErrc::closed);
    writer.join();
  });
}

TEST(FrameReader, AnOversizedDeclaredLengthFailsAsSoonAsTheHeaderIsIn) {
  on_one_worker([] {
    ReaderOnAPair pair(Limits{.max_frame_size = 1024, .max_metadata_size = 256});
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    std::byte header[tern::rpc::detail::kHeaderSize];
    tern::rpc::detail::encode_header(
        {.type = FrameType::request, .call_id = 5, .metadata_size = 0, .body_size = 1u << 30},
        header);
    // Only the header is sent and the socket stays open: the reader must not wait for the body.
    ASSERT_TRUE(far.write_all(std::as_bytes(std::span(header))));
    tern::Result<RawFrame> frame = reader.next();
    ASSERT_FALSE(frame.has_value());
    EXPECT_EQ(frame.error(), ProtocolErrc::frame_too_large) << frame.error().message();
    EXPECT_NE(reader.error_detail().find("limit 1024"), std::string::npos) << reader.error_detail();
  });
}

TEST(FrameReader, AGarbageHeaderIsABadMagic) {
  on_one_worker([] {
    ReaderOnAPair pair;
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    const std::string garbage = "GET / HTTP/1.1\r\nHost: example\r\n\r\n";
    ASSERT_TRUE(far.write_all(std::as_bytes(std::span(garbage))));
    tern::Result<RawFrame> frame = reader.next();
    ASSERT_FALSE(frame.has_value());
    EXPECT_EQ(frame.error(), ProtocolErrc::bad_magic);
    EXPECT_NE(reader.error_detail().find("magic"), std::string::npos) << reader.error_detail();
  });
}

TEST(FrameReader, ThePeerClosingMidFrameIsReportedWithWhatCame) {
  on_one_worker([] {
    ReaderOnAPair pair;
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    tern::net::Buffer wire;
    append(wire, sample_frames()[0]);
    const std::size_t first_size = wire.size();
    append(wire, sample_frames()[2]);
    constexpr std::size_t kPartial = tern::rpc::detail::kHeaderSize + 30;  // into its metadata
    ASSERT_TRUE(far.write_all(wire.readable().first(first_size + kPartial)));
    far.close();
    expect_frame(reader.next(), sample_frames()[0]);
    tern::Result<RawFrame> cut = reader.next();
    ASSERT_FALSE(cut.has_value());
    EXPECT_EQ(cut.error(), FrameReadErrc::closed_mid_frame) << cut.error().message();
    EXPECT_EQ(reader.buffered(), kPartial);
  });
}

TEST(FrameReader, APartialFrameTimesOutButTheTimeBetweenFramesIsFree) {
  on_one_worker([] {
    ReaderOnAPair pair({}, 50ms);
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    tern::net::Buffer wire;
    append(wire, sample_frames()[0]);
    const std::span<const std::byte> frame = wire.readable();
    tern::Fiber writer = tern::spawn([&] {
      // Idle longer than the frame timeout before the frame starts (the idle time is what this
      // test is about, not a wait for something): that is not a timeout.
      (void)tern::this_fiber::sleep_for(120ms);
      ASSERT_TRUE(far.write_all(frame));
      ASSERT_TRUE(far.write_all(frame.first(10)));  // the next frame never completes
    });
    const auto started = std::chrono::steady_clock::now();
    expect_frame(reader.next(), sample_frames()[0]);
    EXPECT_GE(std::chrono::steady_clock::now() - started, 100ms);
    tern::Result<RawFrame> slow = reader.next();
    ASSERT_FALSE(slow.has_value());
    EXPECT_EQ(slow.error(), FrameReadErrc::frame_timeout) << slow.error().message();
    EXPECT_EQ(reader.buffered(), 10u);
    writer.join();
  });
}

TEST(FrameReader, AnInterruptEndsTheWaitAndResetStartsAfresh) {
  on_one_worker([] {
    ReaderOnAPair pair;
    TcpStream& far = pair.far;
    FrameReader& reader = pair.reader;
    tern::Result<RawFrame> got = RawFrame{};
    tern::Fiber waiting = tern::spawn([&] { got = reader.next(); });
    tern::this_fiber::yield();  // the reader parks in its read
    waiting.interrupt();
    waiting.join();
    ASSERT_FALSE(got.has_value());
    EXPECT_EQ(got.error(), std::errc::operation_canceled);
    reader.reset();
    tern::net::Buffer wire;
    append(wire, sample_frames()[1]);
    ASSERT_TRUE(far.write_all(wire.readable()));
    expect_frame(reader.next(), sample_frames()[1]);
  });
}

}  // namespace
