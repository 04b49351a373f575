// tern-echo against peers that try to make it hold memory or stall: ttcp lengths with no payload,
// a client trickling a byte at a time, and a thousand bad frame16 connections while its stderr is
// a full pipe nobody reads. The real binary on a kernel-chosen port, under TERN_IO's backend.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../../tools/common/header16.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_stream.h"
#include "tern_bench_process.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpStream;

std::vector<std::string> echo_command(std::vector<std::string> args) {
  const char* backend = std::getenv("TERN_IO");
  args.insert(args.begin(),
              {TERN_ECHO_BINARY, "--port", "0", "--io", backend != nullptr ? backend : "auto"});
  return args;
}

class EchoServer : public tern::test::ServerProcess {
 public:
  explicit EchoServer(std::vector<std::string> args)
      : ServerProcess(echo_command(std::move(args))) {}
};

// The resident set of a process, in KiB (0 if it cannot be read).
std::uint64_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmRSS:")) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

Address server_address(int port) { return Address::loopback(static_cast<std::uint16_t>(port)); }

template <typename Fn>
void on_runtime(Fn&& fn) {
  tern::Runtime runtime({.workers = 1});
  runtime.run(std::forward<Fn>(fn));
}

// Whether the server ended the connection (end of stream or a reset) before the deadline.
bool closed_by_server(TcpStream& stream, tern::Deadline deadline) {
  std::array<std::byte, 256> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf, deadline);
    if (!n) return n.error() != std::errc::timed_out;
    if (*n == 0) return true;
  }
}

// One ttcp message of `size` bytes, answered by its 4-byte length.
bool ttcp_exchange(TcpStream& stream, std::uint32_t size) {
  const tern::Deadline deadline = tern::deadline_after(30s);
  std::array<std::byte, 4> length;
  tern::net::store_big_endian(length.data(), 4, size);
  const std::vector<std::byte> payload(size, std::byte{'p'});
  std::array<std::byte, 4> ack;
  return stream.write_all(length, deadline) && stream.write_all(payload, deadline) &&
         stream.read_exact(ack, deadline) && ack == length;
}

TEST(TernEchoLimits, TtcpLengthsWithoutPayloadHoldLittleMemory) {
  EchoServer server({"--mode", "ttcp", "--threads", "1"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  on_runtime([&] {
    std::vector<TcpStream> holders;
    // Warm the server up with one whole message, then measure.
    {
      tern::Result<TcpStream> first = TcpStream::connect(server_address(server.port()));
      ASSERT_TRUE(first);
      ASSERT_TRUE(ttcp_exchange(*first, 1000));
    }
    const std::uint64_t before = rss_kib(server.pid());
    ASSERT_GT(before, 0u);
    // 20 connections announce the largest payload the default --max-payload allows (64 MiB)
    // and send none of it.
    for (int i = 0; i < 20; ++i) {
      tern::Result<TcpStream> stream = TcpStream::connect(server_address(server.port()));
      ASSERT_TRUE(stream);
      std::array<std::byte, 4> length;
      tern::net::store_big_endian(length.data(), 4, (64u << 20) - 1);
      ASSERT_TRUE(stream->write_all(length));
      holders.push_back(std::move(*stream));
    }
    // A later whole message is answered: the single worker has taken the 20 lengths before.
    tern::Result<TcpStream> last = TcpStream::connect(server_address(server.port()));
    ASSERT_TRUE(last);
    ASSERT_TRUE(ttcp_exchange(*last, 1000));
    const std::uint64_t after = rss_kib(server.pid());
    // Before the fix every length was allocated and zero-filled up front: 1.28 GiB, and any one
    // of them alone 64 MiB. Now each holds its 16 KiB read buffer and its fiber's stack (a
    // Debug build grew about 160 KiB in all; sanitizers shadow the stacks, ThreadSanitizer about
    // 1 MiB a connection), so the bound is less than what one announced payload would take.
    EXPECT_LT(after - std::min(after, before), 64u * 1024)
        << before << " KiB before, " << after << " KiB after";
    // The 20 are still served: the rest of a payload gets its ack.
    std::vector<std::byte> rest(1 << 20, std::byte{'r'});
    std::uint64_t left = (64u << 20) - 1;
    while (left > 0) {
      const std::size_t piece = std::min<std::uint64_t>(left, rest.size());
      ASSERT_TRUE(holders[0].write_all(std::span(rest).first(piece), tern::deadline_after(30s)));
      left -= piece;
    }
    std::array<std::byte, 4> ack;
    ASSERT_TRUE(holders[0].read_exact(ack, tern::deadline_after(30s)));
    EXPECT_EQ(tern::net::load_big_endian(ack.data(), 4), (64u << 20) - 1);
  });
  EXPECT_EQ(server.stop(), 0);
}

TEST(TernEchoLimits, ATricklerIsCutAndAWholeMessageClientIsNot) {
  EchoServer server({"--mode", "echo", "--progress-interval", "200", "--threads", "1"});
  ASSERT_GT(server.port(), 0) << server.first_line();
  on_runtime([&] {
    tern::Result<TcpStream> trickler = TcpStream::connect(server_address(server.port()));
    ASSERT_TRUE(trickler);
    tern::Result<TcpStream> normal = TcpStream::connect(server_address(server.port()));
    ASSERT_TRUE(normal);
    // A byte every 20 ms, each echoed: about 20 bytes moved per 200 ms, under the default 64.
    const tern::Deadline deadline = tern::deadline_after(30s);
    const std::byte one{'t'};
    std::array<std::byte, 1> echoed;
    bool cut = false;
    while (!cut && tern::Clock::now() < deadline) {
      if (!trickler->write_all(std::span(&one, 1), deadline)) break;
      tern::Result<std::size_t> n = trickler->read(echoed, deadline);
      if (!n || *n == 0) break;
      (void)tern::this_fiber::sleep_for(20ms);
      // Meanwhile the other client sends whole 512-byte messages.
      const std::string message(512, 'n');
      std::string reply(message.size(), '\0');
      ASSERT_TRUE(normal->write_all(std::as_bytes(std::span(message)), deadline));
      ASSERT_TRUE(normal->read_exact(std::as_writable_bytes(std::span(reply)), deadline));
      ASSERT_EQ(reply, message);
    }
    EXPECT_TRUE(closed_by_server(*trickler, deadline)) << "the trickler was not cut";
    const std::string message(512, 'z');
    std::string reply(message.size(), '\0');
    ASSERT_TRUE(normal->write_all(std::as_bytes(std::span(message)), deadline));
    ASSERT_TRUE(normal->read_exact(std::as_writable_bytes(std::span(reply)), deadline));
    EXPECT_EQ(reply, message);
  });
  EXPECT_EQ(server.stop(), 0);
  EXPECT_NE(server.last_line().find(" 1 too slow"), std::string::npos) << server.last_line();
}

TEST(TernEchoLimits, HelpStatesTheDefaults) {
  const tern::test::ToolRun run = tern::test::run_tool({TERN_ECHO_BINARY, "--help"});
  ASSERT_EQ(run.status, 0) << run.err;
  for (const char* expected :
       {"--idle-timeout UINT=300000", "--min-progress UINT=64", "--max-payload UINT=67108864"})
    EXPECT_NE(run.out.find(expected), std::string::npos) << expected << "\n" << run.out;
  EXPECT_NE(run.out.find("=10000"), std::string::npos) << run.out;  // --progress-interval
}

// tern-echo with stderr on a FIFO that is full and that nobody reads: every write(2) to it would
// wait forever. Drained and stopped on destruction.
class StuckStderrEcho {
 public:
  StuckStderrEcho() {
    char dir[] = "/tmp/tern_echo_stuck_XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    fifo_ = dir_ + "/stderr";
    if (::mkfifo(fifo_.c_str(), 0600) != 0) return;
    // Held open for reading (and writing) here, so the server's open does not wait for a
    // reader; filled to the brim.
    holder_ = ::open(fifo_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (holder_ < 0) return;
    const std::string chunk(4096, 'x');
    while (::write(holder_, chunk.data(), chunk.size()) > 0) {
    }
    int out = -1;
    pid_ = tern::test::spawn_with_pipe(echo_command({"--mode", "frame16", "--threads", "1"}), &out,
                                       fifo_);
    if (pid_ < 0) return;
    out_ = out;
    const std::string line = first_line();
    const std::size_t at = line.find("127.0.0.1:");
    if (at != std::string::npos) port_ = std::atoi(line.c_str() + at + 10);
  }
  ~StuckStderrEcho() {
    std::atomic<bool> done{false};
    std::thread drain([&] {
      char buf[65536];
      while (!done.load()) {
        pollfd p = {holder_, POLLIN, 0};
        if (::poll(&p, 1, 10) > 0) (void)!::read(holder_, buf, sizeof buf);
      }
    });
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      if (!tern::test::wait_exit(pid_, 60s)) ::kill(pid_, SIGKILL);
      tern::test::reap(pid_);
    }
    done = true;
    drain.join();
    if (out_ >= 0) ::close(out_);
    if (holder_ >= 0) ::close(holder_);
    if (!fifo_.empty()) ::unlink(fifo_.c_str());
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  int port() const { return port_; }
  // Bytes waiting in the FIFO (the server wrote nothing if it is still exactly full).
  bool fifo_still_full() const {
    const char byte = 'y';
    return ::write(holder_, &byte, 1) < 0;
  }

 private:
  std::string first_line() {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    char c;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p = {out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      if (::read(out_, &c, 1) != 1 || c == '\n') break;
      line.push_back(c);
    }
    return line;
  }

  std::string dir_;
  std::string fifo_;
  int holder_ = -1;
  int out_ = -1;
  pid_t pid_ = -1;
  int port_ = 0;
};

// A frame16 echo of one empty message; whether the ack came back.
bool frame16_round_trip(TcpStream& stream, std::uint32_t syn, tern::Deadline deadline) {
  tern::tools::Header16 header{.len = 0, .cmd = 1, .syn = syn};
  std::array<std::byte, 16> raw;
  header.store(raw);
  return stream.write_all(raw, deadline) && stream.read_exact(raw, deadline) &&
         tern::tools::Header16::load(raw).ack == syn;
}

TEST(TernEchoLimits, AStuckStderrDoesNotStopServingWhileBadConnectionsAreLogged) {
  StuckStderrEcho server;
  ASSERT_GT(server.port(), 0);
  on_runtime([&] {
    const Address address = server_address(server.port());
    tern::Result<TcpStream> good = TcpStream::connect(address);
    ASSERT_TRUE(good);
    ASSERT_TRUE(frame16_round_trip(*good, 1, tern::deadline_after(30s)));
    // 1,000 connections each send a bad header: each is closed with a peer log line, which
    // would wait forever on the full pipe if it were written on the worker.
    constexpr int kBad = 1000;
    constexpr int kAtOnce = 25;
    std::atomic<int> closed{0};
    tern::WaitGroup group;
    for (int f = 0; f < kAtOnce; ++f) {
      group.add();
      tern::spawn([&, f] {
        for (int i = f; i < kBad; i += kAtOnce) {
          tern::Result<TcpStream> bad = TcpStream::connect(address, tern::deadline_after(30s));
          if (!bad) continue;
          tern::tools::Header16 header{.len = 0, .cmd = 77, .syn = static_cast<std::uint32_t>(i)};
          std::array<std::byte, 16> raw;
          header.store(raw);
          if (bad->write_all(raw, tern::deadline_after(30s)) &&
              closed_by_server(*bad, tern::deadline_after(30s)))
            ++closed;
        }
        group.done();
      }).detach();
    }
    // The good client keeps getting answers meanwhile.
    for (std::uint32_t syn = 2; syn < 50; ++syn)
      ASSERT_TRUE(frame16_round_trip(*good, syn, tern::deadline_after(10s))) << syn;
    ASSERT_TRUE(group.wait_until(tern::deadline_after(120s)));
    EXPECT_EQ(closed.load(), kBad);
    EXPECT_TRUE(frame16_round_trip(*good, 99, tern::deadline_after(10s)));
  });
  EXPECT_TRUE(server.fifo_still_full());
}

}  // namespace
