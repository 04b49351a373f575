#pragma once

#include <chrono>
#include <cstdint>

#include "core/report.h"
#include "tern/base/clock.h"
#include "tern/fiber/event.h"
#include "tern/fiber/wait_group.h"
#include "tern/net/address.h"

// The abusive clients of the rpc soak's abusive run (`tern-bench soak --scenario rpc --abusers
// N`): beside the well-behaved callers, N clients of each kind attack the server the way one
// untrusted peer can, speaking the frame format of docs/rpc-protocol.md by hand:
//   bomb       requests whose zstd body declares 64 MiB (about 2 KiB on the wire), one after
//              another, reading each answer; a new connection when the server closes one
//   ping       batches of 100 pings, never reading a pong
//   unread     batches of 100 calls of BenchmarkService/Say, never reading a reply
//   reset      20 pipelined calls and cancels of half of them, then a reset (SO_LINGER 0), on a
//              new connection each time
// Each client pauses `interval` between its bombs, batches and connections (0: none, a flood as
// fast as the server takes it).
// What they do is counted in the report's figures (abuse_*), never as the run's errors: the run
// fails on the well-behaved callers' errors and latency and on the server's health. Fibers of
// the client runtime's worker 0.
namespace tern::bench {

struct AbuseCounts {
  std::uint64_t bombs = 0;          // bomb requests sent
  std::uint64_t bomb_answers = 0;   // of those, answered (any status)
  std::uint64_t pings = 0;          // pings written by the ping clients
  std::uint64_t unread_calls = 0;   // calls written by the unread clients
  std::uint64_t resets = 0;         // connections the reset clients reset
  std::uint64_t server_closes = 0;  // connections of the abusers the server closed
  std::uint64_t connects = 0;       // connections the abusers opened
  std::uint64_t connect_failures = 0;
};

// The abusive clients of one run: start() spawns them, they wait for `go` and attack until
// `end` (read once `go` is set); wait() returns when all have stopped.
class Abusers {
 public:
  Abusers(net::Address server, std::uint32_t per_kind, std::chrono::microseconds interval)
      : server_(server), per_kind_(per_kind), interval_(interval) {}

  // Spawns per_kind clients of each kind on the calling worker. Worker 0's fibers.
  void start(Event& go, const Deadline& end);
  // Waits until every client has stopped (they stop at `end`).
  void wait();
  // Puts the counts into `figures` as abuse_*.
  void report(Json& figures) const;

 private:
  void bomb(Event& go, const Deadline& end);
  void flood(Event& go, const Deadline& end, bool calls);
  void reset(Event& go, const Deadline& end);
  // The pause between two attacks; false when the fiber was interrupted.
  bool pause();

  net::Address server_;
  std::uint32_t per_kind_;
  std::chrono::microseconds interval_;
  AbuseCounts counts_;
  WaitGroup running_;
};

}  // namespace tern::bench
