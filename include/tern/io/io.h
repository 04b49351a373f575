#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/base/wait_limit.h"

// Fiber-blocking system calls on the calling worker's reactor. Each parks only the calling fiber
// until the operation completes, the deadline passes (tern::deadline_exceeded(): "deadline
// exceeded", equal to std::errc::timed_out) or the fiber is interrupted
// (std::errc::operation_canceled; Fiber::interrupt cancels an operation in flight). The
// operations that move bytes take a WaitLimit: a deadline, or WaitLimit::idle(timeout), an idle
// timeout whose deadline is computed only if the operation has to wait. File descriptors must be
// non-blocking. No data is lost to a timeout: an operation that completed is reported as
// completed. Worker fibers of a runtime with reactors only.

namespace tern::io {

// read(2) into buf; 0 means end of file.
[[nodiscard]] Result<std::size_t> read(int fd, std::span<std::byte> buf,
                                       WaitLimit limit = kNoDeadline);
// write(2) of buf; may write less than all of it.
[[nodiscard]] Result<std::size_t> write(int fd, std::span<const std::byte> buf,
                                        WaitLimit limit = kNoDeadline);
// recv(2) into buf with flags; 0 means the peer shut down its side.
[[nodiscard]] Result<std::size_t> recv(int fd, std::span<std::byte> buf, int flags = 0,
                                       WaitLimit limit = kNoDeadline);
// send(2) of buf with flags (MSG_NOSIGNAL is always added); may send less than all of it.
[[nodiscard]] Result<std::size_t> send(int fd, std::span<const std::byte> buf, int flags = 0,
                                       WaitLimit limit = kNoDeadline);
// One send(2) of buf that never waits (MSG_DONTWAIT | MSG_NOSIGNAL): what the socket took now,
// 0 when its buffer is full. A plain system call under either backend, for a caller that has a
// writer fiber to fall back on; do not mix it with a send of the same socket still in flight.
[[nodiscard]] Result<std::size_t> try_send(int fd, std::span<const std::byte> buf) noexcept;
// recvmsg(2) (scatter read, datagrams with their source address).
[[nodiscard]] Result<std::size_t> recvmsg(int fd, msghdr* message, int flags = 0,
                                          WaitLimit limit = kNoDeadline);
// sendmsg(2) (gather write; MSG_NOSIGNAL is always added); may send less than all of it.
[[nodiscard]] Result<std::size_t> sendmsg(int fd, const msghdr* message, int flags = 0,
                                          WaitLimit limit = kNoDeadline);
// accept4(2) of one connection, returned non-blocking and close-on-exec. `peer` may be null.
[[nodiscard]] Result<int> accept(int fd, sockaddr* peer, socklen_t* peer_length,
                                 Deadline deadline = kNoDeadline);
// connect(2) of a non-blocking socket, waiting until the connection is established or fails.
[[nodiscard]] Result<void> connect(int fd, const sockaddr* address, socklen_t length,
                                   Deadline deadline = kNoDeadline);
// Waits until fd is readable (or has an error or hang-up).
[[nodiscard]] Result<void> wait_readable(int fd, Deadline deadline = kNoDeadline);
// Waits until fd has bytes to read, end of stream or an error: the socket's present state
// counts, so data that arrived before the call (read or not) never makes it wait for more.
// Worker fiber.
[[nodiscard]] Result<void> wait_data(int fd, Deadline deadline = kNoDeadline);
// Waits until fd is writable (or has an error or hang-up).
[[nodiscard]] Result<void> wait_writable(int fd, Deadline deadline = kNoDeadline);
// Tells this worker's reactor that fd is a TCP socket it is about to use, which spares the epoll
// backend a system call that asks the socket's kind (one per connection). Worker fiber, on the
// worker that uses fd; a no-op elsewhere and on io_uring.
void declare_tcp(int fd) noexcept;
// Whether the last recv on fd (flags 0, by this worker) left bytes queued in the socket, as the
// kernel reported along with it (TCP: once a read has filled its buffer, both backends learn what
// each later read left); false when not known. A caller that is about to read those bytes and
// answer them can hold its answer to the last read back (send with MSG_MORE) and send the
// answers together. Worker fiber; false elsewhere.
[[nodiscard]] bool more_queued(int fd) noexcept;
// Wakes every fiber of this worker waiting on fd (their operations end with
// operation_canceled), then closes it.
void close(int fd) noexcept;

}  // namespace tern::io
