#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <utility>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/io/io.h"
#include "tern/net/address.h"
#include "tern/net/tcp_stream.h"
#include "tern/tls/tls_stream.h"

namespace tern::rpc::detail {

// The byte stream an RPC connection runs over: a plain TcpStream or a TlsStream, chosen when
// the connection is made. Every call forwards to the one it holds after one branch, so plaintext
// connections pay no indirect call. Move-only; fibers of the connection's worker.
class Transport {
 public:
  // No stream (is_open() false).
  Transport() noexcept = default;
  // A plaintext connection.
  explicit Transport(net::TcpStream tcp) noexcept : tcp_(std::move(tcp)) {}
  // A TLS connection whose handshake is done.
  explicit Transport(tls::TlsStream tls) noexcept : tls_(std::move(tls)), secure_(true) {}

  [[nodiscard]] tern::Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline) {
    return secure_ ? tls_.read(buf, deadline) : tcp_.read(buf, deadline);
  }
  [[nodiscard]] tern::Result<std::size_t> write(std::span<const std::byte> buf, Deadline deadline) {
    return secure_ ? tls_.write(buf, deadline) : tcp_.write(buf, deadline);
  }
  [[nodiscard]] tern::Result<void> write_all(std::span<const std::byte> buf,
                                             Deadline deadline = kNoDeadline) {
    return secure_ ? tls_.write_all(buf, deadline) : tcp_.write_all(buf, deadline);
  }
  [[nodiscard]] tern::Result<void> writev_all(std::span<iovec> iov,
                                              Deadline deadline = kNoDeadline) {
    return secure_ ? tls_.writev_all(iov, deadline) : tcp_.writev_all(iov, deadline);
  }
  // Sends what the socket takes now without waiting. A TLS connection sends nothing here (a
  // record cannot be cut where the socket stops taking bytes): its writer fiber sends it all.
  [[nodiscard]] tern::Result<std::size_t> try_send(std::span<const std::byte> buf) {
    if (secure_) return std::size_t{0};
    return io::try_send(tcp_.fd(), buf);
  }

  // Closes the socket (a TLS connection without close_notify).
  void close() noexcept {
    if (secure_) {
      tls_.close();
    } else {
      tcp_.close();
    }
  }
  bool is_open() const noexcept { return secure_ ? tls_.is_open() : tcp_.is_open(); }

  // The TCP connection underneath (descriptor, addresses, socket options).
  net::TcpStream& tcp() noexcept { return secure_ ? tls_.tcp() : tcp_; }
  int fd() noexcept { return tcp().fd(); }
  [[nodiscard]] tern::Result<net::Address> peer_address() { return tcp().peer_address(); }
  [[nodiscard]] tern::Result<void> set_nodelay() { return tcp().set_nodelay(); }

  // The TLS session, or nullptr on a plaintext connection.
  tls::TlsStream* tls() noexcept { return secure_ ? &tls_ : nullptr; }

 private:
  net::TcpStream tcp_;
  tls::TlsStream tls_;
  bool secure_ = false;
};

}  // namespace tern::rpc::detail
