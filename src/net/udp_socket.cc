#include "tern/net/udp_socket.h"

#include <cerrno>
#include <string>

#include "tern/io/io.h"

namespace tern::net {

Result<UdpSocket> UdpSocket::bind(const Address& address) {
  Result<Socket> socket = Socket::open(address.family(), SOCK_DGRAM);
  if (!socket) return fail(with_context(socket.error(), "socket for " + address.to_string()));
  if (::bind(socket->fd(), address.data(), address.length()) != 0) {
    return fail(with_context(std::error_code(errno, std::system_category()),
                             "bind " + address.to_string()));
  }
  UdpSocket udp;
  udp.socket_ = std::move(*socket);
  return udp;
}

Result<std::size_t> UdpSocket::send_to(std::span<const std::byte> datagram, const Address& to,
                                       Deadline deadline) {
  iovec iov = {const_cast<std::byte*>(datagram.data()), datagram.size()};
  msghdr message = {};
  message.msg_name = const_cast<sockaddr*>(to.data());
  message.msg_namelen = to.length();
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  return io::sendmsg(socket_.fd(), &message, 0, deadline);
}

Result<std::size_t> UdpSocket::receive_from(std::span<std::byte> buf, Address* from,
                                            Deadline deadline) {
  Address scratch;
  Address& into = from != nullptr ? *from : scratch;
  iovec iov = {buf.data(), buf.size()};
  msghdr message = {};
  message.msg_name = into.data();
  message.msg_namelen = Address::capacity();
  message.msg_iov = &iov;
  message.msg_iovlen = 1;
  Result<std::size_t> n = io::recvmsg(socket_.fd(), &message, 0, deadline);
  if (n) into.set_length(message.msg_namelen);
  return n;
}

}  // namespace tern::net
