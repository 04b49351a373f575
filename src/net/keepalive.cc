#include "keepalive.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <climits>
#include <cstdint>

namespace tern::net::detail {

Result<void> set_keepalive_probes(Socket& socket, const KeepaliveOptions& options) {
  if (options.idle.count() <= 0) return {};
  const auto seconds = [](std::chrono::seconds s) {
    return static_cast<int>(std::clamp<std::chrono::seconds::rep>(s.count(), 1, 32767));
  };
  const int count = std::clamp(options.count, 1, 127);
  const int idle = seconds(options.idle);
  const int interval = seconds(options.interval);
  if (Result<void> r = socket.set_option(SOL_SOCKET, SO_KEEPALIVE, 1); !r) return r;
  if (Result<void> r = socket.set_option(IPPROTO_TCP, TCP_KEEPIDLE, idle); !r) return r;
  if (Result<void> r = socket.set_option(IPPROTO_TCP, TCP_KEEPINTVL, interval); !r) return r;
  if (Result<void> r = socket.set_option(IPPROTO_TCP, TCP_KEEPCNT, count); !r) return r;
  // Without a user timeout, a peer that vanished while data waited for its acknowledgement is
  // given up on only after the retransmissions (about 15 minutes); with it, after the same time
  // an idle connection is given (from the values the kernel was given, after clamping).
  const std::int64_t give_up_ms = (std::int64_t{idle} + std::int64_t{interval} * count) * 1000;
  return socket.set_option(IPPROTO_TCP, TCP_USER_TIMEOUT,
                           static_cast<int>(std::min<std::int64_t>(give_up_ms, INT32_MAX)));
}

}  // namespace tern::net::detail
