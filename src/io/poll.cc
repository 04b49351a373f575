// tern::io::poll: one non-blocking poll(2) straight to the kernel, and between tries a wait on
// the worker's reactor: for one descriptor and one direction, the reactor's own readiness wait;
// otherwise a private level-triggered epoll set of the descriptors, which is itself a readable
// descriptor the reactor can wait on (under either backend).
#include "tern/io/poll.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>

#include "reactor.h"
#include "tern/base/assert.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/fiber/fiber.h"
#include "tern/io/io.h"

namespace tern::io {

namespace {

constexpr short kReadEvents = POLLIN | POLLRDNORM;
constexpr short kWriteEvents = POLLOUT | POLLWRNORM;

// poll(2) that does not wait, through tern's table so that an interposed poll (tern::hook) never
// sees it. The count, or -errno.
int poll_now(std::span<pollfd> fds) noexcept {
  for (;;) {
    const int n = tern::detail::sys.poll(fds.data(), static_cast<nfds_t>(fds.size()), 0);
    if (n >= 0) return n;
    if (errno != EINTR) return -errno;
  }
}

std::uint32_t epoll_events_of(short events) noexcept {
  std::uint32_t out = 0;
  if (events & kReadEvents) out |= EPOLLIN;
  if (events & kWriteEvents) out |= EPOLLOUT;
  if (events & POLLPRI) out |= EPOLLPRI;
  if (events & POLLRDHUP) out |= EPOLLRDHUP;
  if (events & POLLRDBAND) out |= EPOLLRDBAND;
  if (events & POLLWRBAND) out |= EPOLLWRBAND;
  return out;
}

// A private epoll set of every descriptor of `fds` with the events asked for, closed (through
// the reactor, which registered it when it first waited on it) when it goes away.
class WaitSet {
 public:
  WaitSet() = default;
  WaitSet(const WaitSet&) = delete;
  WaitSet& operator=(const WaitSet&) = delete;
  ~WaitSet() {
    if (fd_ >= 0) io::close(fd_);
  }

  // Builds the set on first use; the descriptor to wait on, or an error.
  Result<int> fd(std::span<const pollfd> fds) {
    if (fd_ >= 0) return fd_;
    fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd_ < 0) return fail(detail::errno_code(errno));
    for (const pollfd& entry : fds) {
      if (entry.fd < 0) continue;
      epoll_event event = {};
      event.events = epoll_events_of(entry.events);
      event.data.fd = entry.fd;
      if (::epoll_ctl(fd_, EPOLL_CTL_ADD, entry.fd, &event) == 0) continue;
      if (errno == EEXIST) {  // the same descriptor twice: wait for the union of its events
        for (const pollfd& other : fds)
          if (other.fd == entry.fd) event.events |= epoll_events_of(other.events);
        if (::epoll_ctl(fd_, EPOLL_CTL_MOD, entry.fd, &event) == 0) continue;
      }
      // A descriptor epoll refuses (a regular file is always ready; a closed one is POLLNVAL)
      // was already answered by the poll before the wait.
    }
    return fd_;
  }

 private:
  int fd_ = -1;
};

// Waits until something in fds may have changed, the deadline passes or the fiber is
// interrupted; only the interrupt is an error.
Result<void> wait_some(std::span<pollfd> fds, WaitSet& set, Deadline deadline) {
  Result<void> waited;
  const pollfd* only = nullptr;
  int watched = 0;
  for (const pollfd& entry : fds) {
    if (entry.fd < 0) continue;
    ++watched;
    only = &entry;
  }
  if (watched == 0) {
    waited = this_fiber::sleep_until(deadline);
  } else if (watched == 1 && (only->events & ~kReadEvents) == 0 &&
             (only->events & kReadEvents) != 0) {
    waited = wait_readable(only->fd, deadline);
  } else if (watched == 1 && (only->events & ~kWriteEvents) == 0 &&
             (only->events & kWriteEvents) != 0) {
    waited = wait_writable(only->fd, deadline);
  } else {
    Result<int> set_fd = set.fd(fds);
    if (!set_fd) return fail(set_fd.error());
    waited = wait_readable(*set_fd, deadline);
  }
  if (!waited && waited.error() == std::errc::operation_canceled) return waited;
  return {};  // ready, or a deadline, or a descriptor the reactor refused: poll again
}

}  // namespace

Result<int> poll(std::span<pollfd> fds, Deadline deadline) {
  if (detail::Reactor::current() == nullptr) {
    TERN_FATAL(
        "tern::io::poll called off a worker with a reactor: call it from a fiber (inside "
        "Runtime::run of a runtime with reactors)");
  }
  WaitSet set;
  for (;;) {
    const int ready = poll_now(fds);
    if (ready < 0) return fail(detail::errno_code(-ready));
    if (ready > 0 || Clock::now() >= deadline) return ready;
    if (Result<void> waited = wait_some(fds, set, deadline); !waited) return fail(waited.error());
  }
}

bool on_reactor_worker() noexcept { return detail::Reactor::current() != nullptr; }

}  // namespace tern::io
