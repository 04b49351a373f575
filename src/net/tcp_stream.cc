#include "tern/net/tcp_stream.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include <algorithm>
#include <string>
#include <system_error>

#include "keepalive.h"
#include "tern/io/io.h"

namespace tern::net {

namespace {

// Opens a stream socket for address, bound to `source` first when one is given. Failures name
// what the socket was for.
Result<Socket> open_for(const Address& address, const Address* source) {
  Result<Socket> socket = Socket::open(address.family(), SOCK_STREAM);
  if (!socket) return fail(with_context(socket.error(), "socket for " + address.to_string()));
  if (address.is_ip()) io::declare_tcp(socket->fd());  // the reactor need not ask its kind
  if (source == nullptr) return socket;
  // Without this, bind would pick the port for the source address alone, one connection per
  // port; with it, connect picks one for the whole address pair.
  if (source->is_ip() && source->port() == 0)
    (void)socket->set_option(IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1);
  if (::bind(socket->fd(), source->data(), source->length()) != 0)
    return fail(with_context(std::error_code(errno, std::system_category()),
                             "bind " + source->to_string() + " to connect " + address.to_string()));
  return socket;
}

// Connects an open socket. Failures name the address: "connect 127.0.0.1:1: Connection refused".
Result<TcpStream> connect_socket(Result<Socket> socket, const Address& address, Deadline deadline) {
  if (!socket) return fail(socket.error());
  if (Result<void> connected =
          io::connect(socket->fd(), address.data(), address.length(), deadline);
      !connected)
    return fail(with_context(connected.error(), "connect " + address.to_string()));
  return TcpStream(std::move(*socket));
}

}  // namespace

Result<TcpStream> TcpStream::connect(const Address& address, Deadline deadline) {
  return connect_socket(open_for(address, nullptr), address, deadline);
}

Result<TcpStream> TcpStream::connect_from(const Address& source, const Address& address,
                                          Deadline deadline) {
  return connect_socket(open_for(address, &source), address, deadline);
}

Result<TcpStream> TcpStream::connect(std::string_view host_port, Deadline deadline) {
  // Text that is not an address and names that do not resolve fail with resolve()'s error.
  Result<std::vector<Address>> addresses = resolve(host_port);
  if (!addresses) return fail(addresses.error());
  std::error_code last;
  for (const Address& address : *addresses) {
    Result<TcpStream> stream = connect(address, deadline);
    if (stream) return stream;
    last = stream.error();
    if (last == std::errc::timed_out || last == std::errc::operation_canceled) break;
  }
  return fail(last);
}

Result<void> TcpStream::read_exact(std::span<std::byte> buf, Deadline deadline) {
  while (!buf.empty()) {
    Result<std::size_t> n = io::recv(socket_.fd(), buf, 0, effective(deadline));
    if (!n) return fail(n.error());
    if (*n == 0) return fail(Errc::eof);
    buf = buf.subspan(*n);
  }
  return {};
}

Result<void> TcpStream::wait_readable(Deadline deadline) {
  return io::wait_data(socket_.fd(), effective(deadline).fix());
}

Result<std::size_t> TcpStream::write(std::span<const std::byte> buf, Deadline deadline) {
  return io::send(socket_.fd(), buf, 0, effective(deadline));
}

namespace {

// send(2)'s flags for a write's Flush.
constexpr int send_flags(Flush flush) noexcept { return flush == Flush::later ? MSG_MORE : 0; }

}  // namespace

Result<void> TcpStream::write_all(std::span<const std::byte> buf, Deadline deadline, Flush flush) {
  const int flags = send_flags(flush);
  while (!buf.empty()) {
    Result<std::size_t> n = io::send(socket_.fd(), buf, flags, effective(deadline));
    if (!n) return fail(n.error());
    buf = buf.subspan(*n);
  }
  return {};
}

Result<std::size_t> TcpStream::readv(std::span<const iovec> iov, Deadline deadline) {
  msghdr message = {};
  message.msg_iov = const_cast<iovec*>(iov.data());
  message.msg_iovlen = iov.size();
  return io::recvmsg(socket_.fd(), &message, 0, effective(deadline));
}

namespace {

// TcpStream::writev, inline in writev_all: one piece (a frame16 reply, header and payload read
// together) is a plain send, which spares the kernel copying in and checking a message header
// and an iovec array.
inline Result<std::size_t> send_pieces(int fd, std::span<const iovec> iov, WaitLimit limit,
                                       int flags = 0) {
  if (iov.size() == 1)
    return io::send(fd, {static_cast<const std::byte*>(iov[0].iov_base), iov[0].iov_len}, flags,
                    limit);
  msghdr message = {};
  message.msg_iov = const_cast<iovec*>(iov.data());
  message.msg_iovlen = std::min<std::size_t>(iov.size(), IOV_MAX);
  return io::sendmsg(fd, &message, flags, limit);
}

}  // namespace

Result<std::size_t> TcpStream::writev(std::span<const iovec> iov, Deadline deadline) {
  return send_pieces(socket_.fd(), iov, effective(deadline));
}

Result<void> TcpStream::writev_all(std::span<iovec> iov, Deadline deadline, Flush flush) {
  const int flags = send_flags(flush);
  if (iov.size() == 1) {  // one piece (a frame16 reply): plain sends, no walk over the pieces
    iovec& piece = iov.front();
    while (piece.iov_len > 0) {
      Result<std::size_t> n =
          io::send(socket_.fd(), {static_cast<const std::byte*>(piece.iov_base), piece.iov_len},
                   flags, effective(deadline));
      if (!n) return fail(n.error());
      piece.iov_base = static_cast<char*>(piece.iov_base) + *n;
      piece.iov_len -= *n;
    }
    return {};
  }
  while (!iov.empty()) {
    if (iov.front().iov_len == 0) {
      iov = iov.subspan(1);
      continue;
    }
    Result<std::size_t> n = send_pieces(socket_.fd(), iov, effective(deadline), flags);
    if (!n) return fail(n.error());
    std::size_t left = *n;
    while (left > 0) {
      const std::size_t step = std::min(left, iov.front().iov_len);
      iov.front().iov_base = static_cast<char*>(iov.front().iov_base) + step;
      iov.front().iov_len -= step;
      left -= step;
      if (iov.front().iov_len == 0) iov = iov.subspan(1);
    }
  }
  return {};
}

Result<void> TcpStream::flush() {
  // Clearing TCP_CORK (off already: tern never sets it) makes Linux push the queued bytes,
  // whatever TCP_NODELAY says; setting TCP_NODELAY would also push, but change the socket.
  return socket_.set_option(IPPROTO_TCP, TCP_CORK, 0);
}

Result<void> TcpStream::shutdown(int how) {
  if (::shutdown(socket_.fd(), how) != 0)
    return fail(std::error_code(errno, std::system_category()));
  return {};
}

Result<void> TcpStream::set_nodelay(bool on) {
  return socket_.set_option(IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0);
}

Result<void> TcpStream::set_keepalive(bool on) {
  return socket_.set_option(SOL_SOCKET, SO_KEEPALIVE, on ? 1 : 0);
}

Result<void> TcpStream::set_keepalive_probes(const KeepaliveOptions& options) {
  return detail::set_keepalive_probes(socket_, options);
}

Result<void> TcpStream::set_send_buffer(int bytes) {
  return socket_.set_option(SOL_SOCKET, SO_SNDBUF, bytes);
}

Result<void> TcpStream::set_receive_buffer(int bytes) {
  return socket_.set_option(SOL_SOCKET, SO_RCVBUF, bytes);
}

}  // namespace tern::net
