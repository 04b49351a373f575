// tern-echo end to end: the real binary on a kernel-chosen port, every mode, under the backend
// named by TERN_IO; stopped with SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../../tools/common/header16.h"
#include "tern/fiber/runtime.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;
using tern::net::TcpStream;

// A running tern-echo process; SIGTERM and reaped on destruction.
class EchoServer {
 public:
  explicit EchoServer(std::vector<std::string> args) {
    const char* backend = std::getenv("TERN_IO");
    bool has_io = false;
    for (const std::string& a : args) has_io = has_io || a.starts_with("--io");
    if (!has_io) args.insert(args.begin(), {"--io", backend != nullptr ? backend : "auto"});
    args.insert(args.begin(), {TERN_ECHO_BINARY, "--port", "0", "--threads", "2"});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    EXPECT_EQ(::posix_spawn(&pid_, TERN_ECHO_BINARY, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    output_ = ::fdopen(out[0], "r");
    char line[256] = {};
    // "tern-echo: listening on 127.0.0.1:PORT (...)"
    if (std::fgets(line, sizeof line, output_) != nullptr) {
      first_line_ = line;
      const std::size_t colon = first_line_.find("127.0.0.1:");
      if (colon != std::string::npos) port_ = std::atoi(first_line_.c_str() + colon + 10);
    }
  }
  ~EchoServer() { stop(); }

  // Sends SIGTERM and returns the exit status (0: a clean shutdown).
  int stop() { return reap(true); }
  // Waits for the process to exit by itself and returns its exit status.
  int wait() { return reap(false); }

 private:
  int reap(bool terminate) {
    if (pid_ <= 0) return exit_status_;
    if (terminate) ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
    char line[256];
    while (std::fgets(line, sizeof line, output_) != nullptr) last_line_ = line;
    std::fclose(output_);
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_status_;
  }

 public:
  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }
  const std::string& last_line() const { return last_line_; }

 private:
  pid_t pid_ = 0;
  FILE* output_ = nullptr;
  int port_ = 0;
  int exit_status_ = -1;
  std::string first_line_;
  std::string last_line_;
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
      EXPECT_EQ(header.ack, expected_ack);
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

TEST(TernEcho, RoundRobinAcceptServesToo) {
  EchoServer server({"--accept", "roundrobin"});
  ASSERT_GT(server.port(), 0);
  EXPECT_NE(server.first_line().find("roundrobin"), std::string::npos);
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

TEST(TernEcho, RejectsBadOptionsWithAMessage) {
  for (const char* bad :
       {"--mode=nonsense", "--io=kqueue", "--accept=random", "--threads=x", "--no-such-option"}) {
    EchoServer server({bad});
    EXPECT_EQ(server.port(), 0);
    EXPECT_EQ(server.wait(), 2) << bad;
  }
}

}  // namespace
