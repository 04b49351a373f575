// The one-reader-one-writer rule of TcpStream over real loopback connections (run under both I/O
// backends): on each end of a connection a reader fiber and a writer fiber share the one stream
// and move megabytes both ways at once, every byte checked.

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "net_test_util.h"
#include "tern/base/result.h"
#include "tern/fiber/fiber.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace tern_test;

// Many times what the kernel buffers of both sides hold (their sizes are set small below), so
// each writer parks on a full socket while its reader runs: neither end could finish if its
// reads and writes took turns.
constexpr std::size_t kBytesEachWay = 4u << 20;
constexpr int kSocketBuffer = 64 * 1024;

// What a writer sent and what a reader received: the same stream gives the same size and hash.
struct Tally {
  Fnv64 sent;
  Fnv64 received;
  bool writer_ok = false;
  bool reader_ok = false;
};

// Writes kBytesEachWay of a pattern seeded by `seed` in uneven pieces, then half-closes.
void write_pattern(tern::net::TcpStream& stream, std::uint64_t seed, Fnv64& sent, bool& ok) {
  std::vector<std::byte> chunk(40'000);
  std::size_t left = kBytesEachWay;
  std::size_t piece = 1;
  while (left > 0) {
    piece = piece * 7 % chunk.size() + 1;  // 8, 57, 400, ...: varied sizes
    const std::size_t n = piece < left ? piece : left;
    std::span<std::byte> bytes = std::span(chunk).first(n);
    fill_pattern(bytes, seed);
    tern::Result<void> written = stream.write_all(bytes, patience());
    if (!written) {
      ADD_FAILURE() << "write: " << written.error().message();
      return;
    }
    sent.update(bytes);
    left -= n;
  }
  tern::Result<void> closed = stream.shutdown(SHUT_WR);  // the writer's half-close, reader busy
  ASSERT_TRUE(closed) << closed.error().message();
  ok = true;
}

// Reads until the peer's half-close, hashing what arrives.
void read_all(tern::net::TcpStream& stream, Fnv64& received, bool& ok) {
  std::vector<std::byte> buf(32 * 1024);
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf, patience());
    if (!n) {
      ADD_FAILURE() << "read: " << n.error().message();
      return;
    }
    if (*n == 0) break;
    received.update(std::span(buf).first(*n));
  }
  ok = true;
}

// A reader and a writer fiber on one stream; returns once both are done.
void full_duplex(tern::net::TcpStream& stream, std::uint64_t seed, Tally& tally) {
  ASSERT_TRUE(stream.set_send_buffer(kSocketBuffer));
  ASSERT_TRUE(stream.set_receive_buffer(kSocketBuffer));
  tern::Fiber writer = tern::spawn(
      [&] { write_pattern(stream, seed, tally.sent, tally.writer_ok); }, {.name = "duplex-writer"});
  tern::Fiber reader = tern::spawn([&] { read_all(stream, tally.received, tally.reader_ok); },
                                   {.name = "duplex-reader"});
  writer.join();
  reader.join();
}

TEST(TcpDuplex, AReaderAndAWriterFiberShareEachEndOfAConnection) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    Tally client;
    Tally server;
    tern::Fiber server_side = tern::spawn([&] { full_duplex(pair->server, 0x5eed1, server); });
    full_duplex(pair->client, 0x5eed2, client);
    server_side.join();
    ASSERT_TRUE(client.writer_ok && client.reader_ok && server.writer_ok && server.reader_ok);
    // Every byte each writer sent arrived at the other end, in order, exactly once.
    EXPECT_EQ(client.sent.size(), kBytesEachWay);
    EXPECT_EQ(server.received.size(), client.sent.size());
    EXPECT_EQ(server.received.value(), client.sent.value());
    EXPECT_EQ(server.sent.size(), kBytesEachWay);
    EXPECT_EQ(client.received.size(), server.sent.size());
    EXPECT_EQ(client.received.value(), server.sent.value());
    // The two directions carried different data (a crossed stream would not be caught otherwise).
    EXPECT_NE(client.sent.value(), server.sent.value());
  });
}

}  // namespace
