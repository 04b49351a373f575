#pragma once

// Helpers of the tern::hook tests: a ticker fiber per worker that measures how late its 1 ms
// sleeps wake (a worker blocked in a system call shows it), and plain-libc loopback sockets.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

namespace hook_test {

using namespace std::chrono_literals;

// Whether this build runs under AddressSanitizer (every step slower again).
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// Upper bound of a ticker's lateness that a worker parked in fibers always meets, while a
// worker blocked in a system call for the length of the test would not.
inline constexpr auto kMaxLateness = 50ms;

// One ticker fiber on each worker of the current runtime: each sleeps 1 ms at a time until
// stop() and records the largest delay past its wake-up time that its worker spent blocked. The
// time the worker's thread ran or waited for a CPU meanwhile (/proc/thread-self/schedstat) is
// taken out: waiting is a loaded machine's doing, and running is other fibers' work, which under
// TSan on a busy machine alone held a ticker 58 ms late. What remains is time the thread slept
// past the due time, which a worker parked in its reactor (woken at the due time) does not do
// and a worker blocked in a system call does in full. Start and stop from a fiber.
class Tickers {
 public:
  // Returns once every ticker runs.
  Tickers() {
    const std::size_t workers = tern::this_worker::count();
    done_.add(workers);
    started_.add(workers);
    for (std::size_t w = 0; w < workers; ++w) {
      const tern::Result<void> posted = tern::post(w, [this] { tick(); });
      if (!posted) {
        started_.done();
        done_.done();
      }
    }
    while (!started_.wait()) {  // an interrupt of this fiber: wait on
    }
  }
  Tickers(const Tickers&) = delete;
  Tickers& operator=(const Tickers&) = delete;
  ~Tickers() { stop(); }

  // Stops the tickers and waits for them; the largest lateness any of them saw.
  std::chrono::nanoseconds stop() {
    stop_.store(true);
    while (!done_.wait()) {  // an interrupt of this fiber: wait on
    }
    return std::chrono::nanoseconds(max_late_ns_.load());
  }

 private:
  // Nanoseconds the calling thread has spent on a CPU or runnable waiting for one (0 if
  // unknown).
  static std::int64_t awake_ns(int schedstat) {
    char text[128];
    const ssize_t n = ::pread(schedstat, text, sizeof text - 1, 0);
    if (n <= 0) return 0;
    text[n] = '\0';
    unsigned long long on_cpu = 0;
    unsigned long long waiting = 0;
    if (std::sscanf(text, "%llu %llu", &on_cpu, &waiting) != 2) return 0;
    return static_cast<std::int64_t>(on_cpu + waiting);
  }

  void tick() {
    const int schedstat = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    started_.done();
    while (!stop_.load()) {
      const std::int64_t awake_before = awake_ns(schedstat);
      const tern::Deadline due = tern::deadline_after(1ms);
      if (!tern::this_fiber::sleep_until(due)) break;
      const auto late_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(tern::Clock::now() - due).count() -
          (awake_ns(schedstat) - awake_before);
      std::int64_t seen = max_late_ns_.load();
      while (late_ns > seen && !max_late_ns_.compare_exchange_weak(seen, late_ns)) {
      }
    }
    if (schedstat >= 0) ::close(schedstat);
    done_.done();
  }

  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> max_late_ns_{0};
  tern::WaitGroup started_;
  tern::WaitGroup done_;
};

// Runs fn(i) for i in [0, count) in detached fibers spread over the workers of the current
// runtime, then done.done() for each. One starter fiber per worker spawns its share one after
// another, `apart` from each other, as connections arrive at a server: a worker runs its ready
// fibers before it looks at its timers again, and a ticker queued behind the first steps of
// hundreds of clients made at once (curl's setup alone is most of a millisecond unoptimised) would
// measure that queue. Worker fibers only.
template <typename Fn>
void start_fibers(int count, tern::WaitGroup& done, Fn fn,
                  std::chrono::microseconds apart = std::chrono::microseconds(50)) {
  const std::size_t workers = tern::this_worker::count();
  done.add(static_cast<std::size_t>(count));
  for (std::size_t w = 0; w < workers; ++w) {
    const tern::Result<void> posted = tern::post(w, [&done, fn, count, w, workers, apart] {
      for (auto i = static_cast<int>(w); i < count; i += static_cast<int>(workers)) {
        tern::spawn([&done, fn, i] {
          fn(i);
          done.done();
        }).detach();
        if (!tern::this_fiber::sleep_for(apart)) break;
      }
    });
    if (!posted) {
      for (auto i = static_cast<int>(w); i < count; i += static_cast<int>(workers)) done.done();
    }
  }
}

// Runs fn() once on each worker of the current runtime and waits for all: the first use of a
// client library (lazy symbol binding, its one-time setup, the first stacks) is warmed up before
// the tickers start measuring. Worker fibers only.
template <typename Fn>
void warm_up_workers(Fn fn) {
  tern::WaitGroup done;
  start_fibers(static_cast<int>(tern::this_worker::count()), done, [fn](int) { fn(); });
  while (!done.wait()) {  // an interrupt of this fiber: wait on
  }
}

// A TCP listener on 127.0.0.1 with a kernel-chosen port, made with plain libc calls.
struct Listener {
  int fd = -1;
  std::uint16_t port = 0;
  Listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, 1024) != 0)
      return;
    socklen_t length = sizeof address;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
    port = ntohs(address.sin_port);
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  ~Listener() {
    if (fd >= 0) ::close(fd);
  }
};

// The loopback address of a port.
inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  return address;
}

// A blocking TCP socket connected to 127.0.0.1:port with plain libc calls, or -1.
inline int connect_to(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const sockaddr_in address = loopback(port);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace hook_test
