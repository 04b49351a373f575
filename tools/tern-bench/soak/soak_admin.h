#pragma once

#include <optional>
#include <string>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/address.h"

// What `tern-bench soak` reads from the server's admin endpoint (GET /metrics). Worker fibers of
// the client runtime.
namespace tern::bench {

// The server's counts of what should not outlive the clients, from one /metrics page (each a
// sum over the server's workers).
struct ServerCounts {
  double fibers_alive = 0;                     // tern_fibers_alive
  std::optional<double> timers_pending;        // tern_timers_pending (servers since it exists)
  std::optional<double> connections_open;      // tern_net_connections_open (TcpServer)
  std::optional<double> connections_rejected;  // tern_net_connections_rejected_total
};

// GETs /metrics from `admin` and reads the counts; fails (and says why) when the endpoint does
// not answer in time or the page has no tern_fibers_alive.
Result<ServerCounts> fetch_server_counts(const net::Address& admin, Deadline deadline,
                                         std::string* why);

// The counts once the server is quiet: reads them every 100 ms until two readings in a row
// agree on fibers and timers, or `within` has passed (then the last reading).
Result<ServerCounts> quiet_server_counts(const net::Address& admin,
                                         std::chrono::steady_clock::duration within,
                                         std::string* why);

// Whether `now` is back to `baseline`: no more fibers alive and no more timers pending.
bool back_to_baseline(const ServerCounts& baseline, const ServerCounts& now);

// How long the server took to get back to `baseline` after the clients left; reads every
// 100 ms until back_to_baseline or `within` has passed. The last reading in `last`.
struct SettleResult {
  bool back = false;
  double seconds = 0;  // until back, or until the reading gave up
  std::optional<ServerCounts> last;
  std::string error;  // the last reading that failed, if the last one did
};
SettleResult wait_for_baseline(const net::Address& admin, const ServerCounts& baseline,
                               std::chrono::steady_clock::duration within);

}  // namespace tern::bench
