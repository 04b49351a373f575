// tern-echo end to end: the real binary on a kernel-chosen port, every mode, under the backend
// named by TERN_IO; stopped with SIGTERM.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../tools/common/header16.h"
#include "tern/fiber/runtime.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_stream.h"
#include "tern_bench_process.h"

namespace {

using namespace std::chrono_literals;
using tern::net::TcpStream;

// The command line of a tern-echo on a kernel-chosen port with 2 workers, under TERN_IO's
// backend unless args name one.
std::vector<std::string> echo_command(std::vector<std::string> args) {
  const char* backend = std::getenv("TERN_IO");
  bool has_io = false;
  for (const std::string& a : args) has_io = has_io || a.starts_with("--io");
  if (!has_io) args.insert(args.begin(), {"--io", backend != nullptr ? backend : "auto"});
  args.insert(args.begin(), {TERN_ECHO_BINARY, "--port", "0", "--threads", "2"});
  return args;
}

// A running tern-echo process; SIGTERM and reaped on destruction.
class EchoServer : public tern::test::ServerProcess {
 public:
  explicit EchoServer(std::vector<std::string> args)
      : ServerProcess(echo_command(std::move(args))) {}
};

// Runs fn(stream) on a one-worker runtime connected to the server.
template <typename Fn>
void with_connection(const EchoServer& server, Fn&& fn) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    tern::Result<TcpStream> stream =
        TcpStream::connect(tern::net::Address::loopback(static_cast<std::uint16_t>(server.port())),
                           tern::deadline_after(30s));
    ASSERT_TRUE(stream) << stream.error().message();
    fn(*stream);
  });
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s)); }

TEST(TernEcho, EchoModeEchoesAndStopsCleanly) {
  EchoServer server({"--mode", "echo"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  with_connection(server, [](TcpStream& stream) {
    std::string payload(100000, 'x');
    for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>('a' + i % 26);
    ASSERT_TRUE(stream.write_all(bytes_of(payload), tern::deadline_after(30s)));
    std::string reply(payload.size(), '\0');
    ASSERT_TRUE(
        stream.read_exact(std::as_writable_bytes(std::span(reply)), tern::deadline_after(30s)));
    EXPECT_EQ(reply, payload);
  });
  EXPECT_EQ(server.stop(), 0);
  EXPECT_NE(server.last_line().find("stopped; 1 connections served"), std::string::npos)
      << server.last_line();
}

TEST(TernEcho, DiscardModeSendsNothingBack) {
  EchoServer server({"--discard"});
  ASSERT_GT(server.port(), 0);
  with_connection(server, [](TcpStream& stream) {
    ASSERT_TRUE(stream.write_all(bytes_of(std::string(50000, 'd'))));
    std::array<std::byte, 16> buf;
    tern::Result<std::size_t> n = stream.read(buf, tern::deadline_after(100ms));
    ASSERT_FALSE(n);
    EXPECT_EQ(n.error(), std::errc::timed_out);
  });
  EXPECT_EQ(server.stop(), 0);
}

TEST(TernEcho, Frame16AnswersEchoCommandsAndClosesOnBadHeaders) {
  EchoServer server({"--mode", "frame16", "--max-payload", "4096"});
  ASSERT_GT(server.port(), 0);
  with_connection(server, [](TcpStream& stream) {
    // Three pipelined messages: echo, discard, echo.
    std::vector<std::byte> out;
    const std::uint16_t commands[] = {1, 2, 1};
    for (std::uint32_t syn = 0; syn < 3; ++syn) {
      tern::tools::Header16 header{.len = 5, .cmd = commands[syn], .syn = 100 + syn};
      std::array<std::byte, 16> raw;
      header.store(raw);
      out.insert(out.end(), raw.begin(), raw.end());
      for (char c : std::string("hello")) out.push_back(static_cast<std::byte>(c));
    }
    ASSERT_TRUE(stream.write_all(out));
    for (std::uint32_t expected_ack : {100u, 102u}) {
      std::array<std::byte, 21> reply;
      ASSERT_TRUE(stream.read_exact(reply, tern::deadline_after(30s)));
      const tern::tools::Header16 header = tern::tools::Header16::load(reply);
      // The reply is the request with ack = syn: every other field comes back unchanged.
      EXPECT_EQ(header.ack, expected_ack);
      EXPECT_EQ(header.syn, expected_ack);
      EXPECT_EQ(header.cmd, 1u);
      EXPECT_EQ(header.ver, tern::tools::kHeader16Version);
      EXPECT_EQ(header.len, 5u);
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply.data() + 16), 5), "hello");
    }
    // An oversized payload closes this connection.
    tern::tools::Header16 huge{.len = 1 << 20, .cmd = 1, .syn = 7};
    std::array<std::byte, 16> raw;
    huge.store(raw);
    ASSERT_TRUE(stream.write_all(raw));
    std::array<std::byte, 16> buf;
    tern::Result<std::size_t> n = stream.read(buf, tern::deadline_after(30s));
    EXPECT_TRUE(!n || *n == 0) << "the server closes a connection that sends an oversized frame";
  });
  // The server still serves new connections.
  with_connection(server, [](TcpStream& stream) {
    tern::tools::Header16 header{.len = 0, .cmd = 1, .syn = 9};
    std::array<std::byte, 16> raw;
    header.store(raw);
    ASSERT_TRUE(stream.write_all(raw));
    ASSERT_TRUE(stream.read_exact(raw, tern::deadline_after(30s)));
    EXPECT_EQ(tern::tools::Header16::load(raw).ack, 9u);
  });
  EXPECT_EQ(server.stop(), 0);
}

// The header of a frame16 message followed by its payload.
std::vector<std::byte> frame16_message(std::uint16_t cmd, std::uint32_t syn,
                                       const std::string& payload) {
  tern::tools::Header16 header{
      .len = static_cast<std::uint32_t>(payload.size()), .cmd = cmd, .syn = syn};
  std::vector<std::byte> out(tern::tools::kHeader16Size);
  header.store(std::span<std::byte, 16>(out.data(), 16));
  for (char c : payload) out.push_back(static_cast<std::byte>(c));
  return out;
}

// Messages cut at every kind of boundary: a reply streams back as its pieces arrive, a header
// waits until it is whole, a discarded payload in pieces sends nothing.
TEST(TernEcho, Frame16StreamsRepliesOfMessagesThatArriveInPieces) {
  EchoServer server({"--mode", "frame16"});
  ASSERT_GT(server.port(), 0);
  with_connection(server, [](TcpStream& stream) {
    const auto send = [&](std::span<const std::byte> bytes) {
      ASSERT_TRUE(stream.write_all(bytes, tern::deadline_after(30s)));
    };
    const auto receive = [&](std::size_t size) {
      std::vector<std::byte> got(size);
      EXPECT_TRUE(stream.read_exact(got, tern::deadline_after(30s)));
      return got;
    };
    // An echo message whose payload comes in two pieces: the header and the first piece come
    // back before the rest is sent.
    const std::vector<std::byte> first = frame16_message(1, 41, "abcdefgh");
    send(std::span(first).first(16 + 3));
    const std::vector<std::byte> head = receive(16 + 3);
    EXPECT_EQ(tern::tools::Header16::load(head).ack, 41u);
    EXPECT_EQ(tern::tools::Header16::load(head).syn, 41u);
    EXPECT_TRUE(std::equal(head.begin() + 16, head.end(), first.begin() + 16));
    send(std::span(first).subspan(16 + 3));
    const std::vector<std::byte> tail = receive(5);
    EXPECT_TRUE(std::equal(tail.begin(), tail.end(), first.begin() + 16 + 3));

    // A discard message in pieces, then an echo message whose header is cut after 10 bytes: only
    // the echo reply comes back, and whole.
    const std::vector<std::byte> dropped = frame16_message(2, 42, "not for you");
    const std::vector<std::byte> second = frame16_message(1, 43, "xyz");
    send(std::span(dropped).first(16 + 4));
    send(std::span(dropped).subspan(16 + 4));
    send(std::span(second).first(10));
    send(std::span(second).subspan(10));
    const std::vector<std::byte> reply = receive(second.size());
    const tern::tools::Header16 header = tern::tools::Header16::load(reply);
    EXPECT_EQ(header.ack, 43u);
    EXPECT_EQ(header.len, 3u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply.data() + 16), 3), "xyz");

    // Many messages in one write, more than the server's buffer holds: every reply comes back
    // in order with its own ack, the discarded ones left out.
    std::vector<std::byte> burst;
    std::vector<std::uint32_t> echoed;
    for (std::uint32_t syn = 1000; syn < 1400; ++syn) {
      const bool echo = syn % 3 != 0;
      const std::vector<std::byte> message =
          frame16_message(echo ? 1 : 2, syn, std::string(syn % 97, static_cast<char>(syn)));
      burst.insert(burst.end(), message.begin(), message.end());
      if (echo) echoed.push_back(syn);
    }
    send(burst);
    for (std::uint32_t syn : echoed) {
      const std::vector<std::byte> raw = receive(16);
      const tern::tools::Header16 got = tern::tools::Header16::load(raw);
      ASSERT_EQ(got.ack, syn);
      ASSERT_EQ(got.len, syn % 97);
      const std::vector<std::byte> payload = receive(got.len);
      ASSERT_TRUE(std::all_of(payload.begin(), payload.end(), [syn](std::byte b) {
        return b == static_cast<std::byte>(static_cast<char>(syn));
      }));
    }
  });
  EXPECT_EQ(server.stop(), 0);
}

TEST(TernEcho, Frame16SendsHeldRepliesWhenTheQueuedBytesBringNothingToAnswer) {
  // A small buffer, so that a burst takes many full reads: each reply but the last of a run is
  // held back (net::Flush::later) while more requests are queued. The burst ends in discard
  // messages longer than the buffer, whose reads answer nothing: the held replies must still go.
  EchoServer server({"--mode", "frame16", "--buf", "256"});
  ASSERT_GT(server.port(), 0);
  with_connection(server, [](TcpStream& stream) {
    for (int round = 0; round < 20; ++round) {
      std::vector<std::byte> burst;
      std::vector<std::uint32_t> echoed;
      for (std::uint32_t syn = 0; syn < 60; ++syn) {
        const std::uint32_t id = static_cast<std::uint32_t>(round) * 100 + syn;
        const std::vector<std::byte> message = frame16_message(1, id, std::string(40, 'e'));
        burst.insert(burst.end(), message.begin(), message.end());
        echoed.push_back(id);
      }
      for (int i = 0; i < 8; ++i) {
        const std::vector<std::byte> message = frame16_message(2, 9999, std::string(300, 'd'));
        burst.insert(burst.end(), message.begin(), message.end());
      }
      ASSERT_TRUE(stream.write_all(burst, tern::deadline_after(30s)));
      for (std::uint32_t id : echoed) {
        std::array<std::byte, 16 + 40> reply;
        ASSERT_TRUE(stream.read_exact(reply, tern::deadline_after(30s))) << "reply " << id;
        ASSERT_EQ(tern::tools::Header16::load(reply).ack, id);
      }
    }
  });
  EXPECT_EQ(server.stop(), 0);
}

TEST(TernEcho, TtcpModeAcknowledgesEveryMessage) {
  EchoServer server({"--mode", "ttcp"});
  ASSERT_GT(server.port(), 0);
  with_connection(server, [](TcpStream& stream) {
    std::vector<std::byte> message(4 + 1000, std::byte{0x5a});
    tern::net::store_big_endian(message.data(), 4, 1000);
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(stream.write_all(message));
      std::array<std::byte, 4> ack;
      ASSERT_TRUE(stream.read_exact(ack, tern::deadline_after(30s)));
      ASSERT_EQ(tern::net::load_big_endian(ack.data(), 4), 1000u);
    }
  });
  EXPECT_EQ(server.stop(), 0);
}

// Round robin is the default; the listener-per-worker mode must serve as well.
TEST(TernEcho, ReusePortAcceptServesToo) {
  EchoServer server({"--accept", "reuseport"});
  ASSERT_GT(server.port(), 0);
  EXPECT_NE(server.first_line().find("reuseport"), std::string::npos);
  for (int i = 0; i < 4; ++i) {
    with_connection(server, [](TcpStream& stream) {
      ASSERT_TRUE(stream.write_all(bytes_of("ping")));
      std::string reply(4, '\0');
      ASSERT_TRUE(
          stream.read_exact(std::as_writable_bytes(std::span(reply)), tern::deadline_after(30s)));
      EXPECT_EQ(reply, "ping");
    });
  }
  EXPECT_EQ(server.stop(), 0);
}

// --stack-mode shared: connection fibers on the workers' shared stacks, and echo's lean read
// buffer (given back between bursts); bursts of several sizes, some larger than --buf.
TEST(TernEcho, SharedStackModeEchoesBursts) {
  EchoServer server({"--stack-mode", "shared", "--buf", "4096"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  for (int connection = 0; connection < 3; ++connection) {
    with_connection(server, [](TcpStream& stream) {
      for (const std::size_t size : {1, 100, 4096, 10000, 3}) {
        std::string payload(size, 'x');
        for (std::size_t i = 0; i < size; ++i) payload[i] = static_cast<char>('a' + i % 26);
        ASSERT_TRUE(stream.write_all(bytes_of(payload), tern::deadline_after(30s)));
        std::string reply(size, '\0');
        ASSERT_TRUE(
            stream.read_exact(std::as_writable_bytes(std::span(reply)), tern::deadline_after(30s)));
        EXPECT_EQ(reply, payload);
      }
    });
  }
  EXPECT_EQ(server.stop(), 0);
}

TEST(TernEcho, RejectsBadOptionsWithAMessage) {
  for (const char* bad : {"--mode=nonsense", "--io=kqueue", "--accept=random", "--threads=x",
                          "--no-such-option", "--stack-mode=tiny"}) {
    EchoServer server({bad});
    EXPECT_EQ(server.port(), 0);
    EXPECT_EQ(server.wait(), 2) << bad;
  }
}

}  // namespace
