#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/net/tcp_stream.h"
#include "tern/tls/tls_context.h"

namespace tern::tls {

// Who the peer proved to be: its certificate's subject and subject alternative names.
struct PeerIdentity {
  bool has_certificate = false;    // the peer sent a certificate
  bool verified = false;           // and it verified against the context's CA bundle
  std::string subject;             // one line, RFC 2253 (e.g. "CN=client,O=tern")
  std::vector<std::string> names;  // DNS names, IP addresses and URIs of its SANs
};

// A TLS connection over a TcpStream with TcpStream's fiber-blocking API: every call parks the
// calling fiber (never its worker), takes a deadline (std::errc::timed_out) and is interrupted
// by Fiber::interrupt (operation_canceled), under either reactor. OpenSSL runs on the stream's
// own buffers, read and written in place; the socket I/O is TcpStream's. One fiber may read while
// another writes (one of each at a time), on the stream's worker. Move-only.
class TlsStream {
 public:
  // An empty stream (is_open() false; calls fail with TlsErrc::closed). Any thread.
  TlsStream() noexcept;
  TlsStream(TlsStream&&) noexcept;
  TlsStream& operator=(TlsStream&&) noexcept;
  // Closes the socket if it is open (without close_notify). Owner worker only.
  ~TlsStream();

  // Runs the client handshake over a connected stream. server_name is sent as SNI (unless it
  // is an IP address) and, when the context verifies, must match the server's certificate.
  // Worker fibers only.
  [[nodiscard]] static Result<TlsStream> connect(net::TcpStream tcp, const TlsContext& context,
                                                 std::string_view server_name,
                                                 Deadline handshake_deadline = kNoDeadline);
  // Connects to "host:port" and runs the client handshake with host as the server name; one
  // deadline for both. Worker fibers only.
  [[nodiscard]] static Result<TlsStream> connect(std::string_view host_port,
                                                 const TlsContext& context,
                                                 Deadline deadline = kNoDeadline);
  // Runs the server handshake over an accepted stream. A TLS 1.3 server's session tickets
  // leave with its first write, or before its first read waits (flush() sends them at once).
  // Worker fibers only.
  [[nodiscard]] static Result<TlsStream> accept(net::TcpStream tcp, const TlsContext& context,
                                                Deadline handshake_deadline = kNoDeadline);

  // Reads decrypted bytes, at most buf.size(), waiting until there are some; 0 means the peer
  // closed cleanly (close_notify). A close without close_notify fails with TlsErrc::truncated.
  [[nodiscard]] Result<std::size_t> read(std::span<std::byte> buf, Deadline deadline = kNoDeadline);
  // Reads exactly buf.size() bytes; Errc::eof if the peer closes cleanly first.
  [[nodiscard]] Result<void> read_exact(std::span<std::byte> buf, Deadline deadline = kNoDeadline);
  // Scatter read: fills iov in order with what is decrypted, waiting for at least one byte.
  [[nodiscard]] Result<std::size_t> readv(std::span<const iovec> iov,
                                          Deadline deadline = kNoDeadline);
  // Encrypts and sends all of buf; returns buf.size() (a TLS write is never partial).
  [[nodiscard]] Result<std::size_t> write(std::span<const std::byte> buf,
                                          Deadline deadline = kNoDeadline);
  // Encrypts and sends all of buf.
  [[nodiscard]] Result<void> write_all(std::span<const std::byte> buf,
                                       Deadline deadline = kNoDeadline);
  // Gather write of all of iov with one socket write for the lot; returns the bytes written.
  [[nodiscard]] Result<std::size_t> writev(std::span<const iovec> iov,
                                           Deadline deadline = kNoDeadline);
  // Gather write of all of iov (TcpStream's signature); iov is left as it was.
  [[nodiscard]] Result<void> writev_all(std::span<iovec> iov, Deadline deadline = kNoDeadline);

  // Encrypts all of buf and sends what the socket takes now, without waiting; returns
  // buf.size(). The rest of the ciphertext stays queued (unsent()) and leaves first with the
  // next write or flush(). With kernel TLS it sends nothing and returns 0. Worker fibers only.
  [[nodiscard]] Result<std::size_t> try_write(std::span<const std::byte> buf);
  // Sends what is queued now (records try_write() left, a server's tickets, a reply to a key
  // update) instead of with the next write or wait; a no-op when nothing waits. Worker fibers
  // only.
  [[nodiscard]] Result<void> flush(Deadline deadline = kNoDeadline);
  // Ciphertext bytes encrypted and not yet handed to the socket. Owner worker only.
  std::size_t unsent() const noexcept;

  // Sends close_notify and then shuts the socket down (SHUT_WR, or `how`): the peer reads a
  // clean end of stream. Worker fibers only.
  [[nodiscard]] Result<void> shutdown(int how = SHUT_WR, Deadline deadline = kNoDeadline);
  // Closes the socket without close_notify (the peer sees a truncation).
  void close() noexcept;
  // Whether the socket is open. Owner worker only.
  bool is_open() const noexcept;

  // A timeout for every later call made without a deadline (TcpStream::set_timeout).
  void set_timeout(std::chrono::nanoseconds timeout) noexcept;

  // The peer's certificate as verified in the handshake. Owner worker only.
  PeerIdentity peer_identity() const;
  // The protocol ALPN chose (empty: none). Owner worker only.
  std::string alpn() const;
  // Whether the handshake resumed an earlier session. Owner worker only.
  bool resumed() const noexcept;
  // Whether the kernel encrypts or decrypts this connection's records (the context asked for
  // kernel_tls and the kernel took them); false on user-space TLS. Owner worker only.
  bool kernel_tls() const noexcept;
  // "TLSv1.3" or "TLSv1.2". Owner worker only.
  std::string version() const;
  // The server name the client sent (SNI), or empty. Owner worker only.
  std::string server_name() const;
  // The TLS error that broke the stream (TlsErrc::truncated, protocol or certificate: every
  // later call fails with it), or an empty code while it is sound. Owner worker only.
  std::error_code failure() const noexcept;

  // The TCP connection underneath (addresses, options). Call flush() before writing to it
  // directly: a server's tickets may still wait in the stream. Owner worker only.
  net::TcpStream& tcp() noexcept;

 private:
  struct Impl;
  explicit TlsStream(std::unique_ptr<Impl> impl) noexcept;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::tls
