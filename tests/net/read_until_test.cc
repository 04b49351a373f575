// Line reading: Buffer::find and take_line, and TcpStream::read_until over real loopback
// connections (run under both I/O backends): delimiters split across reads, several lines in
// one read, the length limit, the end of the stream in the middle of a line, the deadline.

#include <gtest/gtest.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "net_test_util.h"
#include "tern/base/result.h"
#include "tern/fiber/fiber.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace tern_test;
using tern::net::Buffer;

constexpr std::size_t kMaxLine = 1024;

// The line read_until found (without its delimiter), consumed from the buffer.
std::string take(Buffer& buffer, std::size_t end, std::string_view delim) {
  std::string line(buffer.text().substr(0, end - delim.size()));
  buffer.consume(end);
  return line;
}

void write_text(tern::net::TcpStream& stream, std::string_view text) {
  tern::Result<void> written = stream.write_all(bytes_of(text), patience());
  ASSERT_TRUE(written) << written.error().message();
}

TEST(BufferLines, FindReturnsTheOffsetPastTheDelimiter) {
  Buffer buffer;
  buffer.append(bytes_of("GET / HTTP/1.1\r\nHost: x\r\n\r\nbody"));
  EXPECT_EQ(buffer.find("\r\n"), 16u);
  EXPECT_EQ(buffer.find("\r\n", 16), 25u);
  EXPECT_EQ(buffer.find("\r\n\r\n"), 27u);
  EXPECT_EQ(buffer.find("\n\n"), std::nullopt);
  EXPECT_EQ(buffer.find("body", 100), std::nullopt);
  EXPECT_EQ(buffer.size(), 31u);  // find consumes nothing
}

TEST(BufferLines, TakeLineConsumesOneLineAndKeepsTheRest) {
  Buffer buffer;
  buffer.append(bytes_of("first\nsecond\nthird"));
  EXPECT_EQ(buffer.take_line(), "first");
  EXPECT_EQ(buffer.take_line(), "second");
  EXPECT_EQ(buffer.take_line(), std::nullopt);  // no delimiter yet: nothing taken
  EXPECT_EQ(buffer.text(), "third");
  buffer.append(bytes_of("\r\n\r\n"));
  EXPECT_EQ(buffer.take_line("\r\n"), "third");
  EXPECT_EQ(buffer.take_line("\r\n"), "");  // an empty line
  EXPECT_TRUE(buffer.empty());
}

TEST(ReadUntil, ADelimiterSplitAcrossReadsIsFound) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    Buffer buffer;
    tern::Result<std::size_t> got;
    bool returned = false;
    tern::Fiber reader = tern::spawn([&] {
      got = pair->server.read_until(buffer, "\r\n", kMaxLine, patience());
      returned = true;
    });
    // The first piece ends inside the delimiter; the reader has read it (it is in the buffer)
    // and still waits before the rest is sent.
    write_text(pair->client, "hello\r");
    ASSERT_TRUE(wait_for_condition([&] { return buffer.size() == 6; }));
    EXPECT_FALSE(returned);
    write_text(pair->client, "\nworld");
    reader.join();
    ASSERT_TRUE(got) << got.error().message();
    EXPECT_EQ(*got, 7u);
    EXPECT_EQ(take(buffer, *got, "\r\n"), "hello");
    EXPECT_EQ(buffer.text(), "world");  // what came after the delimiter stays for the next call
  });
}

TEST(ReadUntil, ALineStartedInTheBufferEndsInANewRead) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    Buffer buffer;
    buffer.append(bytes_of("key: va\r"));  // left over from an earlier call
    write_text(pair->client, "\nnext\r\n");
    tern::Result<std::size_t> first = pair->server.read_until(buffer, "\r\n", kMaxLine, patience());
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(take(buffer, *first, "\r\n"), "key: va");
    tern::Result<std::size_t> second =
        pair->server.read_until(buffer, "\r\n", kMaxLine, patience());
    ASSERT_TRUE(second) << second.error().message();
    EXPECT_EQ(take(buffer, *second, "\r\n"), "next");
  });
}

TEST(ReadUntil, SeveralLinesInOneReadAreReturnedOneByOne) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    write_text(pair->client, "a\nbb\n\nccc\r\n");
    ASSERT_TRUE(pair->client.shutdown(SHUT_WR));  // nothing more: later lines come from the buffer
    Buffer buffer;
    std::string lines;
    for (;;) {
      tern::Result<std::size_t> end = pair->server.read_until(buffer, "\n", kMaxLine, patience());
      if (!end) {
        EXPECT_EQ(end.error(), tern::Errc::eof);
        break;
      }
      lines += "[" + take(buffer, *end, "\n") + "]";
    }
    EXPECT_EQ(lines, "[a][bb][][ccc\r]");
    EXPECT_TRUE(buffer.empty());  // a clean end: no partial line left
  });
}

TEST(ReadUntil, ALineLongerThanTheLimitIsAnError) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    constexpr std::size_t kLimit = 16;
    // Exactly the limit, delimiter included, is accepted.
    write_text(pair->client, std::string(kLimit - 1, 'x') + "\n");
    Buffer buffer;
    tern::Result<std::size_t> fits = pair->server.read_until(buffer, "\n", kLimit, patience());
    ASSERT_TRUE(fits) << fits.error().message();
    EXPECT_EQ(*fits, kLimit);
    buffer.consume(*fits);
    // One byte more, with the delimiter already in the buffer, is not.
    write_text(pair->client, std::string(kLimit, 'y') + "\n");
    while (!buffer.find("\n")) {
      tern::Result<std::size_t> n = buffer.read_from(pair->server, patience());
      ASSERT_TRUE(n && *n > 0);
    }
    tern::Result<std::size_t> over = pair->server.read_until(buffer, "\n", kLimit, patience());
    ASSERT_FALSE(over);
    EXPECT_EQ(over.error(), std::errc::message_size);
    EXPECT_EQ(over.error().message(), "read_until: no delimiter within 16 bytes: Message too long");
    buffer.clear();
    // A peer that never sends the delimiter: the call fails once the limit is read, without
    // waiting for more and without buffering what the peer keeps sending.
    tern::Fiber flood = tern::spawn([&] {
      std::string chunk(64 * 1024, 'z');
      for (int i = 0; i < 64; ++i) {
        if (!pair->client.write_all(bytes_of(chunk), patience())) return;  // the reader stopped
      }
    });
    tern::Result<std::size_t> endless = pair->server.read_until(buffer, "\n", 1000, patience());
    ASSERT_FALSE(endless);
    EXPECT_EQ(endless.error(), std::errc::message_size);
    EXPECT_GE(buffer.size(), 1000u);
    EXPECT_LT(buffer.size(), 1000u + 64 * 1024);  // at most one read past the limit
    pair->server.close();
    flood.join();
  });
}

TEST(ReadUntil, TheEndOfTheStreamInTheMiddleOfALineIsEof) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    write_text(pair->client, "complete\npartial");
    pair->client.close();
    Buffer buffer;
    tern::Result<std::size_t> first = pair->server.read_until(buffer, "\n", kMaxLine, patience());
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(take(buffer, *first, "\n"), "complete");
    tern::Result<std::size_t> second = pair->server.read_until(buffer, "\n", kMaxLine, patience());
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error(), tern::Errc::eof);
    EXPECT_EQ(buffer.text(), "partial");  // the partial line is left to the caller
  });
}

TEST(ReadUntil, ThePassedDeadlineReadsAsADeadline) {
  run_on(1, [] {
    tern::Result<Connected> pair = connect_loopback();
    ASSERT_TRUE(pair) << pair.error().message();
    write_text(pair->client, "no end yet");
    Buffer buffer;
    tern::Result<std::size_t> got =
        pair->server.read_until(buffer, "\n", kMaxLine, tern::deadline_after(20ms));
    ASSERT_FALSE(got);
    EXPECT_EQ(got.error(), std::errc::timed_out);
    EXPECT_EQ(got.error().message(), "deadline exceeded");
    // What arrived is kept: the line completes on a later call.
    write_text(pair->client, "\n");
    tern::Result<std::size_t> later = pair->server.read_until(buffer, "\n", kMaxLine, patience());
    ASSERT_TRUE(later) << later.error().message();
    EXPECT_EQ(take(buffer, *later, "\n"), "no end yet");
  });
}

}  // namespace
