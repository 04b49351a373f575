// The admin endpoint under a slow attack: sockets that send a byte at a time and reconnect when
// cut cannot keep scrapers out (connections over the limit wait in the backlog, heads have a
// short deadline, shorter still in the last free slot); binding beyond loopback logs a warning.
// Over loopback, under the backend named by TERN_IO.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/net_test_util.h"
#include "tern/admin/admin_server.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/log/log.h"

namespace {

using namespace std::chrono_literals;
using tern::admin::AdminServer;
using tern::net::Address;
using tern::net::TcpStream;
using tern_test::bytes_of;
using tern_test::patience;

// The status of one GET (0 if no response came before the deadline).
int get_status(const Address& server, std::string_view path, tern::Deadline deadline) {
  tern::Result<TcpStream> stream = TcpStream::connect(server, deadline);
  if (!stream) return 0;
  const std::string request = "GET " + std::string(path) + " HTTP/1.1\r\nHost: test\r\n\r\n";
  if (!stream->write_all(bytes_of(request), deadline)) return 0;
  std::string all;
  std::array<std::byte, 16384> buf;
  for (;;) {
    tern::Result<std::size_t> n = stream->read(buf, deadline);
    if (!n || *n == 0) break;
    all += tern_test::text_of(std::span(buf).first(*n));
  }
  return all.starts_with("HTTP/1.1 ") ? std::stoi(all.substr(9, 3)) : 0;
}

// Whether the server closed the stream (end of stream or reset) within `wait`; false when the
// wait ran out with the connection still open.
bool closed_within(TcpStream& stream, std::chrono::milliseconds wait) {
  std::array<std::byte, 256> buf;
  tern::Result<std::size_t> n = stream.read(buf, tern::deadline_after(wait));
  if (!n) return n.error() != std::errc::timed_out;
  return *n == 0;
}

TEST(AdminLimits, SlowSocketsThatReconnectCannotKeepScrapersOut) {
  tern_test::run_on(1, [] {
    AdminServer admin;  // the defaults: 32 connections, heads within 2 s (250 ms in the last)
    tern::Result<Address> bound = admin.start(Address::loopback(0));
    ASSERT_TRUE(bound) << bound.error().message();

    // 32 attackers: each sends a request head one byte every 100 ms (it never ends: a header
    // line that keeps growing) and reconnects as soon as it is cut.
    constexpr int kAttackers = 32;
    std::atomic<bool> stop{false};
    std::atomic<int> connects{0};
    tern::WaitGroup attackers;
    for (int a = 0; a < kAttackers; ++a) {
      attackers.add();
      tern::spawn([&] {
        tern_test::Defer done([&] { attackers.done(); });
        const std::string head = "GET /metrics HTTP/1.1\r\nX-Slow: ";
        while (!stop.load()) {
          tern::Result<TcpStream> stream = TcpStream::connect(*bound, patience());
          if (!stream) continue;
          ++connects;
          for (std::size_t i = 0; !stop.load(); ++i) {
            const char byte = i < head.size() ? head[i] : 'a';
            if (!stream->write_all(bytes_of(std::string_view(&byte, 1)), patience())) break;
            if (closed_within(*stream, 100ms)) break;
          }
        }
      }).detach();
    }
    ASSERT_TRUE(tern_test::wait_until_condition([&] { return connects.load() >= kAttackers * 2; },
                                                patience()));

    // 24 scrapes while the attack goes on: every one is answered, each within 5 s.
    int answered = 0;
    tern::Clock::duration slowest{};
    for (int i = 0; i < 24; ++i) {
      const tern::Deadline started = tern::Clock::now();
      const int status = get_status(*bound, "/metrics", tern::deadline_after(5s));
      EXPECT_EQ(status, 200) << "scrape " << i;
      answered += status == 200;
      slowest = std::max(slowest, tern::Clock::now() - started);
    }
    EXPECT_EQ(answered, 24);
    std::printf("24 scrapes under attack (%d connects so far): slowest %.1f ms\n", connects.load(),
                std::chrono::duration<double, std::milli>(slowest).count());
    stop = true;
    ASSERT_TRUE(attackers.wait_until(patience()));
    admin.stop();
  });
}

TEST(AdminLimits, TheLastFreeSlotGivesAFreshConnectionLittleTimeForItsHead) {
  tern_test::run_on(1, [] {
    AdminServer admin({.head_timeout = 20s, .max_connections = 2, .reserved_head_timeout = 200ms});
    tern::Result<Address> bound = admin.start(Address::loopback(0));
    ASSERT_TRUE(bound);
    tern::Result<TcpStream> first = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(first);
    ASSERT_TRUE(first->write_all(bytes_of("GE"), patience()));
    // The second takes the last slot: cut (408) after 200 ms, not 20 s.
    tern::Result<TcpStream> second = TcpStream::connect(*bound, patience());
    ASSERT_TRUE(second);
    ASSERT_TRUE(second->write_all(bytes_of("GE"), patience()));
    std::array<std::byte, 12> status;
    ASSERT_TRUE(second->read_exact(status, tern::deadline_after(10s)));
    EXPECT_EQ(tern_test::text_of(status), "HTTP/1.1 408");
    // The freed slot serves a scrape at once while the first still holds its own.
    EXPECT_EQ(get_status(*bound, "/status", tern::deadline_after(10s)), 200);
    EXPECT_FALSE(closed_within(*first, 50ms));
    first->close();
    admin.stop();
  });
}

// Keeps every line in memory.
class MemorySink final : public tern::log::Sink {
 public:
  void write(std::string_view lines) override {
    std::lock_guard lock(mutex_);
    text_.append(lines);
  }
  std::string text() const {
    std::lock_guard lock(mutex_);
    return text_;
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

TEST(AdminLimits, BindingBeyondLoopbackLogsAWarning) {
  auto sink = std::make_shared<MemorySink>();
  ASSERT_TRUE(tern::log::init({.sinks = {sink}, .synchronous = true}));
  tern_test::run_on(1, [] {
    AdminServer local;
    ASSERT_TRUE(local.start(Address::loopback(0)));
    local.stop();
  });
  EXPECT_EQ(sink->text().find("reachable from other hosts"), std::string::npos) << sink->text();
  tern_test::run_on(1, [] {
    tern::Result<Address> any = Address::parse(":0");
    ASSERT_TRUE(any);
    AdminServer open;
    tern::Result<Address> bound = open.start(*any);
    ASSERT_TRUE(bound) << bound.error().message();
    open.stop();
  });
  tern::log::shutdown();
  const std::string text = sink->text();
  EXPECT_NE(text.find(" WARN "), std::string::npos) << text;
  EXPECT_NE(text.find("admin endpoint on 0.0.0.0:"), std::string::npos) << text;
  EXPECT_NE(text.find("reachable from other hosts"), std::string::npos) << text;
}

}  // namespace
