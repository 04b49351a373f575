// tern::net::Buffer and length-prefixed framing: free space, commit/consume, compaction before
// growth, parse_frame on every kind of input, big-endian helpers, and write_frame over real
// sockets (one gather write per frame, parsed by the peer).
#include "tern/net/buffer.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/net/tcp_stream.h"
#include "test_scale.h"

namespace {

using tern::net::Buffer;
using tern::net::Frame;
using tern::net::FrameFormat;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::run_on;
using tern_test::text_of;

// The storage a buffer owns, when its readable bytes start at the front (as after compaction):
// the readable bytes plus the free space after them.
std::size_t capacity_of(Buffer& buffer) { return buffer.size() + buffer.writable(0).size(); }

// A frame with a 4-byte big-endian length header.
std::string frame4(std::string_view body) {
  std::string out(4, '\0');
  tern::net::store_big_endian(reinterpret_cast<std::byte*>(out.data()), 4, body.size());
  out.append(body);
  return out;
}

TEST(Buffer, CommitThenConsume) {
  Buffer buffer(64);
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.size(), 0u);
  std::span<std::byte> free = buffer.writable(10);
  ASSERT_GE(free.size(), 10u);
  EXPECT_EQ(free.size(), 64u);  // an empty buffer offers all of its storage
  const std::string hello = "hello world";
  std::memcpy(free.data(), hello.data(), hello.size());
  buffer.commit(hello.size());
  EXPECT_FALSE(buffer.empty());
  EXPECT_EQ(text_of(buffer.readable()), "hello world");
  EXPECT_EQ(buffer.writable().size(), 64u - hello.size());  // free space follows the data

  buffer.consume(6);
  EXPECT_EQ(text_of(buffer.readable()), "world");
  buffer.consume(100);  // more than there is: drops what there is
  EXPECT_TRUE(buffer.empty());
  // Fully consumed: the free space starts at the front again.
  EXPECT_EQ(buffer.writable().size(), 64u);
}

TEST(Buffer, AppendClearAndManySmallPieces) {
  Buffer buffer(8);
  std::string expected;
  for (int i = 0; i < 200; ++i) {
    const std::string piece = std::to_string(i) + ",";
    buffer.append(bytes_of(piece));
    expected += piece;
  }
  EXPECT_EQ(text_of(buffer.readable()), expected);
  buffer.clear();
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(buffer.size(), 0u);
  buffer.append(bytes_of("again"));
  EXPECT_EQ(text_of(buffer.readable()), "again");
}

TEST(Buffer, CompactsBeforeGrowing) {
  Buffer buffer(64);
  std::string data(48, 'x');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>('a' + i % 26);
  buffer.append(bytes_of(data));
  buffer.consume(40);  // 8 unread bytes at offset 40, 16 free at the back
  const std::byte* storage = buffer.readable().data() - 40;
  EXPECT_EQ(buffer.writable(1).size(), 16u);  // enough at the back: no move

  std::span<std::byte> free = buffer.writable(32);  // not enough at the back: compact
  EXPECT_EQ(free.size(), 56u);                      // 64 - 8, same allocation
  EXPECT_EQ(buffer.readable().data(), storage);     // unread bytes moved to the front
  EXPECT_EQ(free.data(), storage + 8);
  EXPECT_EQ(text_of(buffer.readable()), data.substr(40));
}

TEST(Buffer, GrowsWhenCompactionIsNotEnough) {
  Buffer buffer(16);
  buffer.append(bytes_of("0123456789"));
  buffer.consume(2);
  std::span<std::byte> free = buffer.writable(100);
  EXPECT_GE(free.size(), 100u);
  EXPECT_EQ(text_of(buffer.readable()), "23456789");
  EXPECT_EQ(free.data(), buffer.readable().data() + 8);
  // It doubles: 16 -> 32 -> 64 -> 128 is the first size with 100 free after 8 bytes.
  EXPECT_EQ(capacity_of(buffer), 128u);

  Buffer empty(0);
  EXPECT_GE(empty.writable(1).size(), 1u);
  empty.append(bytes_of("x"));
  EXPECT_EQ(text_of(empty.readable()), "x");

  Buffer big(16);
  const std::string large(100000, 'q');
  big.append(bytes_of(large));
  EXPECT_EQ(big.size(), large.size());
  EXPECT_EQ(text_of(big.readable()), large);
}

TEST(Buffer, AllocatesItsStorageAtTheFirstWrite) {
  // A connection's buffers cost nothing until bytes arrive for them.
  Buffer idle(1 << 20);
  EXPECT_TRUE(idle.empty());
  EXPECT_EQ(idle.readable().data(), nullptr);
  idle.consume(10);
  idle.clear();
  EXPECT_EQ(idle.readable().data(), nullptr);
  EXPECT_EQ(idle.writable().size(), std::size_t{1} << 20);  // then all of the capacity asked for
  EXPECT_NE(idle.readable().data(), nullptr);

  // A first request larger than the capacity allocates the doubled size at once.
  Buffer small(16);
  EXPECT_EQ(small.writable(100).size(), 128u);
  // A zero capacity starts at 4096 bytes.
  Buffer zero(0);
  EXPECT_EQ(zero.writable().size(), 4096u);
}

TEST(Buffer, SteadyFramesReuseOneAllocation) {
  Buffer buffer(256);
  const std::byte* storage = buffer.writable().data();
  std::string pending;
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < 2000; ++round) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const std::size_t in = 1 + (state >> 33) % 100;  // at most 100 bytes in
    std::string piece(in, static_cast<char>('A' + round % 26));
    buffer.append(bytes_of(piece));
    pending += piece;
    // Consume a random amount, but leave at most 50 bytes unread: 50 + 100 always fits in
    // 256 bytes once compacted, so the buffer never needs to grow.
    std::size_t out = std::min<std::size_t>(buffer.size(), (state >> 40) % 110);
    if (buffer.size() - out > 50) out = buffer.size() - 50;
    ASSERT_EQ(text_of(buffer.readable().first(out)), pending.substr(0, out)) << round;
    buffer.consume(out);
    pending.erase(0, out);
  }
  EXPECT_EQ(text_of(buffer.readable()), pending);
  buffer.clear();
  EXPECT_EQ(buffer.writable().data(), storage) << "the buffer reallocated";
  EXPECT_EQ(buffer.writable().size(), 256u);
}

TEST(BigEndian, StoreAndLoadEveryWidth) {
  std::array<std::byte, 8> bytes{};
  tern::net::store_big_endian(bytes.data(), 8, 0x0102030405060708ull);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(bytes[i], std::byte(i + 1)) << i;
  EXPECT_EQ(tern::net::load_big_endian(bytes.data(), 8), 0x0102030405060708ull);
  EXPECT_EQ(tern::net::load_big_endian(bytes.data(), 2), 0x0102u);
  EXPECT_EQ(tern::net::load_big_endian(bytes.data() + 4, 4), 0x05060708u);

  bytes.fill(std::byte{0xee});
  tern::net::store_big_endian(bytes.data(), 2, 0xabcd);
  EXPECT_EQ(bytes[0], std::byte{0xab});
  EXPECT_EQ(bytes[1], std::byte{0xcd});
  EXPECT_EQ(bytes[2], std::byte{0xee});  // nothing past the width is written

  tern::net::store_big_endian(bytes.data(), 2, 0x12345);  // only the low 16 bits fit
  EXPECT_EQ(tern::net::load_big_endian(bytes.data(), 2), 0x2345u);

  std::uint64_t state = 88172645463325252ull;
  for (std::size_t width = 1; width <= 8; ++width) {
    for (int i = 0; i < 100; ++i) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      const std::uint64_t value = width == 8 ? state : state & ((1ull << (8 * width)) - 1);
      std::array<std::byte, 8> out{};
      tern::net::store_big_endian(out.data(), width, value);
      ASSERT_EQ(tern::net::load_big_endian(out.data(), width), value) << width;
      ASSERT_EQ(static_cast<std::uint8_t>(out[width - 1]), value & 0xff) << width;
    }
  }
  EXPECT_EQ(tern::net::load_big_endian(bytes.data(), 0), 0u);
}

TEST(ParseFrame, IncompleteHeader) {
  const FrameFormat format;  // 4-byte length header
  const std::string frame = frame4("body");
  for (std::size_t n = 0; n < 4; ++n) {
    tern::Result<std::optional<Frame>> parsed =
        tern::net::parse_frame(bytes_of(frame).first(n), format);
    ASSERT_TRUE(parsed) << n;
    EXPECT_FALSE(parsed->has_value()) << n;
  }
}

TEST(ParseFrame, IncompleteBody) {
  const FrameFormat format;
  const std::string frame = frame4("0123456789");
  for (std::size_t n = 4; n < frame.size(); ++n) {
    tern::Result<std::optional<Frame>> parsed =
        tern::net::parse_frame(bytes_of(frame).first(n), format);
    ASSERT_TRUE(parsed) << n;
    EXPECT_FALSE(parsed->has_value()) << n;
  }
}

TEST(ParseFrame, CompleteFramePointsIntoTheInput) {
  const FrameFormat format;
  const std::string bytes = frame4("0123456789") + "trailing";
  std::span<const std::byte> input = bytes_of(bytes);
  tern::Result<std::optional<Frame>> parsed = tern::net::parse_frame(input, format);
  ASSERT_TRUE(parsed);
  ASSERT_TRUE(parsed->has_value());
  const Frame& frame = **parsed;
  EXPECT_EQ(frame.header.data(), input.data());
  EXPECT_EQ(frame.header.size(), 4u);
  EXPECT_EQ(frame.body.data(), input.data() + 4);
  EXPECT_EQ(text_of(frame.body), "0123456789");
  EXPECT_EQ(frame.size(), 14u);

  const std::string empty = frame4("");
  parsed = tern::net::parse_frame(bytes_of(empty), format);
  ASSERT_TRUE(parsed);
  ASSERT_TRUE(parsed->has_value());
  EXPECT_TRUE((*parsed)->body.empty());
  EXPECT_EQ((*parsed)->size(), 4u);
}

TEST(ParseFrame, SeveralFramesBackToBack) {
  const FrameFormat format;
  std::vector<std::string> bodies;
  std::string stream;
  for (int i = 0; i < 50; ++i) {
    bodies.push_back(
        std::string(static_cast<std::size_t>(i * 7 % 23), static_cast<char>('a' + i % 26)));
    stream += frame4(bodies.back());
  }
  // Fed in odd-sized pieces through a Buffer, as a reader would see them.
  Buffer buffer(16);
  std::vector<std::string> seen;
  for (std::size_t offset = 0; offset < stream.size(); offset += 13) {
    buffer.append(
        bytes_of(stream).subspan(offset, std::min<std::size_t>(13, stream.size() - offset)));
    for (;;) {
      tern::Result<std::optional<Frame>> parsed = tern::net::parse_frame(buffer.readable(), format);
      ASSERT_TRUE(parsed);
      if (!parsed->has_value()) break;
      seen.push_back(text_of((*parsed)->body));
      buffer.consume((*parsed)->size());
    }
  }
  EXPECT_TRUE(buffer.empty());
  EXPECT_EQ(seen, bodies);
}

TEST(ParseFrame, OversizedBodyIsRejectedFromTheHeaderAlone) {
  FrameFormat format;
  format.max_body = 100;
  std::array<std::byte, 4> header{};
  tern::net::store_big_endian(header.data(), 4, 101);
  tern::Result<std::optional<Frame>> parsed = tern::net::parse_frame(header, format);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), std::errc::message_size);

  tern::net::store_big_endian(header.data(), 4, 100);  // exactly the limit is fine
  parsed = tern::net::parse_frame(header, format);
  ASSERT_TRUE(parsed);
  EXPECT_FALSE(parsed->has_value());

  // The default limit (64 MiB) applies too.
  tern::net::store_big_endian(header.data(), 4, (64u << 20) + 1);
  parsed = tern::net::parse_frame(header, FrameFormat{});
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), std::errc::message_size);
}

TEST(ParseFrame, EveryLengthWidthAndOffset) {
  for (std::size_t width : {1u, 2u, 4u, 8u}) {
    // A header with a type byte, then the length, then a flags byte.
    FrameFormat format;
    format.header_size = width + 2;
    format.length_offset = 1;
    format.length_width = width;
    format.max_body = 1000;
    const std::size_t body_size = width == 1 ? 200 : 300;  // 300 needs two bytes
    std::vector<std::byte> bytes(format.header_size + body_size + 3, std::byte{0x5a});
    bytes[0] = std::byte{0x01};
    tern::net::store_big_endian(bytes.data() + 1, width, body_size);
    bytes[width + 1] = std::byte{0xff};
    tern::Result<std::optional<Frame>> parsed = tern::net::parse_frame(bytes, format);
    ASSERT_TRUE(parsed) << width;
    ASSERT_TRUE(parsed->has_value()) << width;
    EXPECT_EQ((*parsed)->header.size(), width + 2) << width;
    EXPECT_EQ((*parsed)->body.size(), body_size) << width;
    EXPECT_EQ((*parsed)->body.data(), bytes.data() + width + 2) << width;

    // One byte short of the body: incomplete.
    parsed =
        tern::net::parse_frame(std::span(bytes).first(format.header_size + body_size - 1), format);
    ASSERT_TRUE(parsed) << width;
    EXPECT_FALSE(parsed->has_value()) << width;

    // The largest value the field holds is over the limit (for widths that can exceed it).
    if (width > 1) {
      tern::net::store_big_endian(bytes.data() + 1, width, ~0ull);
      parsed = tern::net::parse_frame(bytes, format);
      ASSERT_FALSE(parsed) << width;
      EXPECT_EQ(parsed.error(), std::errc::message_size) << width;
    }
  }
  // An 8-byte length with the top bit set is a length, not a negative number.
  FrameFormat format;
  format.header_size = 8;
  format.length_width = 8;
  std::array<std::byte, 8> header{};
  tern::net::store_big_endian(header.data(), 8, 1ull << 63);
  tern::Result<std::optional<Frame>> parsed = tern::net::parse_frame(header, format);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), std::errc::message_size);
}

TEST(ParseFrameDeathTest, LengthFieldOutsideTheHeaderIsAContractViolation) {
  // Checked before any byte is read: a length field past the header would be read out of
  // bounds of a buffer holding just the header.
  std::vector<std::byte> header(2);
  FrameFormat past_the_header;
  past_the_header.header_size = 2;
  past_the_header.length_width = 4;
  EXPECT_DEATH((void)tern::net::parse_frame(header, past_the_header), "within the header");
  FrameFormat too_wide;
  too_wide.header_size = 16;
  too_wide.length_width = 9;
  EXPECT_DEATH((void)tern::net::parse_frame(header, too_wide), "1 to 8 bytes");
  FrameFormat no_width;
  no_width.length_width = 0;
  EXPECT_DEATH((void)tern::net::parse_frame(header, no_width), "1 to 8 bytes");
}

TEST(WriteFrame, PeerParsesFramesOverLoopback) {
  struct Seen {
    std::vector<std::size_t> sizes;
    bool intact = true;
  } seen;
  const int frames = tern_test::scaled(40);
  run_on(1, [&] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    tern::Fiber reader = tern::spawn([&] {
      Buffer buffer(1024);
      const FrameFormat format;
      for (;;) {
        tern::Result<std::optional<Frame>> parsed =
            tern::net::parse_frame(buffer.readable(), format);
        ASSERT_TRUE(parsed) << parsed.error().message();
        if (parsed->has_value()) {
          const Frame& frame = **parsed;
          const std::size_t index = seen.sizes.size();
          for (std::size_t i = 0; i < frame.body.size(); ++i)
            if (frame.body[i] != static_cast<std::byte>((index + i) & 0xff)) seen.intact = false;
          seen.sizes.push_back(frame.body.size());
          buffer.consume(frame.size());
          continue;
        }
        tern::Result<std::size_t> n = buffer.read_from(pair->server, patience());
        ASSERT_TRUE(n) << n.error().message();
        if (*n == 0) break;
      }
      EXPECT_TRUE(buffer.empty());
    });
    for (int i = 0; i < frames; ++i) {
      // Sizes from empty to 1 MiB (bigger than any socket buffer: several writes).
      const std::size_t size =
          i == 0 ? 0 : (std::size_t{1} << (i % 21)) + static_cast<std::size_t>(i);
      std::vector<std::byte> body(size);
      for (std::size_t j = 0; j < size; ++j) body[j] = static_cast<std::byte>((i + j) & 0xff);
      std::array<std::byte, 4> header;
      tern::net::store_big_endian(header.data(), 4, size);
      tern::Result<void> written = tern::net::write_frame(pair->client, header, body, patience());
      if (!written) {
        ADD_FAILURE() << written.error().message();
        break;
      }
    }
    EXPECT_TRUE(pair->client.shutdown(SHUT_WR));
    reader.join();
  });
  ASSERT_EQ(seen.sizes.size(), static_cast<std::size_t>(frames));
  EXPECT_EQ(seen.sizes[0], 0u);
  if (frames > 20) {
    EXPECT_EQ(seen.sizes[20], (std::size_t{1} << 20) + 20);
  }
  EXPECT_TRUE(seen.intact);
}

TEST(WriteFrame, HeaderAndBodyGoInOneGatherWrite) {
  // A SOCK_SEQPACKET pair keeps each sendmsg as one record, so one receive of the whole frame
  // shows that header and body went out in a single system call.
  run_on(1, [] {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    tern::net::TcpStream writer{tern::net::Socket(fds[0])};
    tern::net::TcpStream reader{tern::net::Socket(fds[1])};
    const std::string header = frame4("payload!").substr(0, 4);
    tern::Result<void> written =
        tern::net::write_frame(writer, bytes_of(header), bytes_of("payload!"), patience());
    ASSERT_TRUE(written) << written.error().message();
    tern::Result<void> second =
        tern::net::write_frame(writer, bytes_of(frame4("").substr(0, 4)), {}, patience());
    ASSERT_TRUE(second) << second.error().message();
    std::array<std::byte, 64> buf;
    tern::Result<std::size_t> n = reader.read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    ASSERT_EQ(*n, 12u) << "header and body arrived in separate records";
    EXPECT_EQ(text_of(std::span(buf).first(*n)), frame4("payload!"));
    n = reader.read(buf, patience());  // the empty body: a header-only record
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 4u);
  });
}

TEST(BufferReadFrom, ReadsIntoFreeSpaceAndReportsEndOfStream) {
  run_on(1, [] {
    tern::Result<tern_test::Connected> pair = tern_test::connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    ASSERT_TRUE(pair->client.write_all(bytes_of("abc"), patience()));
    Buffer buffer(2);  // too small: read_from makes room for at_least bytes first
    std::string got;
    while (got.size() < 3) {
      tern::Result<std::size_t> n = buffer.read_from(pair->server, patience(), 16);
      ASSERT_TRUE(n) << n.error().message();
      ASSERT_GT(*n, 0u);
      got = text_of(buffer.readable());
    }
    EXPECT_EQ(got, "abc");
    EXPECT_GE(buffer.writable().size(), 13u);
    ASSERT_TRUE(pair->client.shutdown(SHUT_WR));
    tern::Result<std::size_t> end = buffer.read_from(pair->server, patience());
    ASSERT_TRUE(end) << end.error().message();
    EXPECT_EQ(*end, 0u);
    EXPECT_EQ(text_of(buffer.readable()), "abc");
  });
}

}  // namespace
