// tern::net::Connector over loopback on the backend TERN_IO names: failures and exponential
// backoff with no listener, deadlines and interrupts, a listener that starts late, and a
// listener that restarts.
#include "tern/net/connector.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "net_test_util.h"
#include "tern/fiber/fiber.h"
#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;
using tern::Clock;
using tern::net::Address;
using tern::net::Connector;
using tern::net::ConnectorOptions;
using tern::net::TcpListener;
using tern::net::TcpStream;
using tern_test::bytes_of;
using tern_test::patience;
using tern_test::run_on;
using tern_test::text_of;
using tern_test::wait_for_condition;

// A port nothing listens on (the kernel picked it for a listener that is closed again).
// Worker fibers only.
std::uint16_t unused_port() {
  tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
  EXPECT_TRUE(listener) << listener.error().message();
  return listener ? listener->local_address()->port() : 1;
}

std::string loopback_target(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// Sends a line each way over a fresh connection to prove the two ends belong together.
void check_connected(TcpStream& client, TcpStream& server) {
  ASSERT_TRUE(client.write_all(bytes_of("hi"), patience()));
  std::array<std::byte, 2> buf;
  ASSERT_TRUE(server.read_exact(buf, patience()));
  EXPECT_EQ(text_of(buf), "hi");
  ASSERT_TRUE(server.write_all(bytes_of("yo"), patience()));
  ASSERT_TRUE(client.read_exact(buf, patience()));
  EXPECT_EQ(text_of(buf), "yo");
}

TEST(Connector, StartsWithNoFailures) {
  const ConnectorOptions options{.initial_backoff = 50ms};
  const Connector connector("127.0.0.1:1", options);
  EXPECT_EQ(connector.failures(), 0u);
  EXPECT_EQ(connector.next_backoff(), 50ms);
  EXPECT_EQ(connector.target(), "127.0.0.1:1");
}

TEST(Connector, BackoffDoublesUpToTheMaximum) {
  run_on(1, [] {
    Connector connector(loopback_target(unused_port()), {.initial_backoff = 10ms,
                                                         .max_backoff = 100ms,
                                                         .multiplier = 2.0,
                                                         .jitter = 0.0,
                                                         .attempt_timeout = 1s});
    const std::vector<std::chrono::milliseconds> expected = {20ms, 40ms, 80ms, 100ms, 100ms, 100ms};
    for (std::size_t i = 0; i < expected.size(); ++i) {
      // A deadline that has passed allows one attempt and no wait: each call is one failure.
      tern::Result<TcpStream> stream = connector.connect(Clock::now());
      ASSERT_FALSE(stream) << "connected to a port with no listener";
      EXPECT_EQ(stream.error(), std::errc::timed_out) << stream.error().message();
      EXPECT_EQ(connector.failures(), i + 1);
      EXPECT_EQ(connector.next_backoff(), expected[i]) << "after failure " << i + 1;
    }
  });
}

TEST(Connector, OtherMultipliersGrowTheBackoffToo) {
  run_on(1, [] {
    Connector connector(loopback_target(unused_port()), {.initial_backoff = 7ms,
                                                         .max_backoff = 1000ms,
                                                         .multiplier = 3.0,
                                                         .jitter = 0.5,
                                                         .attempt_timeout = 1s});
    for (std::chrono::milliseconds expected : {21ms, 63ms, 189ms, 567ms, 1000ms}) {
      ASSERT_FALSE(connector.connect(Clock::now()));
      EXPECT_EQ(connector.next_backoff(), expected);  // jitter changes the wait, not this
    }
  });
}

TEST(Connector, RetriesUntilTheDeadline) {
  run_on(1, [] {
    const std::string target = loopback_target(unused_port());
    Connector connector(target, {.initial_backoff = 10ms,
                                 .max_backoff = 40ms,
                                 .multiplier = 2.0,
                                 .jitter = 0.2,
                                 .attempt_timeout = 1s});
    const auto start = Clock::now();
    tern::Result<TcpStream> stream = connector.connect(Clock::now() + 500ms);
    const auto elapsed = Clock::now() - start;
    ASSERT_FALSE(stream);
    EXPECT_EQ(stream.error(), std::errc::timed_out) << stream.error().message();
    EXPECT_EQ(stream.error().message(), "connect " + target + ": deadline exceeded");
    // It gives up early only when the next wait would pass the deadline (at most 48 ms).
    EXPECT_GE(elapsed, 500ms - 48ms);
    EXPECT_GE(connector.failures(), 3u);
    EXPECT_EQ(connector.next_backoff(), 40ms);
  });
}

TEST(Connector, InterruptEndsTheBackoff) {
  run_on(1, [] {
    Connector connector(loopback_target(unused_port()),
                        {.initial_backoff = 60s, .max_backoff = 60s});
    std::error_code result;
    tern::Fiber client = tern::spawn([&] {
      tern::Result<TcpStream> stream = connector.connect();  // no deadline
      result = stream ? std::error_code() : stream.error();
    });
    // After the first failure it sleeps for a minute; the interrupt must end that.
    EXPECT_TRUE(wait_for_condition([&] { return connector.failures() >= 1; }));
    client.interrupt();
    client.join();
    EXPECT_EQ(result, std::errc::operation_canceled) << result.message();
    EXPECT_EQ(connector.failures(), 1u);
  });
}

TEST(Connector, MalformedTargetFailsAtOnce) {
  run_on(1, [] {
    Connector connector("no port here", {.initial_backoff = 60s});
    const auto start = Clock::now();
    tern::Result<TcpStream> stream = connector.connect(patience());
    ASSERT_FALSE(stream);
    EXPECT_EQ(stream.error(), std::errc::invalid_argument);
    EXPECT_LT(Clock::now() - start, 10s) << "it should not back off on a malformed target";
  });
}

TEST(Connector, ConnectsToAListenerStartedLaterAndResetsTheBackoff) {
  run_on(1, [] {
    const std::uint16_t port = unused_port();
    const ConnectorOptions options{.initial_backoff = 5ms, .max_backoff = 20ms};
    Connector connector(loopback_target(port), options);
    tern::Result<TcpStream> connected = tern::fail(std::errc::not_connected);
    tern::Fiber client = tern::spawn([&] { connected = connector.connect(patience()); });
    EXPECT_TRUE(wait_for_condition([&] { return connector.failures() >= 3; }));
    EXPECT_EQ(connector.next_backoff(), 20ms);

    // Now the listener appears on that port (TcpListener sets SO_REUSEADDR).
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(port));
    EXPECT_TRUE(listener) << listener.error().message();
    tern::Result<TcpStream> server =
        listener ? listener->accept(patience()) : tern::fail(listener.error());
    client.join();
    ASSERT_TRUE(connected) << connected.error().message();
    ASSERT_TRUE(server) << server.error().message();
    EXPECT_EQ(connector.failures(), 0u);
    EXPECT_EQ(connector.next_backoff(), options.initial_backoff);
    EXPECT_EQ(*connected->peer_address(), Address::loopback(port));
    check_connected(*connected, *server);
  });
}

TEST(Connector, ReconnectsToARestartedListener) {
  run_on(1, [] {
    tern::Result<TcpListener> listener = TcpListener::bind(Address::loopback(0));
    ASSERT_TRUE(listener);
    const std::uint16_t port = listener->local_address()->port();
    const ConnectorOptions options{.initial_backoff = 5ms, .max_backoff = 20ms};
    Connector connector(loopback_target(port), options);

    tern::Result<TcpStream> stream = connector.connect(patience());
    ASSERT_TRUE(stream) << stream.error().message();
    tern::Result<TcpStream> server = listener->accept(patience());
    ASSERT_TRUE(server) << server.error().message();
    check_connected(*stream, *server);
    EXPECT_EQ(connector.failures(), 0u);

    // The server goes away; the client sees the end of the stream.
    server->close();
    listener->close();
    std::array<std::byte, 4> buf;
    tern::Result<std::size_t> n = stream->read(buf, patience());
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0u);
    stream->close();

    // Reconnect, as a client loop would, while the server is down...
    tern::Result<TcpStream> again = tern::fail(std::errc::not_connected);
    tern::Fiber client = tern::spawn([&] { again = connector.connect(patience()); });
    EXPECT_TRUE(wait_for_condition([&] { return connector.failures() >= 2; }));

    // ... and it comes back on the same port.
    tern::Result<TcpListener> restarted = TcpListener::bind(Address::loopback(port));
    EXPECT_TRUE(restarted) << restarted.error().message();
    tern::Result<TcpStream> accepted =
        restarted ? restarted->accept(patience()) : tern::fail(restarted.error());
    client.join();
    ASSERT_TRUE(again) << again.error().message();
    ASSERT_TRUE(accepted) << accepted.error().message();
    EXPECT_EQ(connector.failures(), 0u);
    EXPECT_EQ(connector.next_backoff(), options.initial_backoff);
    check_connected(*again, *accepted);
  });
}

TEST(Connector, WaitsForAUnixSocketPath) {
  char dir[] = "/tmp/tern-connector-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/c.sock";
  run_on(1, [&] {
    Connector connector("unix:" + path, {.initial_backoff = 5ms, .max_backoff = 20ms});
    tern::Result<TcpStream> connected = tern::fail(std::errc::not_connected);
    tern::Fiber client = tern::spawn([&] { connected = connector.connect(patience()); });
    // No such file yet: attempts fail (ENOENT) and back off.
    EXPECT_TRUE(wait_for_condition([&] { return connector.failures() >= 2; }));
    tern::Result<TcpListener> listener = TcpListener::bind(*Address::parse("unix:" + path));
    EXPECT_TRUE(listener) << listener.error().message();
    tern::Result<TcpStream> server =
        listener ? listener->accept(patience()) : tern::fail(listener.error());
    client.join();
    ASSERT_TRUE(connected) << connected.error().message();
    ASSERT_TRUE(server) << server.error().message();
    EXPECT_EQ(connector.failures(), 0u);
    check_connected(*connected, *server);
  });
  ::unlink(path.c_str());
  ::rmdir(dir);
}

}  // namespace
