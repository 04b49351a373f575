#pragma once

#include <cstddef>
#include <span>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/address.h"
#include "tern/net/socket.h"

namespace tern::net {

// A UDP socket whose calls park the calling fiber. Move-only; use from worker fibers of one
// worker at a time.
class UdpSocket {
 public:
  UdpSocket() noexcept = default;

  // A socket bound to address (port 0: the kernel picks one); a failure's message names the
  // address ("bind 127.0.0.1:53: Address already in use").
  [[nodiscard]] static Result<UdpSocket> bind(const Address& address);

  // Sends one datagram to `to`.
  [[nodiscard]] Result<std::size_t> send_to(std::span<const std::byte> datagram, const Address& to,
                                            Deadline deadline = kNoDeadline);
  // Receives one datagram (truncated to buf.size()) and its sender.
  [[nodiscard]] Result<std::size_t> receive_from(std::span<std::byte> buf, Address* from,
                                                 Deadline deadline = kNoDeadline);

  [[nodiscard]] Result<Address> local_address() const { return socket_.local_address(); }
  void close() noexcept { socket_.close(); }
  int fd() const noexcept { return socket_.fd(); }

 private:
  Socket socket_;
};

}  // namespace tern::net
