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
  // The most plaintext try_send() encrypts at once on a TLS connection: one full record.
  static constexpr std::size_t kTlsTrySendLimit = 16 * 1024;

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
  // Sends what the socket takes now without waiting; returns the bytes of buf taken. A TLS
  // connection takes up to one record's worth (kTlsTrySendLimit) whole: it encrypts it and
  // keeps the ciphertext the socket did not take for flush() (unsent()). More than that, or
  // kernel TLS, it leaves to the writer, which encrypts and sends in chunks.
  [[nodiscard]] tern::Result<std::size_t> try_send(std::span<const std::byte> buf) {
    if (secure_) return buf.size() <= kTlsTrySendLimit ? tls_.try_write(buf) : std::size_t{0};
    return io::try_send(tcp_.fd(), buf);
  }
  // Bytes try_send() took but left unsent (TLS ciphertext; always 0 in plaintext).
  std::size_t unsent() const noexcept { return secure_ ? tls_.unsent() : 0; }
  // Sends what try_send() left unsent, waiting for the socket.
  [[nodiscard]] tern::Result<void> flush(Deadline deadline = kNoDeadline) {
    if (secure_) return tls_.flush(deadline);
    return {};
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
