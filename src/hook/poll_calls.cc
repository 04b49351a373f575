// The hooked multi-descriptor waits: poll, ppoll, select, epoll_wait and epoll_pwait. In a fiber
// on a worker with a reactor (and with a timeout other than zero) they wait through
// tern::io::poll, parking the fiber; everywhere else they are libc's.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include <cerrno>
#include <chrono>
#include <span>
#include <system_error>
#include <vector>

#include "cooperative.h"
#include "tern/io/poll.h"

using namespace tern::hook::detail;

namespace {

// Marks descriptors the reactor may have registered, so that the hooked close drops them from
// it.
void note_waited(std::span<const pollfd> fds) noexcept {
  for (const pollfd& entry : fds)
    if (FdEntry* fd = make_fd(entry.fd); fd != nullptr) fd->set(kReactor);
}

tern::Deadline deadline_ms(int timeout) noexcept {
  if (timeout < 0) return tern::kNoDeadline;
  return tern::deadline_after(std::chrono::milliseconds(timeout));
}

tern::Deadline deadline_of(const timespec* timeout) noexcept {
  if (timeout == nullptr) return tern::kNoDeadline;
  return tern::deadline_after(std::chrono::seconds(timeout->tv_sec) +
                              std::chrono::nanoseconds(timeout->tv_nsec));
}

// tern::io::poll as poll(2) returns: the count, or -1 with errno.
int fiber_poll(std::span<pollfd> fds, tern::Deadline deadline) noexcept {
  note_waited(fds);
  const tern::Result<int> ready = tern::io::poll(fds, deadline);
  if (ready) return *ready;
  const std::error_code error = ready.error();
  errno = error == std::errc::operation_canceled       ? EINTR
          : error.category() == std::system_category() ? error.value()
                                                       : EIO;
  return -1;
}

bool is_zero(const timespec* t) noexcept {
  return t != nullptr && t->tv_sec == 0 && t->tv_nsec == 0;
}

// epoll_wait for a fiber: the epoll set is itself a pollable descriptor.
int fiber_epoll_wait(int epoll_fd, epoll_event* events, int max_events, tern::Deadline deadline) {
  const Originals& libc = originals();
  for (;;) {
    const int n = libc.epoll_wait(epoll_fd, events, max_events, 0);
    if (n != 0 || tern::Clock::now() >= deadline) return n;
    pollfd set = {.fd = epoll_fd, .events = POLLIN, .revents = 0};
    const int ready = fiber_poll(std::span(&set, 1), deadline);
    if (ready < 0) return -1;
    if (ready > 0 && (set.revents & POLLNVAL) != 0) {
      errno = EBADF;
      return -1;
    }
  }
}

}  // namespace

// glibc's report of a failed _FORTIFY_SOURCE check; it ends the program.
extern "C" [[noreturn]] void __chk_fail();

extern "C" {

// Named by tern::hook's link options (-u) so that the linker takes this object whole, even when
// another library (a sanitizer's runtime) already defines the names it replaces.
extern const char tern_hook_poll_calls;
const char tern_hook_poll_calls = 0;

int poll(pollfd* fds, nfds_t count, int timeout) {
  if (timeout == 0 || !tern::io::on_reactor_worker()) return originals().poll(fds, count, timeout);
  return fiber_poll(std::span(fds, count), deadline_ms(timeout));
}

// What code built with _FORTIFY_SOURCE calls instead of poll and ppoll: glibc's bounds check,
// then the replaced call.
int __poll_chk(pollfd* fds, nfds_t count, int timeout, size_t fds_size) {
  if (fds_size / sizeof(pollfd) < count) __chk_fail();
  return poll(fds, count, timeout);
}

int ppoll(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask) {
  // A signal mask to swap in atomically cannot be had without blocking the thread: libc's.
  if (mask != nullptr || is_zero(timeout) || !tern::io::on_reactor_worker())
    return originals().ppoll(fds, count, timeout, mask);
  if (timeout != nullptr &&
      (timeout->tv_sec < 0 || timeout->tv_nsec < 0 || timeout->tv_nsec >= 1'000'000'000)) {
    errno = EINVAL;
    return -1;
  }
  return fiber_poll(std::span(fds, count), deadline_of(timeout));
}

int __ppoll_chk(pollfd* fds, nfds_t count, const timespec* timeout, const sigset_t* mask,
                size_t fds_size) {
  if (fds_size / sizeof(pollfd) < count) __chk_fail();
  return ppoll(fds, count, timeout, mask);
}

int select(int count, fd_set* readable, fd_set* writable, fd_set* exceptional, timeval* timeout) {
  const Originals& libc = originals();
  if ((timeout != nullptr && timeout->tv_sec == 0 && timeout->tv_usec == 0) ||
      !tern::io::on_reactor_worker() || count < 0 || count > FD_SETSIZE)
    return libc.select(count, readable, writable, exceptional, timeout);
  if (timeout != nullptr && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) {
    errno = EINVAL;
    return -1;
  }
  std::vector<pollfd> fds;
  for (int fd = 0; fd < count; ++fd) {
    short events = 0;
    if (readable != nullptr && FD_ISSET(fd, readable)) events |= POLLIN;
    if (writable != nullptr && FD_ISSET(fd, writable)) events |= POLLOUT;
    if (exceptional != nullptr && FD_ISSET(fd, exceptional)) events |= POLLPRI;
    if (events != 0) fds.push_back({.fd = fd, .events = events, .revents = 0});
  }
  const tern::Deadline deadline =
      timeout == nullptr ? tern::kNoDeadline
                         : tern::deadline_after(std::chrono::seconds(timeout->tv_sec) +
                                                std::chrono::microseconds(timeout->tv_usec));
  const int ready = fiber_poll(fds, deadline);
  if (ready < 0) return -1;
  for (const pollfd& entry : fds) {
    if ((entry.revents & POLLNVAL) != 0) {
      errno = EBADF;
      return -1;
    }
  }
  if (readable != nullptr) FD_ZERO(readable);
  if (writable != nullptr) FD_ZERO(writable);
  if (exceptional != nullptr) FD_ZERO(exceptional);
  int marked = 0;
  for (const pollfd& entry : fds) {
    if (readable != nullptr && (entry.events & POLLIN) != 0 &&
        (entry.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      FD_SET(entry.fd, readable);
      ++marked;
    }
    if (writable != nullptr && (entry.events & POLLOUT) != 0 &&
        (entry.revents & (POLLOUT | POLLERR)) != 0) {
      FD_SET(entry.fd, writable);
      ++marked;
    }
    if (exceptional != nullptr && (entry.events & POLLPRI) != 0 && (entry.revents & POLLPRI) != 0) {
      FD_SET(entry.fd, exceptional);
      ++marked;
    }
  }
  if (timeout != nullptr) {  // Linux's select leaves the time not slept in the timeval
    auto left = deadline - tern::Clock::now();
    if (left < tern::Clock::duration::zero()) left = tern::Clock::duration::zero();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    timeout->tv_sec = static_cast<time_t>(us / 1'000'000);
    timeout->tv_usec = static_cast<suseconds_t>(us % 1'000'000);
  }
  return marked;
}

int epoll_wait(int epoll_fd, epoll_event* events, int max_events, int timeout) {
  if (timeout == 0 || max_events <= 0 || !tern::io::on_reactor_worker())
    return originals().epoll_wait(epoll_fd, events, max_events, timeout);
  return fiber_epoll_wait(epoll_fd, events, max_events, deadline_ms(timeout));
}

int epoll_pwait(int epoll_fd, epoll_event* events, int max_events, int timeout,
                const sigset_t* mask) {
  if (mask != nullptr || timeout == 0 || max_events <= 0 || !tern::io::on_reactor_worker())
    return originals().epoll_pwait(epoll_fd, events, max_events, timeout, mask);
  return fiber_epoll_wait(epoll_fd, events, max_events, deadline_ms(timeout));
}

}  // extern "C"
