// A TCP proxy on 127.0.0.1 for fault tests: forwards bytes both ways between its clients and an
// upstream server and, on the connections a test picks, resets one side once a given number of
// bytes have gone through in one direction (the other side is closed). Lets a test cut a real
// client's request or a real server's reply in the middle of a frame. Worker fibers of one
// worker.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "reliability/reliability_util.h"
#include "tern/fiber/fiber.h"
#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace tern_test {

class FaultProxy {
 public:
  // Which way the bytes that trigger a fault flow; the receiving side is the one reset.
  enum class Direction {
    to_server,  // the server sees its client reset after `after_bytes` of requests
    to_client,  // the client sees its server reset after `after_bytes` of replies
  };
  struct Fault {
    Direction direction;
    std::size_t after_bytes;
  };
  // The fault of connection `index` (from 0); std::nullopt forwards it faithfully.
  using Plan = std::function<std::optional<Fault>(int index)>;

  FaultProxy(tern::net::Address upstream, Plan plan)
      : upstream_(upstream), plan_(std::move(plan)) {}
  ~FaultProxy() { stop(); }
  FaultProxy(const FaultProxy&) = delete;
  FaultProxy& operator=(const FaultProxy&) = delete;

  // Listens on 127.0.0.1 (port 0) and starts accepting; the address to connect to.
  tern::net::Address start() {
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(tern::net::Address::loopback(0));
    EXPECT_TRUE(listener) << listener.error().message();
    if (!listener) return tern::net::Address::loopback(1);
    listener_ = std::move(*listener);
    acceptor_ = tern::spawn([this] { accept_loop(); }, {.name = "fault proxy"});
    tern::Result<tern::net::Address> bound = listener_.local_address();
    return bound ? *bound : tern::net::Address::loopback(1);
  }

  // Stops accepting, closes every connection and waits for the forwarding fibers.
  void stop() {
    if (!acceptor_.joinable()) return;
    listener_.close();
    acceptor_.join();
    for (auto& link : links_) {
      link->down.close();
      link->up.close();
    }
    for (auto& link : links_) {
      link->to_server.join();
      link->to_client.join();
    }
    links_.clear();
  }

  int accepted() const { return accepted_; }
  // Connections reset so far.
  int faults() const { return faults_; }

 private:
  struct Link {
    tern::net::TcpStream down;  // the client's connection to the proxy
    tern::net::TcpStream up;    // the proxy's connection to the server
    std::optional<Fault> fault;
    tern::Fiber to_server;
    tern::Fiber to_client;
  };

  void accept_loop() {
    for (;;) {
      tern::Result<tern::net::TcpStream> down = listener_.accept();
      if (!down) return;
      const int index = accepted_++;
      tern::Result<tern::net::TcpStream> up =
          tern::net::TcpStream::connect(upstream_, tern::deadline_after(std::chrono::seconds(10)));
      if (!up) continue;  // the client sees its connection closed
      auto link = std::make_unique<Link>();
      link->down = std::move(*down);
      link->up = std::move(*up);
      link->fault = plan_(index);
      Link* l = link.get();
      l->to_server = tern::spawn([this, l] { pump(*l, Direction::to_server); });
      l->to_client = tern::spawn([this, l] { pump(*l, Direction::to_client); });
      links_.push_back(std::move(link));
    }
  }

  // Forwards one direction until its source ends or the fault's byte count is reached.
  void pump(Link& link, Direction direction) {
    const bool to_server = direction == Direction::to_server;
    tern::net::TcpStream& from = to_server ? link.down : link.up;
    tern::net::TcpStream& to = to_server ? link.up : link.down;
    std::optional<std::size_t> budget;
    if (link.fault && link.fault->direction == direction) budget = link.fault->after_bytes;
    std::vector<std::byte> buf(64u << 10);
    std::size_t forwarded = 0;
    for (;;) {
      std::size_t want = buf.size();
      if (budget) want = std::min(want, *budget - forwarded);
      if (want == 0) {
        reset_and_close(to);
        from.close();
        ++faults_;
        return;
      }
      if (!from.is_open()) return;
      tern::Result<std::size_t> n = from.read(std::span(buf).first(want));
      if (!n || *n == 0) {
        // Pass the end on: a clean end as a half-close, a failure as a reset.
        if (n && to.is_open()) {
          (void)to.shutdown(SHUT_WR);
        } else if (to.is_open()) {
          reset_and_close(to);
        }
        return;
      }
      if (!to.is_open() || !to.write_all(std::span(buf).first(*n))) {
        from.close();
        return;
      }
      forwarded += *n;
    }
  }

  tern::net::Address upstream_;
  Plan plan_;
  tern::net::TcpListener listener_;
  tern::Fiber acceptor_;
  std::vector<std::unique_ptr<Link>> links_;
  int accepted_ = 0;
  int faults_ = 0;
};

}  // namespace tern_test
