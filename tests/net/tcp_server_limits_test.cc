// TcpServer against peers that hold a connection without using it: the minimum-progress check
// cuts a client that trickles a byte at a time while clients that send whole messages, and idle
// ones, keep their connections; connection fibers carry the server's name on every worker; the
// accepted and closed counters agree. Over loopback, under the backend named by TERN_IO.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"
#include "tern/net/tcp_server.h"
#include "tern/prof/counter.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpServer;
using tern::net::TcpStream;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::wait_until_condition;

void echo(TcpStream& stream) {
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(std::span(buf).first(*n))) return;
  }
}

std::uint64_t counter(std::string_view name) {
  for (const tern::prof::Sample& sample : tern::prof::snapshot())
    if (sample.name == name) return sample.value;
  return 0;
}

// Whether the server ended the connection: a read sees end of stream or a reset.
bool closed_by_server(TcpStream& stream, tern::Deadline deadline) {
  std::array<std::byte, 64> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf, deadline);
    if (!n) return n.error() != std::errc::timed_out;
    if (*n == 0) return true;
  }
}

TEST(TcpServerProgress, ATricklerIsCutWhileWholeMessagesAndIdleConnectionsAreNot) {
  tern_test::run_on(1, [] {
    const std::uint64_t too_slow_before = counter("net.connections_too_slow");
    TcpServer server({.min_bytes_per_interval = 64, .progress_interval = 100ms, .name = "echo"},
                     echo);
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();

    tern::Result<TcpStream> idle = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(idle);
    tern::Result<TcpStream> trickler = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(trickler);

    // A client that sends whole 256-byte messages and reads their echo, without a pause.
    std::atomic<bool> stop_normal{false};
    std::atomic<int> normal_round_trips{0};
    std::atomic<bool> normal_failed{false};
    tern::WaitGroup normal_done;
    normal_done.add();
    tern::spawn([&] {
      tern_test::Defer done([&] { normal_done.done(); });
      tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
      if (!stream) {
        normal_failed = true;
        return;
      }
      const std::string message(256, 'm');
      std::string reply(message.size(), '\0');
      while (!stop_normal.load()) {
        if (!stream->write_all(bytes_of(message), patience()) ||
            !stream->read_exact(std::as_writable_bytes(std::span(reply)), patience()) ||
            reply != message) {
          normal_failed = true;
          return;
        }
        ++normal_round_trips;
      }
    }).detach();

    // The trickler: one byte every 10 ms (at most 10 a tick, 20 bytes moved with the echo),
    // until the server cuts it.
    std::atomic<bool> trickler_cut{false};
    tern::WaitGroup trickler_done;
    trickler_done.add();
    tern::spawn([&] {
      tern_test::Defer done([&] { trickler_done.done(); });
      const tern::Deadline deadline = patience();
      const std::byte one{'t'};
      std::array<std::byte, 1> echoed;
      while (tern::Clock::now() < deadline) {
        if (!trickler->write_all(std::span(&one, 1), deadline)) break;
        tern::Result<std::size_t> n = trickler->read(echoed, deadline);
        if (!n || *n == 0) break;
        (void)tern::this_fiber::sleep_for(10ms);
      }
      trickler_cut = closed_by_server(*trickler, deadline);
    }).detach();

    ASSERT_TRUE(trickler_done.wait_until(patience()));
    EXPECT_TRUE(trickler_cut) << "the trickling client was not cut";
    EXPECT_EQ(server.stats().too_slow, 1u);
    EXPECT_EQ(counter("net.connections_too_slow") - too_slow_before, 1u);
    // Two more checks pass; the whole-message client keeps going and the idle one stays open.
    const int trips_at_cut = normal_round_trips.load();
    (void)tern::this_fiber::sleep_for(250ms);
    stop_normal = true;
    ASSERT_TRUE(normal_done.wait_until(patience()));
    EXPECT_FALSE(normal_failed.load()) << "a client sending whole messages was cut";
    EXPECT_GT(normal_round_trips.load(), trips_at_cut);
    EXPECT_EQ(server.stats().too_slow, 1u);
    std::array<std::byte, 1> none;
    tern::Result<std::size_t> nothing = idle->read(none, tern::deadline_after(1ms));
    ASSERT_FALSE(nothing);
    EXPECT_EQ(nothing.error(), std::errc::timed_out) << "the idle connection was closed";
    server.stop(tern::deadline_after(0s));
  });
}

TEST(TcpServerProgress, OffByDefault) {
  EXPECT_EQ(tern::net::ServerOptions{}.min_bytes_per_interval, 0u);
}

TEST(TcpServerNames, ConnectionFibersCarryTheServersNameOnEveryWorker) {
  tern_test::run_on(2, [] {
    std::mutex mutex;
    std::set<std::string> names;
    std::set<std::size_t> workers;
    TcpServer server({.accept_mode = tern::net::AcceptMode::round_robin, .name = "echo-handler"},
                     [&](TcpStream& stream) {
                       {
                         std::lock_guard lock(mutex);
                         names.emplace(tern::this_fiber::name());
                         workers.insert(tern::this_worker::index());
                       }
                       echo(stream);
                     });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    for (int i = 0; i < 4; ++i) {
      tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
      ASSERT_TRUE(stream);
      std::array<std::byte, 2> reply;
      ASSERT_TRUE(stream->write_all(bytes_of("hi"), patience()));
      ASSERT_TRUE(stream->read_exact(reply, patience()));
    }
    server.stop(tern::deadline_after(10s));
    EXPECT_EQ(names, (std::set<std::string>{"echo-handler"}));
    EXPECT_EQ(workers, (std::set<std::size_t>{0, 1}));
  });
}

// Connections that only a TcpListener accepts (as the admin endpoint's) are not counted as
// accepted; a TcpServer's are, and each is counted closed once its handler returns; one it
// rejects is counted rejected only.
TEST(TcpServerCounters, AcceptedEqualsClosedPlusOpen) {
  tern_test::run_on(1, [] {
    const std::uint64_t accepted_before = counter("net.connections_accepted");
    const std::uint64_t closed_before = counter("net.connections_closed");
    const std::uint64_t rejected_before = counter("net.connections_rejected");

    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    tern::Result<Address> raw_address = listener->local_address();
    ASSERT_TRUE(raw_address);
    tern::Result<TcpStream> raw_client = TcpStream::connect(*raw_address, patience());
    ASSERT_TRUE(raw_client);
    tern::Result<TcpStream> raw_server = listener->accept(patience());
    ASSERT_TRUE(raw_server);

    TcpServer server({.max_connections = 1}, echo);
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    {
      tern::Result<TcpStream> first = TcpStream::connect(*bound, patience());
      ASSERT_TRUE(first);
      std::array<std::byte, 2> reply;
      ASSERT_TRUE(first->write_all(bytes_of("ok"), patience()));
      ASSERT_TRUE(first->read_exact(reply, patience()));
      tern::Result<TcpStream> second = TcpStream::connect(*bound, patience());
      ASSERT_TRUE(second);
      EXPECT_TRUE(closed_by_server(*second, patience())) << "over max_connections";
    }
    ASSERT_TRUE(wait_until_condition([&] { return server.stats().open == 0; }, patience()));
    EXPECT_EQ(counter("net.connections_accepted") - accepted_before, 1u);
    EXPECT_EQ(counter("net.connections_closed") - closed_before, 1u);
    EXPECT_EQ(counter("net.connections_rejected") - rejected_before, 1u);
    server.stop(tern::deadline_after(10s));
  });
}

// A log sink whose write waits until the test opens it: the log's writer thread is stuck.
class StuckSink final : public tern::log::Sink {
 public:
  void write(std::string_view) override {
    std::unique_lock lock(mutex_);
    entered_ = true;
    changed_.wait(lock, [&] { return open_; });
  }
  bool entered() {
    std::lock_guard lock(mutex_);
    return entered_;
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool entered_ = false;
  bool open_ = false;
};

// The log's writer is stuck in its sink and the policy is block, so an ordinary line would wait
// for room once the worker's ring is full; the peer lines that 1,000 bad connections cause never
// wait, and a good client keeps its echoes.
TEST(TcpServerLogging, AStuckLogSinkDoesNotStopServing) {
  auto sink = std::make_shared<StuckSink>();
  ASSERT_TRUE(tern::log::init({.sinks = {sink}, .buffer_bytes = 16 * 1024}));
  tern::log::set_peer_log_rate({.per_second = 1e9, .burst = 1000000});
  TERN_LOG_INFO("the writer takes this line and stays in the sink");
  bool entered = false;
  for (int i = 0; i < 20000 && !(entered = sink->entered()); ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(entered);
  const std::uint64_t dropped_before = tern::log::dropped();
  tern_test::run_on(1, [] {
    TcpServer server({.name = "echo-or-complain"}, [](TcpStream& stream) {
      std::array<std::byte, 256> buf;
      for (;;) {
        tern::Result<std::size_t> n = stream.read(buf);
        if (!n || *n == 0) return;
        if (buf[0] == std::byte{'!'}) {
          tern::Result<Address> peer = stream.peer_address();
          TERN_PEER_LOG_WARN("bad first byte from {}, closing",
                             peer ? peer->to_string() : std::string("?"));
          return;
        }
        if (!stream.write_all(std::span(buf).first(*n))) return;
      }
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> good = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(good);
    constexpr int kBad = 1000;
    constexpr int kAtOnce = 25;
    std::atomic<int> closed{0};
    tern::WaitGroup bad;
    for (int f = 0; f < kAtOnce; ++f) {
      bad.add();
      tern::spawn([&, f] {
        tern_test::Defer done([&] { bad.done(); });
        for (int i = f; i < kBad; i += kAtOnce) {
          tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
          if (!stream || !stream->write_all(bytes_of("!"), patience())) continue;
          if (closed_by_server(*stream, patience())) ++closed;
        }
      }).detach();
    }
    std::array<std::byte, 5> reply;
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(good->write_all(bytes_of("hello"), tern::deadline_after(10s))) << i;
      ASSERT_TRUE(good->read_exact(reply, tern::deadline_after(10s))) << i;
    }
    ASSERT_TRUE(bad.wait_until(patience()));
    EXPECT_EQ(closed.load(), kBad);
    good->close();
    server.stop(tern::deadline_after(10s));
  });
  EXPECT_GT(tern::log::dropped() - dropped_before, 0u) << "the ring never filled";
  sink->open();
  tern::log::shutdown();
  tern::log::set_peer_log_rate({});
}

}  // namespace
