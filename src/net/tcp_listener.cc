#include "tern/net/tcp_listener.h"

#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "net_log.h"
#include "tern/io/io.h"
#include "tern/prof/counter.h"

namespace tern::net {

namespace {

prof::Counter connections_accepted("net.connections_accepted",
                                   "Connections accepted by tern::net listeners");

Socket open_reserve() { return Socket(::open("/dev/null", O_RDONLY | O_CLOEXEC)); }

}  // namespace

Result<TcpListener> TcpListener::bind(const Address& address, const ListenOptions& options) {
  Result<Socket> socket = Socket::open(address.family(), SOCK_STREAM);
  if (!socket) return fail(socket.error());
  if (address.is_ip()) {
    if (options.reuse_address) {
      if (Result<void> r = socket->set_option(SOL_SOCKET, SO_REUSEADDR, 1); !r)
        return fail(r.error());
    }
    if (options.reuse_port) {
      if (Result<void> r = socket->set_option(SOL_SOCKET, SO_REUSEPORT, 1); !r)
        return fail(r.error());
    }
  }
  if (::bind(socket->fd(), address.data(), address.length()) != 0 ||
      ::listen(socket->fd(), options.backlog) != 0)
    return fail(std::error_code(errno, std::system_category()));
  TcpListener listener;
  listener.socket_ = std::move(*socket);
  listener.reserve_ = open_reserve();
  return listener;
}

Result<TcpStream> TcpListener::accept(Deadline deadline) { return accept(nullptr, deadline); }

Result<TcpStream> TcpListener::accept(Address* peer, Deadline deadline) {
  Address scratch;
  Address& into = peer != nullptr ? *peer : scratch;
  socklen_t length = Address::capacity();
  Result<int> fd = io::accept(socket_.fd(), into.data(), &length, deadline);
  if (!fd) {
    if (fd.error() == std::errc::too_many_files_open ||
        fd.error() == std::errc::too_many_files_open_in_system)
      return shed_one_connection(fd.error());
    return fail(fd.error());
  }
  into.set_length(length);
  connections_accepted.add();
  return TcpStream(Socket(*fd));
}

Result<TcpStream> TcpListener::shed_one_connection(std::error_code cause) {
  // Give up the reserve descriptor, take the pending connection with it, close it cleanly so
  // the peer sees a close instead of a hang, and keep a new reserve.
  reserve_.close();
  const int fd = ::accept4(socket_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0) ::close(fd);
  reserve_ = open_reserve();
  const std::string where = local_address() ? local_address()->to_string() : "?";
  detail::log_rate_limited("accept on " + where + ": " + cause.message() +
                           "; closed one pending connection");
  return fail(cause);
}

void TcpListener::close() noexcept {
  socket_.close();
  reserve_.close();
}

}  // namespace tern::net
