// The waits behind blocking_call and the hooked connect and accept.
#include "cooperative.h"

#include <fcntl.h>
#include <poll.h>

#include <chrono>
#include <span>
#include <system_error>

#include "tern/io/io.h"

namespace tern::hook::detail {

Deadline deadline_in(std::int64_t ns) noexcept {
  if (ns <= 0) return kNoDeadline;
  return deadline_after(std::chrono::nanoseconds(ns));
}

bool make_kernel_nonblock(int fd, FdEntry& entry) noexcept {
  const Originals& libc = originals();
  const int flags = libc.fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  if ((flags & O_NONBLOCK) == 0 && libc.fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return false;
  entry.set(kKernelNonblock);
  return true;
}

namespace {

// The errno for how a reactor wait ended.
int errno_of(std::error_code error) noexcept {
  if (error == std::errc::timed_out) return EAGAIN;
  if (error == std::errc::operation_canceled) return EINTR;
  if (error.category() == std::system_category()) return error.value();
  return EIO;
}

// Blocks the thread in poll(2) until fd is ready or the deadline passes (no fiber here).
int block_in_poll(int fd, bool writable, Deadline deadline) noexcept {
  pollfd entry = {
      .fd = fd, .events = static_cast<short>(writable ? POLLOUT : POLLIN), .revents = 0};
  for (;;) {
    int timeout_ms = -1;
    if (deadline != kNoDeadline) {
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) {
        errno = EAGAIN;
        return -1;
      }
      timeout_ms = static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
    }
    const int n = originals().poll(&entry, 1, timeout_ms);
    if (n > 0) return 0;
    if (n < 0 && errno != EINTR) return -1;
  }
}

}  // namespace

int wait_ready(int fd, FdEntry& entry, bool writable, Deadline deadline,
               std::uint32_t generation) noexcept {
  if (!io::on_reactor_worker()) return block_in_poll(fd, writable, deadline);
  entry.set(kReactor);
  entry.waiters.fetch_add(1, std::memory_order_relaxed);
  const Result<void> ready =
      writable ? io::wait_writable(fd, deadline) : io::wait_readable(fd, deadline);
  entry.waiters.fetch_sub(1, std::memory_order_relaxed);
  if (entry.generation.load(std::memory_order_acquire) != generation) {
    errno = EBADF;
    return -1;
  }
  if (!ready) {
    errno = errno_of(ready.error());
    return -1;
  }
  return 0;
}

ssize_t fiber_recv(int fd, FdEntry& entry, void* buf, std::size_t len) noexcept {
  note_hooked_call();
  std::uint32_t flags = entry.load();
  if ((flags & kKernelNonblock) == 0) {
    if (!make_kernel_nonblock(fd, entry)) return -1;
    flags |= kKernelNonblock;
  }
  if ((flags & kReactor) == 0) entry.set(kReactor);  // the reactor may register fd now
  // The reactor's receive pays off when the socket is likely empty: it then waits for data
  // before reading, and on io_uring receives through the ring. A socket whose last read left
  // data behind (a reader taking a stream in pieces) is read with a plain system call first.
  if (!entry.emptied.load(std::memory_order_relaxed)) {
    const ssize_t n = originals().recv(fd, buf, len, 0);
    if (n >= 0) {
      entry.emptied.store(n > 0 && static_cast<std::size_t>(n) < len, std::memory_order_relaxed);
      return n;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  }
  const std::uint32_t generation = entry.generation.load(std::memory_order_acquire);
  const std::int64_t timeout_ns = entry.recv_timeout_ns.load(std::memory_order_relaxed);
  const WaitLimit limit =
      timeout_ns > 0 ? WaitLimit::idle(std::chrono::nanoseconds(timeout_ns)) : kNoDeadline;
  entry.waiters.fetch_add(1, std::memory_order_relaxed);  // close() then wakes it (shutdown)
  const Result<std::size_t> n =
      io::recv(fd, std::span(static_cast<std::byte*>(buf), len), 0, limit);
  entry.waiters.fetch_sub(1, std::memory_order_relaxed);
  entry.emptied.store(n && *n > 0 && *n < len, std::memory_order_relaxed);
  if (n && *n > 0) return static_cast<ssize_t>(*n);
  if (entry.generation.load(std::memory_order_acquire) != generation) {
    errno = EBADF;  // closed or replaced while the fiber waited
    return -1;
  }
  if (n) return 0;
  errno = errno_of(n.error());
  return -1;
}

}  // namespace tern::hook::detail
