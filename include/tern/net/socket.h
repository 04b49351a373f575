#pragma once

#include <utility>

#include "tern/base/result.h"
#include "tern/net/address.h"

namespace tern::net {

// Owns a non-blocking socket file descriptor and closes it (through tern::io, which wakes any
// fiber still waiting on it) when destroyed. The base of every socket type. Move-only; use from
// one worker at a time.
class Socket {
 public:
  Socket() noexcept = default;
  // Adopts fd (which must be non-blocking).
  explicit Socket(int fd) noexcept : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept;
  ~Socket() { close(); }

  // Makes a non-blocking, close-on-exec socket. Any thread.
  [[nodiscard]] static Result<Socket> open(int family, int type, int protocol = 0);

  int fd() const noexcept { return fd_; }
  bool is_open() const noexcept { return fd_ >= 0; }
  // Gives up ownership of the descriptor and returns it.
  int release() noexcept { return std::exchange(fd_, -1); }
  // Closes the socket; fibers of this worker waiting on it wake with operation_canceled.
  void close() noexcept;

  // The address this socket is bound to.
  [[nodiscard]] Result<Address> local_address() const;
  // The address of the connected peer.
  [[nodiscard]] Result<Address> peer_address() const;
  // setsockopt(2) of an int option.
  [[nodiscard]] Result<void> set_option(int level, int name, int value);
  // getsockopt(2) of an int option.
  [[nodiscard]] Result<int> get_option(int level, int name) const;

 private:
  int fd_ = -1;
};

}  // namespace tern::net
