// Helpers shared by the net layer tests (tests/net/*_test.cc): runtimes, byte/text conversions,
// a loopback connection, a running checksum and bounded condition waits.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"
#include "wait_for_condition.h"

namespace tern_test {

using namespace std::chrono_literals;

// A safety net for waits that something else must end promptly: a bug fails the test instead
// of hanging it. Never a guess at how long something takes.
inline constexpr auto kPatience = 20s;
inline tern::Deadline patience() { return tern::deadline_after(kPatience); }

// Runs fn as the first fiber of a fresh runtime with `workers` workers (with reactors of the
// backend TERN_IO names); returns once the runtime has shut down.
template <typename Fn>
void run_on(std::size_t workers, Fn&& fn) {
  tern::Runtime runtime(tern::RuntimeOptions{.workers = workers});
  runtime.run(std::forward<Fn>(fn));
}

inline std::span<const std::byte> bytes_of(std::string_view text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

inline std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// Runs a callable when the scope ends (e.g. WaitGroup::done even if an ASSERT returns early).
template <typename Fn>
class Defer {
 public:
  explicit Defer(Fn fn) : fn_(std::move(fn)) {}
  Defer(const Defer&) = delete;
  Defer& operator=(const Defer&) = delete;
  ~Defer() { fn_(); }

 private:
  Fn fn_;
};

// A connected loopback TCP pair and the listener that accepted it.
struct Connected {
  tern::net::TcpListener listener;
  tern::net::TcpStream client;
  tern::net::TcpStream server;
};

// Listens on 127.0.0.1 (port 0), connects to it and accepts. Worker fibers only.
inline tern::Result<Connected> connect_loopback(const tern::net::ListenOptions& options = {}) {
  Connected pair;
  tern::Result<tern::net::TcpListener> listener =
      tern::net::TcpListener::bind(tern::net::Address::loopback(0), options);
  if (!listener) return tern::fail(listener.error());
  pair.listener = std::move(*listener);
  tern::Result<tern::net::Address> address = pair.listener.local_address();
  if (!address) return tern::fail(address.error());
  tern::Result<tern::net::TcpStream> client = tern::net::TcpStream::connect(*address, patience());
  if (!client) return tern::fail(client.error());
  pair.client = std::move(*client);
  tern::Result<tern::net::TcpStream> server = pair.listener.accept(patience());
  if (!server) return tern::fail(server.error());
  pair.server = std::move(*server);
  return pair;
}

// 64-bit FNV-1a over a byte stream, fed in pieces: order, loss and duplication all change it.
class Fnv64 {
 public:
  void update(std::span<const std::byte> bytes) noexcept {
    for (std::byte b : bytes) {
      hash_ ^= static_cast<std::uint8_t>(b);
      hash_ *= 0x100000001b3ull;
    }
    size_ += bytes.size();
  }
  std::uint64_t value() const noexcept { return hash_; }
  std::size_t size() const noexcept { return size_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
  std::size_t size_ = 0;
};

// Fills bytes with a pseudo-random pattern that depends on `state` (advanced).
inline void fill_pattern(std::span<std::byte> bytes, std::uint64_t& state) noexcept {
  for (std::byte& b : bytes) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    b = static_cast<std::byte>(state >> 24);
  }
}

// wait_until_condition (wait_for_condition.h) with patience() as the deadline unless one is given.
// Worker fibers only.
template <typename Pred>
bool wait_for_condition(Pred pred, tern::Deadline deadline = patience()) {
  return wait_until_condition(pred, deadline);
}

}  // namespace tern_test
