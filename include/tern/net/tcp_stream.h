#pragma once

#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/wait_limit.h"
#include "tern/io/io.h"
#include "tern/net/address.h"
#include "tern/net/socket.h"

namespace tern::net {

// TCP keepalive probing of a connection whose peer may vanish without a FIN or RST (a host that
// died, a cut link): after `idle` with nothing received, a probe every `interval`; `count` probes
// unanswered (or data unacknowledged for idle + interval * count) and the kernel drops the
// connection, so a read waiting on it fails with std::errc::timed_out. idle 0: no probing.
struct KeepaliveOptions {
  std::chrono::seconds idle{0};
  std::chrono::seconds interval{10};
  int count = 3;
};

class Buffer;

// When a write's bytes leave: at once (the default; with TCP_NODELAY, in a segment of their own),
// or held back (MSG_MORE) until a later write with Flush::now or flush() sends them together
// with its own, or a full segment has gathered. A server answering a batch of requests that
// more_queued() says is already there holds each answer but the last: fewer, larger segments,
// which costs the kernel less per byte on both ends. Anything held must be sent: end every run
// of Flush::later writes with a Flush::now write or flush().
enum class Flush { now, later };

// A connected stream socket (TCP over IPv4/IPv6, or a Unix stream socket) whose calls park the
// calling fiber, not its worker. Every call takes a deadline (tern::deadline_exceeded(), equal
// to std::errc::timed_out) and is interruptible (operation_canceled). Move-only; use from worker
// fibers of one worker at a time.
//
// One reader and one writer at once: a fiber may read (read, read_exact, readv, read_until,
// wait_readable) while another fiber of the same worker writes (write, write_all, writev,
// writev_all), full duplex. Two fibers reading at once, or two writing at once, are not allowed
// (their bytes would interleave in no defined order), nor closing or moving the stream while
// another fiber uses it; shutdown(SHUT_WR) from the writer while the reader reads is fine.
class TcpStream {
 public:
  TcpStream() noexcept = default;
  // Adopts a connected non-blocking socket.
  explicit TcpStream(Socket socket) noexcept : socket_(std::move(socket)) {}

  // Connects to address; a failure's message names it ("connect 127.0.0.1:1: Connection
  // refused").
  [[nodiscard]] static Result<TcpStream> connect(const Address& address,
                                                 Deadline deadline = kNoDeadline);
  // Connects to address from the local address `source` (bind before connect, as a client with
  // several addresses or a load generator spreading its connections over 127.0.0.0/8 needs).
  // With source port 0 the port is chosen by connect for the whole address pair
  // (IP_BIND_ADDRESS_NO_PORT), so a source address has the ephemeral range to itself for every
  // destination. A failure's message names both ("bind 127.0.0.2:0 to connect 127.0.0.1:80:
  // ..."). Worker fibers.
  [[nodiscard]] static Result<TcpStream> connect_from(const Address& source, const Address& address,
                                                      Deadline deadline = kNoDeadline);
  // Resolves "host:port" (see resolve(): text that is not an address and names that do not
  // resolve fail as it does) and connects to the first address that accepts.
  [[nodiscard]] static Result<TcpStream> connect(std::string_view host_port,
                                                 Deadline deadline = kNoDeadline);

  // Reads what is available, at most buf.size() bytes, waiting until there is something;
  // 0 means the peer closed its side. Inline: a server's read loop calls tern::io directly.
  [[nodiscard]] Result<std::size_t> read(std::span<std::byte> buf,
                                         Deadline deadline = kNoDeadline) {
    return io::recv(socket_.fd(), buf, 0, effective(deadline));
  }
  // Reads exactly buf.size() bytes; Errc::eof if the stream ends first.
  [[nodiscard]] Result<void> read_exact(std::span<std::byte> buf, Deadline deadline = kNoDeadline);
  // Reads into `buffer` until its readable bytes hold `delim` (asio's read_until); returns the
  // offset just past the first delimiter, so the line is buffer.text().substr(0, n) and
  // buffer.consume(n) drops it. Bytes after the delimiter stay in the buffer for the next call,
  // which looks there first. A line (delimiter included) longer than max_bytes fails with
  // std::errc::message_size; the end of the stream before a delimiter fails with Errc::eof (a
  // partial line, if any, stays in the buffer). The deadline covers the whole call (without one,
  // the stream's timeout bounds each read). Worker fibers only.
  [[nodiscard]] Result<std::size_t> read_until(Buffer& buffer, std::string_view delim,
                                               std::size_t max_bytes,
                                               Deadline deadline = kNoDeadline);
  // Waits until a read would not wait (data, the peer's close or an error is there) without
  // reading anything: a server can take a read buffer only once a connection has data.
  [[nodiscard]] Result<void> wait_readable(Deadline deadline = kNoDeadline);
  // Writes some of buf, waiting until at least one byte can be written.
  [[nodiscard]] Result<std::size_t> write(std::span<const std::byte> buf,
                                          Deadline deadline = kNoDeadline);
  // Writes all of buf (Flush::later: held back, see Flush).
  [[nodiscard]] Result<void> write_all(std::span<const std::byte> buf,
                                       Deadline deadline = kNoDeadline, Flush flush = Flush::now);
  // Scatter read into iov (one system call when data is there).
  [[nodiscard]] Result<std::size_t> readv(std::span<const iovec> iov,
                                          Deadline deadline = kNoDeadline);
  // Gather write of iov; may write less than all of it.
  [[nodiscard]] Result<std::size_t> writev(std::span<const iovec> iov,
                                           Deadline deadline = kNoDeadline);
  // Gather write of all of iov (e.g. a header and a body in one system call); iov's entries
  // are advanced past what was written.
  // Flush::later: held back, see Flush.
  [[nodiscard]] Result<void> writev_all(std::span<iovec> iov, Deadline deadline = kNoDeadline,
                                        Flush flush = Flush::now);
  // Whether the last read (read or read_exact; not readv) left bytes queued in the socket, as
  // the kernel said with that read (TCP, once a read has filled its buffer: see
  // io::more_queued); false when it did not say. A read that returned fewer bytes than asked
  // left nothing. Inline, no system call; the reading fiber.
  bool more_queued() const noexcept { return io::more_queued(socket_.fd()); }
  // Sends what Flush::later writes held back, now (TCP; a system call, no wait).
  [[nodiscard]] Result<void> flush();

  // Shuts down reading (SHUT_RD), writing (SHUT_WR, a half-close) or both.
  [[nodiscard]] Result<void> shutdown(int how = SHUT_WR);
  // Closes the socket.
  void close() noexcept { socket_.close(); }
  bool is_open() const noexcept { return socket_.is_open(); }

  // A timeout for every later call made without a deadline of its own: a call that makes no
  // progress for this long fails with std::errc::timed_out (measured on the coarse clock: at
  // most two kernel ticks later). Zero (the default) turns it off.
  void set_timeout(std::chrono::nanoseconds timeout) noexcept { timeout_ = timeout; }
  std::chrono::nanoseconds timeout() const noexcept { return timeout_; }

  // Disables Nagle's algorithm (TCP only).
  [[nodiscard]] Result<void> set_nodelay(bool on = true);
  // Enables TCP keepalive probes.
  [[nodiscard]] Result<void> set_keepalive(bool on = true);
  // Probes the peer as `options` says (TCP only; idle 0 leaves the socket as it is).
  [[nodiscard]] Result<void> set_keepalive_probes(const KeepaliveOptions& options);
  // Sets SO_SNDBUF / SO_RCVBUF (the kernel doubles the value).
  [[nodiscard]] Result<void> set_send_buffer(int bytes);
  [[nodiscard]] Result<void> set_receive_buffer(int bytes);

  [[nodiscard]] Result<Address> local_address() const { return socket_.local_address(); }
  [[nodiscard]] Result<Address> peer_address() const { return socket_.peer_address(); }
  int fd() const noexcept { return socket_.fd(); }
  Socket& socket() noexcept { return socket_; }

 private:
  // The limit of one operation: the caller's deadline, else the stream's timeout as an idle
  // timeout, whose deadline (from the coarse clock) is computed only if the operation waits.
  WaitLimit effective(Deadline deadline) const noexcept {
    if (deadline == kNoDeadline && timeout_.count() > 0) [[unlikely]]
      return WaitLimit::idle(timeout_);
    return deadline;
  }
  Socket socket_;
  std::chrono::nanoseconds timeout_{0};
};

// Unix stream sockets use the same class.
using UnixStream = TcpStream;

}  // namespace tern::net
