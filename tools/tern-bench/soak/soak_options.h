#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/options.h"
#include "tern/net/address.h"

namespace CLI {
class App;
}

// The options of `tern-bench soak`: which scenario, how much load, how long, and what to watch on
// the server. Registered and checked on the thread that parses.
namespace tern::bench {

// One soak run (docs/tern-bench.md, "soak").
struct SoakOptions {
  std::string scenario = "echo";  // echo, rpc, idle or flood
  NetworkOptions net;             // target, --name, --server-pid, --io, --workers, --duration
  std::size_t connections = 0;    // echo/idle: connections; rpc: callers; flood: ping-pong clients
  std::size_t shared = 0;         // rpc: the callers share this many channels (0: one each)
  std::size_t message_bytes = 64;
  double think_ms = 0;  // echo: pause between one connection's round trips
  double warmup_s = 5;  // samples before this (from the start of the load) are not fitted
  double hold_s = 3;    // idle: how long the connections stay open
  std::uint64_t flood_connects = 20000;
  double flood_s = 3;      // flood: the seconds over which the connects are spread
  std::string admin_text;  // HOST:PORT of the server's admin endpoint; empty: not read
  double settle_s = 10;    // how long the server may take to get back to its baseline
  double timeout_s = 10;   // one connect or round trip (or call) before it counts as failed
  std::size_t connect_in_flight = 256;  // connects under way at once, per client worker
  std::size_t max_idle_bytes = 0;       // idle: fail when a connection costs more (0: no check)
  std::uint32_t abusers = 0;            // rpc: abusive clients of each kind beside the callers
  double max_p99_ms = 0;                // rpc: fail when the calls' p99 latency is over (0: none)
  double abuse_interval_ms = 10;        // rpc: the abusive clients' pause between attacks
  double max_server_rss_mib = 0;        // rpc: fail when the server's RSS is over (0: none)

  std::optional<net::Address> admin;  // parsed from admin_text by the checks
};

// The scenario defaults: connections (echo 10,000, idle 10,000, rpc 1,000 callers, flood 50
// clients). Any thread.
std::size_t default_soak_connections(const std::string& scenario);

// Adds the `soak` subcommand with its options and checks to `app`; `options` must outlive it.
CLI::App* add_soak_options(CLI::App& app, SoakOptions& options);

// The checks across options, run after parsing: fills in defaults (connections, workers,
// duration) and the parsed target and admin address; returns what is wrong, or "".
std::string check_options(SoakOptions& options);

}  // namespace tern::bench
