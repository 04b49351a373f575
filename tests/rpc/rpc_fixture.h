#pragma once

// The preamble the end-to-end RPC tests share (rpc_test, stream_test, rpc_cluster_test,
// rpc_etcd_test): waiting on a condition, channel options that reconnect quickly, and a service
// started on a loopback server. Every test runs under the backend named by TERN_IO.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

#include "tern/base/clock.h"
#include "tern/net/address.h"
#include "tern/rpc/channel.h"
#include "tern/rpc/server.h"
#include "wait_for_condition.h"

namespace tern_test {

// How long a test waits for something that should happen at once (a passing test never waits
// this long: under TSan on a machine loaded 11 threads per core, 200 stream round trips took 11 s).
inline constexpr std::chrono::milliseconds kRpcPatience{30'000};

// Checks pred every millisecond until it holds or `limit` passes; whether it held. Worker fibers
// only.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = kRpcPatience) {
  return wait_until_condition(pred, tern::deadline_after(limit));
}

// Channel options that retry a lost connection quickly (20 ms first backoff, 100 ms at most, 2 s
// per attempt), so tests that stop and restart servers stay short, and send no keepalive pings
// (under TSan on a busy machine a pong queued behind a hundred streams missed its 5 s; the fault
// tests cover pings). Any thread.
inline tern::rpc::ChannelOptions quick_options() {
  tern::rpc::ChannelOptions options;
  options.reconnect.initial_backoff = std::chrono::milliseconds(20);
  options.reconnect.max_backoff = std::chrono::milliseconds(100);
  options.reconnect.attempt_timeout = std::chrono::seconds(2);
  options.ping_interval = std::chrono::milliseconds(0);
  return options;
}

// Adds `service` to `server` and starts it on 127.0.0.1:port (0: any free port); the address it
// listens on. A failure is reported to GoogleTest and gives 127.0.0.1:1, where nothing listens.
// From a worker fiber.
template <typename Service>
tern::net::Address start_on_loopback(tern::rpc::Server& server, Service& service,
                                     std::uint16_t port = 0) {
  EXPECT_TRUE(server.add_service(service));
  tern::Result<tern::net::Address> bound = server.start(tern::net::Address::loopback(port));
  if (!bound) {
    ADD_FAILURE() << "starting the server on 127.0.0.1:" << port << ": " << bound.error().message();
    return tern::net::Address::loopback(1);
  }
  return *bound;
}

}  // namespace tern_test
