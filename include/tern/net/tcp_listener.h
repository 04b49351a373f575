#pragma once

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/address.h"
#include "tern/net/socket.h"
#include "tern/net/tcp_stream.h"

namespace tern::net {

// How to listen.
struct ListenOptions {
  // Connections the kernel may queue for accept. The default asks for as many as it allows:
  // it caps the value at net.core.somaxconn (4096 since Linux 5.4). A full queue drops SYNs,
  // and each dropped connect waits a second for its retransmit.
  int backlog = 65535;
  bool reuse_address = true;  // SO_REUSEADDR (IP only)
  bool reuse_port = false;    // SO_REUSEPORT: several listeners share the port (IP only)
  // TCP_NODELAY on the listener (IP only): Linux copies it to every connection accepted from
  // it, which saves a system call per connection over setting it on each.
  bool nodelay = false;
  // Keepalive probing set on the listener (IP only; idle 0: none): every accepted connection
  // inherits SO_KEEPALIVE, TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT.
  KeepaliveOptions keepalive{};
  // SO_SNDBUF on the listener (IP only; 0: the kernel's default): accepted TCP connections
  // inherit it, and its lock against the kernel's automatic sizing.
  int send_buffer = 0;
  // TCP_DEFER_ACCEPT on the listener (IP only; 0: off): accept hands over a connection only once
  // its first bytes came, or once it has waited this many seconds, so for a protocol whose client
  // speaks first (TLS, HTTP) the first read finds them instead of parking; a connect that sends
  // nothing takes no descriptor until then.
  int defer_accept_s = 0;
};

// A listening stream socket (TCP or Unix). accept parks the calling fiber. When the process
// runs out of file descriptors (EMFILE/ENFILE), accept waits while no connection is pending; a
// connection that comes is closed cleanly using a reserved descriptor, logged, and accept fails
// with std::errc::too_many_files_open instead of spinning. Move-only; use from worker fibers of
// one worker at a time.
class TcpListener {
 public:
  TcpListener() noexcept = default;

  // Binds to address (port 0: the kernel picks one; see local_address) and listens. A failure's
  // message names the step and the address ("bind 127.0.0.1:80: Address already in use").
  [[nodiscard]] static Result<TcpListener> bind(const Address& address,
                                                const ListenOptions& options = {});

  // Accepts one connection.
  [[nodiscard]] Result<TcpStream> accept(Deadline deadline = kNoDeadline);
  // As accept, also giving the peer's address.
  [[nodiscard]] Result<TcpStream> accept(Address* peer, Deadline deadline = kNoDeadline);

  [[nodiscard]] Result<Address> local_address() const { return socket_.local_address(); }
  // Stops listening; fibers of this worker waiting in accept wake with operation_canceled.
  void close() noexcept;
  bool is_open() const noexcept { return socket_.is_open(); }
  int fd() const noexcept { return socket_.fd(); }

 private:
  // Out of descriptors: closes the pending connection with the reserve descriptor (when there
  // is one) and logs it; false when no connection is pending.
  bool shed_one_connection(std::error_code cause);
  Socket socket_;
  Socket reserve_;  // a spare descriptor given up to accept-and-close when out of descriptors
};

using UnixListener = TcpListener;

}  // namespace tern::net
