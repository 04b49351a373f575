#pragma once

#include "tern/base/result.h"
#include "tern/net/socket.h"
#include "tern/net/tcp_stream.h"

namespace tern::net::detail {

// Turns on keepalive probing of `socket` as `options` says (TCP only; idle 0 leaves the socket
// as it is). On a listener, every connection accepted from it inherits the setting. Any thread.
[[nodiscard]] Result<void> set_keepalive_probes(Socket& socket, const KeepaliveOptions& options);

}  // namespace tern::net::detail
