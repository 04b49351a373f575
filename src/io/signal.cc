// SIGINT and SIGTERM for fibers. A stop signal reaches a waiting fiber by one of two ways: where
// every thread blocks it, it stays pending for the process and a signalfd reads it; where some
// thread does not block it (a thread the program started before block_stop_signals), the kernel
// runs tern's handler on that thread, which keeps the signal and writes to an eventfd. Both
// descriptors sit in one epoll set, so a fiber waits for either with one fiber-blocking wait on
// its worker's reactor (epoll or io_uring).
#include "tern/io/signal.h"

#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <system_error>

#include "tern/base/detail/sys_calls.h"
#include "tern/io/io.h"

namespace tern::io {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM};

sigset_t stop_set() noexcept {
  sigset_t set;
  ::sigemptyset(&set);
  for (const int signal : kStopSignals) ::sigaddset(&set, signal);
  return set;
}

std::error_code last_error() noexcept { return {errno, std::system_category()}; }

// Signals the handler caught and no wait has taken yet, one bit (1 << number) each.
std::atomic<std::uint32_t> caught{0};
// The eventfd the handler writes to wake waiting fibers; -1 until the first wait makes it.
std::atomic<int> caught_wake_fd{-1};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
              std::atomic<int>::is_always_lock_free);

void wake_waiters() noexcept {
  const int fd = caught_wake_fd.load(std::memory_order_seq_cst);
  if (fd < 0) return;  // no wait has started: the first one finds `caught` set
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = tern::detail::sys.write(fd, &one, sizeof one);
}

// Runs on a thread that does not block the signal, in place of the default action (ending the
// process): keeps the signal for a waiting fiber. Async-signal-safe.
void on_stop_signal(int signal) {
  const int saved_errno = errno;
  caught.fetch_or(std::uint32_t{1} << signal, std::memory_order_seq_cst);
  wake_waiters();
  errno = saved_errno;
}

// Installs on_stop_signal for each stop signal still at its default action; a handler of the
// program's own, or SIG_IGN, is left alone. Once per process.
void install_handler() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action = {};
    action.sa_handler = &on_stop_signal;
    action.sa_mask = stop_set();
    action.sa_flags = SA_RESTART;  // the interrupted thread's system calls carry on
    for (const int signal : kStopSignals) {
      struct sigaction current = {};
      if (::sigaction(signal, nullptr, &current) != 0) continue;
      if ((current.sa_flags & SA_SIGINFO) == 0 && current.sa_handler == SIG_DFL)
        ::sigaction(signal, &action, nullptr);
    }
  });
}

// The descriptors waits watch: the signalfd, the handler's eventfd, and an epoll set holding
// both (level-triggered), the one descriptor a fiber waits on. Made by the first wait and never
// closed (the handler may write to the eventfd at any time).
struct Watch {
  int signal_fd = -1;
  int wake_fd = -1;
  int epoll_fd = -1;
};

Result<Watch> make_watch() noexcept {
  Watch made;
  const sigset_t set = stop_set();
  made.signal_fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  made.wake_fd = made.signal_fd < 0 ? -1 : ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  made.epoll_fd = made.wake_fd < 0 ? -1 : ::epoll_create1(EPOLL_CLOEXEC);
  bool added = made.epoll_fd >= 0;
  for (const int fd : {made.signal_fd, made.wake_fd}) {
    if (!added) break;
    epoll_event event = {};
    event.events = EPOLLIN;
    event.data.fd = fd;
    added = ::epoll_ctl(made.epoll_fd, EPOLL_CTL_ADD, fd, &event) == 0;
  }
  if (added) return made;
  const std::error_code error = last_error();
  for (const int fd : {made.signal_fd, made.wake_fd, made.epoll_fd})
    if (fd >= 0) tern::detail::sys.close(fd);
  return fail(error);
}

// The watch, made on first use (a failure, such as running out of descriptors, is retried by
// the next wait). Any thread.
Result<Watch> watch() noexcept {
  static std::mutex mutex;
  static Watch made;
  std::lock_guard lock(mutex);  // never held across a wait
  if (made.epoll_fd >= 0) return made;
  Result<Watch> fresh = make_watch();
  if (!fresh) return fail(fresh.error());
  made = *fresh;
  caught_wake_fd.store(made.wake_fd, std::memory_order_seq_cst);
  return made;
}

// A stop signal that has arrived, or 0: first one pending for this thread or the process (the
// signalfd), else one the handler caught. Never waits.
Result<int> take_signal(const Watch& watch) noexcept {
  signalfd_siginfo info;
  for (;;) {
    const ssize_t n = tern::detail::sys.read(watch.signal_fd, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    if (n >= 0 || errno == EAGAIN) break;
    if (errno != EINTR) return fail(last_error());
  }
  // Reset the eventfd before looking at `caught`: a signal caught after the look writes to it
  // again, so the next wait wakes.
  std::uint64_t count;
  while (tern::detail::sys.read(watch.wake_fd, &count, sizeof count) < 0 && errno == EINTR) {
  }
  std::uint32_t bits = caught.load(std::memory_order_seq_cst);
  while (bits != 0) {
    const int signal = std::countr_zero(bits);
    const std::uint32_t rest = bits & ~(std::uint32_t{1} << signal);
    if (caught.compare_exchange_weak(bits, rest, std::memory_order_seq_cst)) {
      if (rest != 0) wake_waiters();  // another fiber may be waiting for the rest
      return signal;
    }
  }
  return 0;
}

}  // namespace

void block_stop_signals() noexcept {
  install_handler();
  const sigset_t set = stop_set();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Result<int> wait_for_stop_signal(Deadline deadline) {
  block_stop_signals();
  const Result<Watch> watched = watch();
  if (!watched) return fail(watched.error());
  for (;;) {
    const Result<int> taken = take_signal(*watched);
    if (!taken || *taken != 0) return taken;
    if (Result<void> ready = wait_readable(watched->epoll_fd, deadline); !ready)
      return fail(ready.error());
  }
}

}  // namespace tern::io
