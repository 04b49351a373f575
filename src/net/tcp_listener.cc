#include "tern/net/tcp_listener.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>

#include "keepalive.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/io/io.h"
#include "tern/log/peer_log.h"

namespace tern::net {

namespace {

Socket open_reserve() { return Socket(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

}  // namespace

Result<TcpListener> TcpListener::bind(const Address& address, const ListenOptions& options) {
  // Each failure names its step and the address: "bind 127.0.0.1:80: Address already in use".
  const auto failed = [&](std::string_view step, std::error_code error) {
    std::string context(step);
    context.append(" ").append(address.to_string());
    return fail(with_context(error, context));
  };
  Result<Socket> socket = Socket::open(address.family(), SOCK_STREAM);
  if (!socket) return failed("socket for", socket.error());
  if (address.is_ip()) {
    if (options.reuse_address) {
      if (Result<void> r = socket->set_option(SOL_SOCKET, SO_REUSEADDR, 1); !r)
        return failed("SO_REUSEADDR on", r.error());
    }
    if (options.reuse_port) {
      if (Result<void> r = socket->set_option(SOL_SOCKET, SO_REUSEPORT, 1); !r)
        return failed("SO_REUSEPORT on", r.error());
    }
    if (options.nodelay) {
      if (Result<void> r = socket->set_option(IPPROTO_TCP, TCP_NODELAY, 1); !r)
        return failed("TCP_NODELAY on", r.error());
    }
    if (Result<void> r = detail::set_keepalive_probes(*socket, options.keepalive); !r)
      return failed("keepalive on", r.error());
    if (options.send_buffer > 0) {
      if (Result<void> r = socket->set_option(SOL_SOCKET, SO_SNDBUF, options.send_buffer); !r)
        return failed("SO_SNDBUF on", r.error());
    }
    if (options.defer_accept_s > 0) {
      if (Result<void> r =
              socket->set_option(IPPROTO_TCP, TCP_DEFER_ACCEPT, options.defer_accept_s);
          !r)
        return failed("TCP_DEFER_ACCEPT on", r.error());
    }
  }
  if (::bind(socket->fd(), address.data(), address.length()) != 0)
    return failed("bind", std::error_code(errno, std::system_category()));
  if (::listen(socket->fd(), options.backlog) != 0)
    return failed("listen on", std::error_code(errno, std::system_category()));
  TcpListener listener;
  listener.socket_ = std::move(*socket);
  listener.reserve_ = open_reserve();
  return listener;
}

Result<TcpStream> TcpListener::accept(Deadline deadline) { return accept(nullptr, deadline); }

Result<TcpStream> TcpListener::accept(Address* peer, Deadline deadline) {
  for (;;) {
    // Without `peer`, no address is asked for (io_uring's multishot accept would ask each
    // connection for it with a getpeername).
    socklen_t length = Address::capacity();
    Result<int> fd = io::accept(socket_.fd(), peer != nullptr ? peer->data() : nullptr,
                                peer != nullptr ? &length : nullptr, deadline);
    if (fd) {
      if (peer != nullptr) peer->set_length(length);
      // The spare is lost when the descriptor freed for it went elsewhere (another thread, or a
      // limit lowered below it); descriptors are available again, so take one back.
      if (!reserve_.is_open()) reserve_ = open_reserve();
      return TcpStream(Socket(*fd));
    }
    if (fd.error() != std::errc::too_many_files_open &&
        fd.error() != std::errc::too_many_files_open_in_system)
      return fail(fd.error());
    if (shed_one_connection(fd.error())) return fail(fd.error());
    // Linux takes the new descriptor before it looks for a connection, so with a full table
    // every accept fails, connection or not: wait for one instead of failing in a loop.
    if (Result<void> ready = io::wait_readable(socket_.fd(), deadline); !ready)
      return fail(ready.error());
  }
}

bool TcpListener::shed_one_connection(std::error_code cause) {
  pollfd pending = {.fd = socket_.fd(), .events = POLLIN, .revents = 0};
  if (tern::detail::sys.poll(&pending, 1, 0) != 1 || (pending.revents & POLLIN) == 0) return false;
  // Give up the reserve descriptor, take the pending connection with it, close it cleanly so
  // the peer sees a close instead of a hang, and keep a new reserve.
  reserve_.close();
  const int fd =
      tern::detail::sys.accept4(socket_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) tern::detail::sys.close(fd);
  reserve_ = open_reserve();
  const std::string where = local_address() ? local_address()->to_string() : "?";
  TERN_PEER_LOG_WARN("accept on {}: {}; {}", where, cause.message(),
                     fd >= 0 ? "closed one pending connection"
                             : "no spare descriptor to close a pending connection with");
  return true;
}

void TcpListener::close() noexcept {
  socket_.close();
  reserve_.close();
}

}  // namespace tern::net
