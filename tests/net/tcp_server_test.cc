// TcpServer over real loopback connections, under the backend named by TERN_IO: both accept
// modes, 10,000 concurrent echoing connections, max_connections, idle timeout, graceful stop.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/sanitizer.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/offload.h"
#include "tern/net/tcp_server.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpServer;
using tern::net::TcpStream;

// Echoes until the peer closes or the stream fails.
void echo(TcpStream& stream) {
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(std::span(buf).first(*n))) return;
  }
}

// Connects, sends `message`, reads the echo; returns whether it matched.
bool round_trip(const Address& server, const std::string& message) {
  const tern::Deadline deadline = tern::deadline_after(60s);
  tern::Result<TcpStream> stream = TcpStream::connect(server, deadline);
  if (!stream) return false;
  std::string reply(message.size(), '\0');
  return stream->write_all(std::as_bytes(std::span(message)), deadline) &&
         stream->read_exact(std::as_writable_bytes(std::span(reply)), deadline) && reply == message;
}

// Runs the echo_clients helper process against port with n connections; returns its exit
// status (0: every connection was open at once and echoed). Worker fibers only.
int run_echo_clients(std::uint16_t port, int n) {
  return tern::io::offload([&] {
    const std::string port_text = std::to_string(port);
    const std::string count_text = std::to_string(n);
    char* argv[] = {const_cast<char*>(TERN_ECHO_CLIENTS), const_cast<char*>(port_text.c_str()),
                    const_cast<char*>(count_text.c_str()), nullptr};
    pid_t child = 0;
    if (::posix_spawn(&child, TERN_ECHO_CLIENTS, nullptr, nullptr, argv, environ) != 0) return -1;
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  });
}

class TcpServerTest : public testing::TestWithParam<tern::net::AcceptMode> {};

TEST_P(TcpServerTest, ServesClientsOnEveryWorker) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    std::atomic<int> on_worker[2] = {0, 0};
    TcpServer server({.accept_mode = GetParam()}, [&](TcpStream& stream) {
      on_worker[tern::this_worker::index()]++;
      echo(stream);
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    EXPECT_NE(bound->port(), 0);
    const int clients = tern_test::scaled(200);
    std::atomic<int> ok{0};
    tern::WaitGroup done;
    done.add(static_cast<std::size_t>(clients));
    for (int i = 0; i < clients; ++i) {
      (void)tern::post(static_cast<std::size_t>(i % 2), [&, i] {
        if (round_trip(*bound, "client " + std::to_string(i))) ok++;
        done.done();
      });
    }
    ASSERT_TRUE(done.wait_for(120s));
    EXPECT_EQ(ok.load(), clients);
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
    EXPECT_EQ(server.stats().accepted, static_cast<std::uint64_t>(clients));
    EXPECT_EQ(server.stats().open, 0u);
    if (GetParam() == tern::net::AcceptMode::round_robin) {
      EXPECT_GT(on_worker[0].load(), 0);
      EXPECT_GT(on_worker[1].load(), 0) << "round robin hands connections to every worker";
    }
  });
}

TEST_P(TcpServerTest, TenThousandConcurrentConnectionsEcho) {
  // The clients run in a helper process: 10,000 client and 10,000 server descriptors do not fit
  // one process's limit on this machine.
  rlimit limit = {};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
  const int connections = tern_test::scaled(10000);
  ASSERT_GE(limit.rlim_cur, static_cast<rlim_t>(connections + 100));
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    // Each handler waits until every connection has a running handler, then echoes: all
    // `connections` are open in the server at once.
    std::atomic<int> running{0};
    std::atomic<int> waited_for_all{0};
    tern::Event all_running;
    TcpServer server({.accept_mode = GetParam(), .listen = {.backlog = 4096}},
                     [&](TcpStream& stream) {
                       if (++running == connections) all_running.set();
                       if (all_running.wait_for(120s)) waited_for_all++;
                       echo(stream);
                     });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    EXPECT_EQ(run_echo_clients(bound->port(), connections), 0);
    EXPECT_EQ(waited_for_all.load(), connections) << "all connections were open at once";
    server.stop(tern::deadline_after(10s));
    EXPECT_EQ(server.stats().accepted, static_cast<std::uint64_t>(connections));
  });
}

INSTANTIATE_TEST_SUITE_P(AcceptModes, TcpServerTest,
                         testing::Values(tern::net::AcceptMode::reuse_port,
                                         tern::net::AcceptMode::round_robin),
                         [](const auto& info) {
                           return info.param == tern::net::AcceptMode::reuse_port ? "ReusePort"
                                                                                  : "RoundRobin";
                         });

TEST(TcpServer, ConnectionsBeyondTheLimitGetACleanClose) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    tern::Event release;
    tern::WaitGroup inside;
    inside.add(2);
    TcpServer server({.max_connections = 2}, [&](TcpStream& stream) {
      inside.done();
      (void)release.wait_for(60s);
      echo(stream);
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    std::vector<TcpStream> held;
    for (int i = 0; i < 2; ++i) held.push_back(*TcpStream::connect(*bound));
    ASSERT_TRUE(inside.wait_for(30s));
    // The third connection is accepted by the kernel, then closed by the server.
    tern::Result<TcpStream> extra = TcpStream::connect(*bound, tern::deadline_after(30s));
    ASSERT_TRUE(extra);
    std::array<std::byte, 8> buf;
    tern::Result<std::size_t> n = extra->read(buf, tern::deadline_after(30s));
    EXPECT_TRUE(!n ? n.error() == std::errc::connection_reset : *n == 0)
        << "expected end of stream or reset";
    release.set();
    for (TcpStream& s : held) {
      const std::string ping = "ping";
      std::string pong(4, '\0');
      EXPECT_TRUE(s.write_all(std::as_bytes(std::span(ping))));
      EXPECT_TRUE(s.read_exact(std::as_writable_bytes(std::span(pong))));
      EXPECT_EQ(pong, ping) << "existing clients keep being served";
    }
    held.clear();
    server.stop(tern::deadline_after(10s));
    EXPECT_EQ(server.stats().rejected, 1u);
    EXPECT_EQ(server.stats().accepted, 2u);
  });
}

// The number of bytes of address space the process has mapped (/proc/self/statm).
std::size_t mapped_bytes() {
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr) return 0;
  unsigned long pages = 0;
  const int got = std::fscanf(statm, "%lu", &pages);
  std::fclose(statm);
  return got == 1 ? pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

// In a child process: with RLIMIT_AS lowered to what the process maps already, the fiber of a
// new connection cannot get a stack; the server must close that connection, count it, and serve
// the next one once memory is back. Returns the number of failed checks (printed to stderr).
int serve_through_a_spawn_failure() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "check failed: %s\n", what);
      ++failures;
    }
  };
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    TcpServer server({}, echo);
    tern::Result<Address> bound = server.start(Address::loopback(0));
    check(bound.has_value(), "start");
    if (!bound) return;
    // A first connection, kept open: the acceptor runs by then, and no fiber has ended, so no
    // stack waits in the worker's pool for the next connection (it has to map a new one).
    tern::Result<TcpStream> first = TcpStream::connect(*bound, tern::deadline_after(30s));
    check(first.has_value(), "first connect");
    if (!first) return;
    const std::string ping = "ping";
    std::string pong(ping.size(), '\0');
    check(first->write_all(std::as_bytes(std::span(ping))) &&
              first->read_exact(std::as_writable_bytes(std::span(pong))) && pong == ping,
          "the first connection is served");
    rlimit normal{};
    ::getrlimit(RLIMIT_AS, &normal);
    rlimit tight = normal;
    tight.rlim_cur = mapped_bytes();
    check(tight.rlim_cur != 0 && ::setrlimit(RLIMIT_AS, &tight) == 0, "lower RLIMIT_AS");
    {
      tern::Result<TcpStream> refused = TcpStream::connect(*bound, tern::deadline_after(30s));
      check(refused.has_value(), "connect while memory is short");
      if (refused) {
        std::array<std::byte, 8> buf;
        tern::Result<std::size_t> n = refused->read(buf, tern::deadline_after(30s));
        check(!n ? n.error() == std::errc::connection_reset : *n == 0,
              "the connection without a fiber is closed");
      }
    }
    ::setrlimit(RLIMIT_AS, &normal);
    check(round_trip(*bound, "still serving"), "the next connection is served");
    first->close();
    server.stop(tern::deadline_after(10s));
    check(server.stats().accept_errors == 1, "one failed connection counted in accept_errors");
    check(server.stats().accepted == 2, "only the served connections counted as accepted");
  });
  return failures;
}

TEST(TcpServerDeathTest, KeepsServingAfterAConnectionFiberCannotBeStarted) {
#if TERN_TSAN
  // ThreadSanitizer's runtime maps memory of its own inside intercepted calls; with RLIMIT_AS at
  // exactly what is mapped it aborts ("failed to allocate ... ThreadSignalContext") before tern
  // can show how it copes. The Debug and AddressSanitizer builds run this test.
  GTEST_SKIP() << "needs memory headroom ThreadSanitizer's runtime does not leave";
#endif
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(serve_through_a_spawn_failure()), testing::ExitedWithCode(0), "");
}

TEST(TcpServer, IdleConnectionsTimeOut) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    std::error_code seen;
    tern::Event ended;
    TcpServer server({.idle_timeout = 50ms}, [&](TcpStream& stream) {
      std::array<std::byte, 8> buf;
      tern::Result<std::size_t> n = stream.read(buf);
      seen = n ? std::error_code() : n.error();
      ended.set();
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    const auto start = tern::Clock::now();
    tern::Result<TcpStream> idle = TcpStream::connect(*bound);
    ASSERT_TRUE(idle);
    ASSERT_TRUE(ended.wait_for(30s));
    EXPECT_EQ(seen, std::errc::timed_out);
    EXPECT_GE(tern::Clock::now() - start, 50ms);
    std::array<std::byte, 8> buf;
    tern::Result<std::size_t> n = idle->read(buf, tern::deadline_after(30s));
    EXPECT_TRUE(n && *n == 0) << "the server closed the idle connection";
    server.stop(tern::deadline_after(10s));
  });
}

// The idle timeout counts from each read's start: a connection that was read from has its full
// timeout again for the next read.
TEST(TcpServer, IdleTimeoutCountsFromTheLastRead) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    std::error_code seen;
    tern::Deadline second_read{};
    tern::Deadline ended_at{};
    tern::Event ended;
    TcpServer server({.idle_timeout = 100ms}, [&](TcpStream& stream) {
      std::array<std::byte, 8> buf;
      if (!stream.read(buf)) return ended.set();
      second_read = tern::Clock::now();
      tern::Result<std::size_t> n = stream.read(buf);
      ended_at = tern::Clock::now();
      seen = n ? std::error_code() : n.error();
      ended.set();
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> client = TcpStream::connect(*bound);
    ASSERT_TRUE(client);
    const std::array<std::byte, 1> one{std::byte{1}};
    ASSERT_TRUE(client->write_all(one));
    ASSERT_TRUE(ended.wait_for(30s));
    EXPECT_EQ(seen, std::errc::timed_out);
    EXPECT_GE(ended_at - second_read, 100ms);
    server.stop(tern::deadline_after(10s));
  });
}

// A peer that vanishes without a FIN is only found by probes: every accepted connection carries
// the probe settings of ServerOptions::keepalive, and a user timeout of the same length.
TEST(TcpServer, AcceptedConnectionsProbeTheirPeerAsKeepaliveSays) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    struct Seen {
      int keepalive = -1, idle = -1, interval = -1, count = -1, user_timeout = -1;
    };
    std::optional<Seen> seen;
    tern::Event handled;
    TcpServer server(
        {.keepalive = {.idle = 7s, .interval = 2s, .count = 4}}, [&](TcpStream& stream) {
          tern::net::Socket& s = stream.socket();
          seen = Seen{
              *s.get_option(SOL_SOCKET, SO_KEEPALIVE), *s.get_option(IPPROTO_TCP, TCP_KEEPIDLE),
              *s.get_option(IPPROTO_TCP, TCP_KEEPINTVL), *s.get_option(IPPROTO_TCP, TCP_KEEPCNT),
              *s.get_option(IPPROTO_TCP, TCP_USER_TIMEOUT)};
          handled.set();
        });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> client = TcpStream::connect(*bound, tern::deadline_after(30s));
    ASSERT_TRUE(client);
    ASSERT_TRUE(handled.wait_for(30s));
    ASSERT_TRUE(seen.has_value());
    EXPECT_NE(seen->keepalive, 0);
    EXPECT_EQ(seen->idle, 7);
    EXPECT_EQ(seen->interval, 2);
    EXPECT_EQ(seen->count, 4);
    EXPECT_EQ(seen->user_timeout, 15'000) << "idle + interval * count, in milliseconds";
    server.stop(tern::deadline_after(10s));
  });
}

// The send buffer and keepalive probing are set once on the listener: a connection accepted on
// one worker and served on another carries them all the same, with the send buffer's value
// exactly what setting it on the connection itself gives.
TEST(TcpServer, EveryConnectionInheritsTheListenersSendBufferAndKeepalive) {
  constexpr int kSendBuffer = 64 * 1024;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    struct Seen {
      int send_buffer = -1, keepalive = -1, idle = -1;
    };
    std::mutex lock;
    std::vector<Seen> seen;
    TcpServer server({.send_buffer = kSendBuffer, .keepalive = {.idle = 9s}},
                     [&](TcpStream& stream) {
                       tern::net::Socket& s = stream.socket();
                       const Seen one{*s.get_option(SOL_SOCKET, SO_SNDBUF),
                                      *s.get_option(SOL_SOCKET, SO_KEEPALIVE),
                                      *s.get_option(IPPROTO_TCP, TCP_KEEPIDLE)};
                       std::lock_guard guard(lock);
                       seen.push_back(one);
                     });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    std::vector<TcpStream> clients;
    for (int i = 0; i < 4; ++i) {
      tern::Result<TcpStream> client = TcpStream::connect(*bound, tern::deadline_after(30s));
      ASSERT_TRUE(client);
      clients.push_back(std::move(*client));
    }
    ASSERT_TRUE(tern_test::wait_for_condition([&] {
      std::lock_guard guard(lock);
      return seen.size() == clients.size();
    }));
    // What the kernel makes of kSendBuffer (it doubles it) on a socket set directly.
    TcpStream& direct = clients.front();
    ASSERT_TRUE(direct.set_send_buffer(kSendBuffer));
    const int expected = *direct.socket().get_option(SOL_SOCKET, SO_SNDBUF);
    std::vector<Seen> all;
    {
      std::lock_guard guard(lock);
      all = seen;
    }
    for (const Seen& one : all) {
      EXPECT_EQ(one.send_buffer, expected);
      EXPECT_NE(one.keepalive, 0);
      EXPECT_EQ(one.idle, 9);
    }
    server.stop(tern::deadline_after(10s));
  });
}

// Settings outside what the kernel takes are clamped, and the user timeout follows the clamped
// values, not the ones asked for.
TEST(TcpServer, KeepaliveSettingsOutOfRangeAreClampedAndTheUserTimeoutFollows) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    TcpServer server({}, [&](TcpStream&) {});
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> client = TcpStream::connect(*bound, tern::deadline_after(30s));
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->set_keepalive_probes({.idle = 5s, .interval = 0s, .count = 1000}));
    tern::net::Socket& s = client->socket();
    EXPECT_EQ(*s.get_option(IPPROTO_TCP, TCP_KEEPIDLE), 5);
    EXPECT_EQ(*s.get_option(IPPROTO_TCP, TCP_KEEPINTVL), 1);
    EXPECT_EQ(*s.get_option(IPPROTO_TCP, TCP_KEEPCNT), 127);
    EXPECT_EQ(*s.get_option(IPPROTO_TCP, TCP_USER_TIMEOUT), (5 + 1 * 127) * 1000);
    server.stop(tern::deadline_after(10s));
  });
}

TEST(TcpServer, AClientThatNeverReadsParksItsHandlerAndNothingPilesUp) {
  constexpr std::size_t kChunk = 64 * 1024;
  constexpr std::size_t kGiveUpAfter = 256u << 20;  // far past every buffer on the way
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    std::atomic<std::size_t> handler_read{0};
    TcpServer server({.send_buffer = 64 * 1024}, [&](TcpStream& stream) {
      std::array<std::byte, 4096> buf;
      for (;;) {
        tern::Result<std::size_t> n = stream.read(buf);
        if (!n || *n == 0) return;
        handler_read += *n;
        if (!stream.write_all(std::span(buf).first(*n))) return;
      }
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> hog = TcpStream::connect(*bound, tern::deadline_after(30s));
    ASSERT_TRUE(hog);
    ASSERT_TRUE(hog->set_receive_buffer(4096));

    // Send until a write makes no progress for 300 ms: the server stopped reading because its
    // handler is parked writing to a peer that does not read.
    const std::vector<std::byte> chunk(kChunk, std::byte{'h'});
    std::size_t sent = 0;
    std::error_code stalled;
    while (sent < kGiveUpAfter) {
      tern::Result<std::size_t> n = hog->write(chunk, tern::deadline_after(300ms));
      if (!n) {
        stalled = n.error();
        break;
      }
      sent += *n;
    }
    EXPECT_EQ(stalled, std::errc::timed_out) << sent << " bytes went out and nothing pushed back";
    EXPECT_LT(sent, std::size_t{32} << 20) << "only the kernel's buffers hold the unread echo";
    const std::size_t read_when_parked = handler_read.load();
    RecordProperty("bytes_sent_before_the_stall", std::to_string(sent));
    EXPECT_LE(read_when_parked, sent);

    // The parked handler holds back nothing but its own connection.
    EXPECT_TRUE(round_trip(*bound, "served while another handler is parked"));
    EXPECT_GE(server.stats().open, 1u) << "the hog's handler is still open, parked";

    hog->close();
    const tern::Deadline limit = tern::deadline_after(30s);
    while (server.stats().open != 0 && tern::Clock::now() < limit) {
      ASSERT_TRUE(tern::this_fiber::sleep_for(1ms));
    }
    EXPECT_EQ(server.stats().open, 0u) << "closing the hog ends its handler's write";
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
  });
}

TEST(TcpServer, StopAndDestroyWhileClientsKeepConnecting) {
  // Each acceptor may leave its loop on its own, right after an accept, before the listener
  // close that stop() posted to its worker has run; the server is destroyed at once after
  // stop(), and that close must still find its state (the sanitizer builds check).
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    for (int round = 0; round < tern_test::scaled(40); ++round) {
      std::atomic<bool> clients_done{false};
      std::atomic<int> accepted{0};
      tern::WaitGroup clients;
      std::optional<Address> bound;
      {
        TcpServer server({}, [&](TcpStream&) { accepted++; });
        tern::Result<Address> started = server.start(Address::loopback(0));
        ASSERT_TRUE(started) << started.error().message();
        bound = *started;
        for (std::size_t worker = 0; worker < 2; ++worker) {
          clients.add();
          (void)tern::post(worker, [&] {
            while (!clients_done.load()) {
              (void)TcpStream::connect(*bound, tern::deadline_after(5s));
            }
            clients.done();
          });
        }
        ASSERT_TRUE(tern_test::wait_for_condition([&] { return accepted.load() >= 4; }));
        (void)server.stop(tern::deadline_after(1s));
      }
      clients_done = true;
      ASSERT_TRUE(clients.wait_for(30s));
    }
  });
}

TEST(TcpServer, GracefulStopLetsHandlersFinishThenCutsTheRest) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    std::atomic<int> finished_normally{0};
    std::atomic<int> saw_cut{0};
    tern::WaitGroup started;
    started.add(4);
    TcpServer server({}, [&](TcpStream& stream) {
      started.done();
      std::array<std::byte, 8> buf;
      tern::Result<std::size_t> n = stream.read(buf);  // a request arrives, or the cut
      if (n && *n > 0) {
        (void)stream.write_all(std::span(buf).first(*n));
        finished_normally++;
      } else {
        saw_cut++;
      }
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    std::vector<TcpStream> clients;
    for (int i = 0; i < 4; ++i) clients.push_back(*TcpStream::connect(*bound));
    ASSERT_TRUE(started.wait_for(30s));
    // Two clients send during the grace period; two stay silent and get cut.
    tern::Fiber senders = tern::spawn([&] {
      for (int i = 0; i < 2; ++i) {
        const std::string ask = "go";
        std::string answer(2, '\0');
        EXPECT_TRUE(clients[i].write_all(std::as_bytes(std::span(ask))));
        EXPECT_TRUE(clients[i].read_exact(std::as_writable_bytes(std::span(answer))));
      }
    });
    const std::size_t cut = server.stop(tern::deadline_after(300ms));
    senders.join();
    EXPECT_EQ(cut, 2u);
    EXPECT_EQ(finished_normally.load(), 2);
    EXPECT_EQ(saw_cut.load(), 2);
    EXPECT_FALSE(TcpStream::connect(*bound, tern::deadline_after(5s)))
        << "the listener is closed after stop";
  });
}

}  // namespace
