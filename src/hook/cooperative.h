#pragma once

// How a hooked call on a managed socket waits: in a fiber it parks the fiber on the worker's
// reactor; on any other thread, for a socket the hook made non-blocking in the kernel, it
// blocks the thread in poll(2) as libc would have. Returns and errno values are libc's.

#include <sys/types.h>

#include <cerrno>
#include <cstdint>

#include "fd_table.h"
#include "originals.h"
#include "tern/base/clock.h"
#include "tern/io/poll.h"

namespace tern::hook::detail {

// The deadline a timeout of `ns` nanoseconds (0: none) sets from now.
Deadline deadline_in(std::int64_t ns) noexcept;

// Sets O_NONBLOCK in the kernel on a managed socket if it is not set yet; false (errno set) if
// fcntl failed.
bool make_kernel_nonblock(int fd, FdEntry& entry) noexcept;

// Waits until fd is ready for reading or writing, or the deadline passes. 0 when it may be
// ready; -1 with errno EAGAIN (deadline), EINTR (fiber interrupted), EBADF (fd closed or
// replaced meanwhile), or the reactor's error. In a fiber it parks the fiber; elsewhere it
// blocks in poll(2).
int wait_ready(int fd, FdEntry& entry, bool writable, Deadline deadline,
               std::uint32_t generation) noexcept;

// A receive with flags 0 (read or recv) on a socket cooperative_fd returned, from that fiber.
// After a read that emptied the socket's queue (or one that failed with EAGAIN), through the
// worker's reactor, which waits for the next data before it reads (no read that fails with
// EAGAIN first) and, on io_uring, receives as a ring operation; otherwise a plain recv first.
// SO_RCVTIMEO counts as an idle timeout. Returns and errno values are libc's.
ssize_t fiber_recv(int fd, FdEntry& entry, void* buf, std::size_t len) noexcept;

// Runs call() (a libc call on fd returning ssize_t, -1 with errno) with blocking semantics on a
// socket the program sees as blocking: on EAGAIN, waits (SO_RCVTIMEO / SO_SNDTIMEO as the
// deadline) and tries again. Any other socket or thread: call() as it is. The deadline is read
// from the clock only once a wait is needed, so a call that finds its socket ready costs no
// clock read even with a timeout set (the wait then starts a system call's time late).
template <typename Call>
ssize_t blocking_call(int fd, bool writable, Call call) {
  FdEntry* entry = find_fd(fd);
  if (entry == nullptr) return call();
  const std::uint32_t flags = entry->load();
  if ((flags & (kManaged | kUserNonblock)) != kManaged) return call();
  const bool fiber = io::on_reactor_worker();
  if (!fiber && (flags & kKernelNonblock) == 0) return call();
  if (fiber && (flags & kKernelNonblock) == 0 && !make_kernel_nonblock(fd, *entry)) return -1;
  const std::uint32_t generation = entry->generation.load(std::memory_order_acquire);
  ssize_t n = call();
  if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
  const Deadline deadline =
      deadline_in((writable ? entry->send_timeout_ns : entry->recv_timeout_ns).load());
  for (;;) {
    if (wait_ready(fd, *entry, writable, deadline, generation) != 0) return -1;
    n = call();
    if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return n;
  }
}

}  // namespace tern::hook::detail
