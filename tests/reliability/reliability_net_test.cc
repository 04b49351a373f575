// tern::net under faults, over real loopback sockets and under the backend TERN_IO names: a peer
// that resets (RST) in the middle of a handler's read or write, a handler that throws, and a
// process out of file descriptors on the server side (accepts fail, are counted, back off and
// resume) and on the client side (connect fails with EMFILE, then works again).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/net_test_util.h"
#include "reliability/reliability_util.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/tcp_server.h"
#include "test_scale.h"

namespace {

using namespace std::chrono_literals;
using tern::net::Address;
using tern::net::TcpServer;
using tern::net::TcpStream;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::wait_for_condition;

// Echoes until the peer closes or the stream fails.
void echo(TcpStream& stream) {
  std::array<std::byte, 4096> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream.read(buf);
    if (!n || *n == 0) return;
    if (!stream.write_all(std::span(buf).first(*n))) return;
  }
}

// Sends `text` and reads it back; whether it came back whole.
bool echoes(TcpStream& stream, const std::string& text) {
  std::string back(text.size(), '\0');
  return stream.write_all(bytes_of(text), patience()) &&
         stream.read_exact(std::as_writable_bytes(std::span(back)), patience()) && back == text;
}

// Reads until the stream ends; true for a clean end or a reset (the server closed it), false for
// data, a timeout or another error.
bool closed_by_peer(TcpStream& stream, tern::Deadline deadline) {
  std::array<std::byte, 64> buf;
  tern::Result<std::size_t> n = stream.read(buf, deadline);
  return n ? *n == 0 : n.error() == std::errc::connection_reset;
}

// Stops the server when the scope ends, also when an assertion returns early.
struct StopOnExit {
  TcpServer& server;
  ~StopOnExit() {
    if (server.running()) server.stop(tern::deadline_after(10s));
  }
};

// What a handler saw; written by the handler's fiber before `ended` is set.
struct HandlerOutcome {
  std::atomic<std::size_t> progress{0};  // bytes read or written so far
  std::error_code error;
  bool ok = false;
  tern::Event ended;
};

TEST(NetReset, ResetInTheMiddleOfAReadFailsTheHandlersRead) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    HandlerOutcome outcome;
    std::atomic<int> connections{0};
    TcpServer server({}, [&](TcpStream& stream) {
      // Only the first connection's handler reports: the second one only shows the server
      // still serves, and writing `outcome` from it would race with the test's reads of it.
      const bool reports = connections.fetch_add(1) == 0;
      std::array<std::byte, 100> request;
      std::size_t got = 0;
      while (got < request.size()) {
        tern::Result<std::size_t> n = stream.read(std::span(request).subspan(got), patience());
        if (!n) {
          if (reports) outcome.error = n.error();
          break;
        }
        if (*n == 0) break;
        got += *n;
        if (reports) outcome.progress = got;
      }
      if (!reports) return;
      outcome.ok = got == request.size();
      outcome.ended.set();
    });
    StopOnExit stop_server{server};
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();

    tern::Result<TcpStream> client = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(client);
    ASSERT_TRUE(client->write_all(bytes_of(std::string(50, 'h')), patience()));
    ASSERT_TRUE(wait_for_condition([&] { return outcome.progress.load() == 50; }))
        << "the handler read " << outcome.progress.load() << " of the 50 bytes sent";
    const tern::Clock::time_point reset_at = tern::Clock::now();
    tern_test::reset_and_close(*client);

    ASSERT_TRUE(outcome.ended.wait_until(patience())) << "the handler's read hangs after a reset";
    EXPECT_FALSE(outcome.ok);
    EXPECT_EQ(outcome.error, std::errc::connection_reset) << outcome.error.message();
    EXPECT_LT(tern::Clock::now() - reset_at, 5s);
    EXPECT_TRUE(wait_for_condition([&] { return server.stats().open == 0; }));

    tern::Result<TcpStream> next = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(next);
    EXPECT_TRUE(next->write_all(bytes_of(std::string(100, 'n')), patience()));
    EXPECT_TRUE(wait_for_condition([&] { return server.stats().accepted == 2; }));
    next->close();
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
  });
}

TEST(NetReset, ResetInTheMiddleOfAWriteFailsTheHandlersWrite) {
  constexpr std::size_t kReply = 32u << 20;  // far more than the socket buffers hold
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    HandlerOutcome outcome;
    TcpServer server({}, [&](TcpStream& stream) {
      std::vector<std::byte> reply(kReply, std::byte{'r'});
      std::span<const std::byte> left(reply);
      while (!left.empty()) {
        tern::Result<std::size_t> n = stream.write(left, patience());
        if (!n) {
          outcome.error = n.error();
          break;
        }
        left = left.subspan(*n);
        outcome.progress += *n;
      }
      outcome.ok = left.empty();
      outcome.ended.set();
    });
    StopOnExit stop_server{server};
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    tern::Result<TcpStream> client = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(client);
    std::vector<std::byte> some(256u << 10);
    ASSERT_TRUE(client->read_exact(some, patience()));
    tern_test::reset_and_close(*client);

    ASSERT_TRUE(outcome.ended.wait_until(patience())) << "the handler's write hangs after a reset";
    EXPECT_FALSE(outcome.ok);
    EXPECT_TRUE(outcome.error == std::errc::connection_reset ||
                outcome.error == std::errc::broken_pipe)
        << outcome.error.message();
    EXPECT_LT(outcome.progress.load(), kReply);
    EXPECT_TRUE(wait_for_condition([&] { return server.stats().open == 0; }));
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
  });
}

TEST(NetHandlerThrows, ItsConnectionIsClosedLoggedAndTheServerKeepsServing) {
  tern_test::LogCapture log;
  tern::Runtime runtime({.workers = 2});
  runtime.run([&] {
    TcpServer server({}, [](TcpStream& stream) {
      std::array<std::byte, 1> first;
      if (!stream.read_exact(first, patience())) return;
      if (first[0] == std::byte{'x'}) throw std::runtime_error("the request starts with x");
      if (first[0] == std::byte{'i'}) throw 42;
      if (!stream.write_all(first, patience())) return;
      echo(stream);
    });
    StopOnExit stop_server{server};
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    tern::Result<TcpStream> good = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(good);
    ASSERT_TRUE(echoes(*good, "g"));
    ASSERT_TRUE(echoes(*good, "before the throws"));

    // One throw of a non-exception, then throws of std::runtime_error until one is logged (the
    // server logs these at most once a second).
    auto throwing_connection = [&](char first) {
      tern::Result<TcpStream> bad = TcpStream::connect(*bound, patience());
      if (!bad) return false;
      const char request[] = {first, 'y'};
      return bad->write_all(bytes_of(std::string_view(request, 2)), patience()) &&
             closed_by_peer(*bad, patience());
    };
    EXPECT_TRUE(throwing_connection('i')) << "a throwing handler's connection was not closed";
    int throws = 1;
    const tern::Deadline give_up = patience();
    while (!log.has_line({"connection handler threw: the request starts with x"}) &&
           tern::Clock::now() < give_up) {
      ASSERT_TRUE(throwing_connection('x')) << "a throwing handler's connection was not closed";
      ++throws;
      ASSERT_TRUE(echoes(*good, "between throws " + std::to_string(throws)));
      ASSERT_TRUE(tern::this_fiber::sleep_for(5ms));  // a pace, not a wait: a few hundred at most
    }
    EXPECT_TRUE(log.has_line({"WARN", "connection handler threw: the request starts with x"}))
        << log.text();

    EXPECT_TRUE(echoes(*good, "after the throws"));
    tern::Result<TcpStream> later = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(later);
    EXPECT_TRUE(echoes(*later, "a new connection after the throws"));
    EXPECT_TRUE(wait_for_condition([&] { return server.stats().open == 2; }))
        << server.stats().open << " connections open; the throwing ones must be closed";
    EXPECT_EQ(server.stats().accepted, static_cast<std::uint64_t>(2 + throws));
    good->close();
    later->close();
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
    EXPECT_EQ(server.stats().open, 0u);
  });
}

// The server side of descriptor exhaustion, in four phases on one worker:
//   A. the table is full: each new connection is accepted with the listener's spare descriptor
//      and closed at once (the client sees the close), each failure is counted, and an
//      established connection keeps being served;
//   B. the limit drops below the spare (as when another thread takes the descriptor freed for
//      it): the pending connection cannot be shed, and the accept loop retries with a backoff
//      instead of spinning, still counting;
//   C. descriptors are freed: the pending connection is accepted and served;
//   D. the table is full again: the listener got its spare back in C, so it sheds again.
TEST(NetOutOfDescriptors, ServerCountsBacksOffKeepsServingAndRecovers) {
  tern_test::LogCapture log;
  // Lowered before the runtime starts: io_uring's multishot accept reads the limit when it is
  // armed.
  tern_test::DescriptorHog hog(64);
  const int full_limit = hog.limit();
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    // Slots below the listener, given to the client of phase B.
    for (int i = 0; i < 4; ++i) ASSERT_GE(hog.take_one(), 0);
    const int listener_fd = hog.lowest_free();
    TcpServer server({}, echo);
    tern_test::Defer stop_server([&] {
      hog.release_all();
      if (server.running()) server.stop(tern::deadline_after(10s));
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    tern::Result<TcpStream> established = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(established);
    ASSERT_TRUE(echoes(*established, "before"));

    // A: full table, spare descriptor in place.
    ASSERT_GT(hog.fill(), 0);
    tern::Result<TcpStream> refused = TcpStream::connect(*bound, patience());
    ASSERT_FALSE(refused) << "a socket was created with a full descriptor table";
    EXPECT_EQ(refused.error(), std::errc::too_many_files_open) << refused.error().message();
    const int shed = tern_test::scaled(3) + 2;
    for (int i = 0; i < shed; ++i) {
      hog.release_highest(1);  // the client's socket takes this slot
      tern::Result<TcpStream> client = TcpStream::connect(*bound, patience());
      ASSERT_TRUE(client) << client.error().message();
      EXPECT_TRUE(closed_by_peer(*client, patience())) << "connection " << i << " was not shed";
      EXPECT_TRUE(wait_for_condition([&] { return server.stats().accept_errors == i + 1u; }))
          << server.stats().accept_errors;
      ASSERT_TRUE(echoes(*established, "during exhaustion " + std::to_string(i)));
      client->close();
      ASSERT_GE(hog.take_one(), 0);
      ASSERT_EQ(hog.lowest_free(), -1) << "the table must be full again";
    }
    EXPECT_EQ(server.stats().accepted, 1u);
    // With the table still full and no connection coming, accept waits: nothing fails and
    // nothing is counted. (Showing that nothing happens takes a window of time.)
    const auto cpu_idle = tern_test::process_cpu_time();
    ASSERT_TRUE(tern::this_fiber::sleep_for(200ms));
    EXPECT_EQ(server.stats().accept_errors, static_cast<std::uint64_t>(shed))
        << "accepts fail while no connection is pending";
    EXPECT_LT(tern_test::process_cpu_time() - cpu_idle, 100ms);

    // B: no descriptor for the spare either.
    hog.set_limit(listener_fd);
    hog.release_lowest(1);  // one free descriptor below the limit, for the client's socket
    tern::Result<TcpStream> pending = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(pending) << pending.error().message();
    ASSERT_TRUE(wait_for_condition(
        [&] { return server.stats().accept_errors > static_cast<std::uint64_t>(shed); }));
    const std::uint64_t errors_before = server.stats().accept_errors;
    const auto cpu_before = tern_test::process_cpu_time();
    const tern::Clock::time_point wall_before = tern::Clock::now();
    ASSERT_TRUE(wait_for_condition([&] {
      return server.stats().accept_errors >= errors_before + 10 &&
             log.has_line({"Too many open files", "no spare descriptor"});
    })) << server.stats().accept_errors - errors_before
        << " more accept errors\n"
        << log.text();
    const auto wall = tern::Clock::now() - wall_before;
    const auto cpu = tern_test::process_cpu_time() - cpu_before;
    EXPECT_GE(wall, 50ms) << "ten failed accepts in "
                          << std::chrono::duration_cast<std::chrono::microseconds>(wall).count()
                          << " us: the accept loop retries without backing off";
    EXPECT_LT(cpu.count(), std::chrono::duration_cast<std::chrono::microseconds>(wall).count() / 2)
        << "the process used " << cpu.count() << " us of CPU in "
        << std::chrono::duration_cast<std::chrono::microseconds>(wall).count()
        << " us while its accepts failed";
    ASSERT_TRUE(echoes(*established, "while the spare is gone"));

    // C: descriptors come back; the pending connection is accepted and served.
    hog.set_limit(full_limit);
    hog.release_all();
    EXPECT_TRUE(echoes(*pending, "accepted once descriptors were freed"));
    EXPECT_EQ(server.stats().accepted, 2u);

    // D: full again; the spare is back, so the new connection is shed cleanly.
    ASSERT_GT(hog.fill(), 0);
    const std::uint64_t errors_in_c = server.stats().accept_errors;
    hog.release_highest(1);
    tern::Result<TcpStream> after = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(after) << after.error().message();
    EXPECT_TRUE(closed_by_peer(*after, tern::deadline_after(5s)))
        << "the listener did not get its spare descriptor back: the connection hangs";
    EXPECT_TRUE(
        wait_for_condition([&] { return server.stats().accept_errors == errors_in_c + 1; }));
    ASSERT_TRUE(echoes(*established, "after"));
    after->close();
    hog.release_all();

    tern::Result<TcpStream> fresh = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(fresh);
    EXPECT_TRUE(echoes(*fresh, "a fresh connection"));
    EXPECT_EQ(server.stats().accepted, 3u);
    established->close();
    pending->close();
    fresh->close();
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
  });
}

TEST(NetOutOfDescriptors, ConnectFailsWithEmfileThenWorksAgain) {
  tern_test::DescriptorHog hog(64);
  tern::Runtime runtime({.workers = 1});
  runtime.run([&] {
    TcpServer server({}, echo);
    tern_test::Defer stop_server([&] {
      hog.release_all();
      if (server.running()) server.stop(tern::deadline_after(10s));
    });
    tern::Result<Address> bound = server.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();
    ASSERT_GT(hog.fill(), 0);
    for (int i = 0; i < 3; ++i) {
      tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
      ASSERT_FALSE(stream);
      EXPECT_EQ(stream.error(), std::errc::too_many_files_open) << stream.error().message();
    }
    // Two slots: the client's socket and the server's accepted one.
    hog.release_highest(2);
    tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(stream) << stream.error().message();
    EXPECT_TRUE(echoes(*stream, "works again"));
    EXPECT_EQ(server.stats().accept_errors, 0u);
    stream->close();
    hog.release_all();
    EXPECT_EQ(server.stop(tern::deadline_after(10s)), 0u);
  });
}

}  // namespace
