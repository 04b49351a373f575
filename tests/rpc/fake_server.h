#pragma once

// A listener on 127.0.0.1 that speaks the RPC protocol as badly as a test needs: every connection
// runs the test's behaviour in a fiber of its own. For the tests of how a Channel copes with
// servers that misbehave.

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tern/base/clock.h"
#include "tern/fiber/fiber.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace tern_test {

// Runs `behaviour` (with the connection's index, from 0) on every accepted connection. Worker
// fibers of one worker.
class FakeServer {
 public:
  using Behaviour = std::function<void(tern::net::TcpStream& stream, int index)>;

  explicit FakeServer(Behaviour behaviour) : behaviour_(std::move(behaviour)) {}
  ~FakeServer() { stop(); }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  // Starts listening and accepting; the address to connect to.
  tern::net::Address start() {
    using tern::net::Address;
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(Address::loopback(0));
    EXPECT_TRUE(listener) << listener.error().message();
    if (!listener) return Address::loopback(1);
    listener_ = std::move(*listener);
    tern::Result<Address> bound = listener_.local_address();
    EXPECT_TRUE(bound);
    acceptor_ = tern::spawn([this] { accept_loop(); }, {.name = "fake server"});
    return bound ? *bound : Address::loopback(1);
  }

  // Stops accepting and ends every connection.
  void stop() {
    if (!acceptor_.joinable()) return;
    listener_.close();
    acceptor_.join();
    for (auto& stream : streams_) {
      if (stream->is_open()) (void)stream->shutdown(SHUT_RDWR);
    }
    for (tern::Fiber& connection : connections_) {
      connection.interrupt();
      connection.join();
    }
  }

  // Connections accepted so far.
  int accepted() const { return static_cast<int>(accept_times_.size()); }
  // When each connection was accepted.
  const std::vector<tern::Clock::time_point>& accept_times() const { return accept_times_; }
  // Connections whose behaviour has returned.
  int finished() const { return finished_; }

 private:
  void accept_loop() {
    for (;;) {
      tern::Result<tern::net::TcpStream> stream = listener_.accept();
      if (!stream) return;
      accept_times_.push_back(tern::Clock::now());
      const int index = static_cast<int>(streams_.size());
      streams_.push_back(std::make_unique<tern::net::TcpStream>(std::move(*stream)));
      tern::net::TcpStream* accepted = streams_.back().get();
      connections_.push_back(tern::spawn([this, accepted, index] {
        behaviour_(*accepted, index);
        ++finished_;
      }));
    }
  }

  Behaviour behaviour_;
  tern::net::TcpListener listener_;
  tern::Fiber acceptor_;
  std::vector<std::unique_ptr<tern::net::TcpStream>> streams_;
  std::vector<tern::Fiber> connections_;
  std::vector<tern::Clock::time_point> accept_times_;
  int finished_ = 0;
};

}  // namespace tern_test
