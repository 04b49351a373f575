// The process-wide limit on peer lines: a token bucket kept as one atomic "theoretical arrival
// time" (the generic cell rate algorithm), so taking a token is a load and a compare-exchange.
#include "tern/log/peer_log.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "tern/prof/counter.h"

namespace tern::log {

namespace {

struct Bucket {
  // Nanoseconds one line costs, and how far ahead of now the arrival time may run (burst lines).
  std::atomic<std::int64_t> interval_ns{100'000'000};
  std::atomic<std::int64_t> tolerance_ns{2'000'000'000};
  std::atomic<std::int64_t> arrival_ns{0};
  std::atomic<std::uint64_t> pending{0};  // suppressed since the last line that got through
  std::atomic<std::uint64_t> total{0};
  std::atomic<double> per_second{10};
  std::atomic<std::uint32_t> burst{20};
};

constinit Bucket bucket;

prof::Counter& suppressed_counter() {
  static prof::Counter counter("log.peer_suppressed",
                               "peer log lines suppressed by the shared rate limit");
  return counter;
}

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void set_peer_log_rate(PeerLogRate rate) noexcept {
  bucket.per_second.store(rate.per_second, std::memory_order_relaxed);
  bucket.burst.store(rate.burst, std::memory_order_relaxed);
  if (!(rate.per_second > 0) || rate.burst == 0) {
    bucket.interval_ns.store(0, std::memory_order_relaxed);
    return;
  }
  const double interval = std::max(1.0, std::round(1e9 / rate.per_second));
  const auto interval_ns =
      interval > 1e15 ? std::int64_t{1'000'000'000'000'000} : static_cast<std::int64_t>(interval);
  bucket.tolerance_ns.store(interval_ns * static_cast<std::int64_t>(rate.burst),
                            std::memory_order_relaxed);
  bucket.interval_ns.store(interval_ns, std::memory_order_relaxed);
  bucket.arrival_ns.store(0, std::memory_order_relaxed);
}

PeerLogRate peer_log_rate() noexcept {
  return {.per_second = bucket.per_second.load(std::memory_order_relaxed),
          .burst = bucket.burst.load(std::memory_order_relaxed)};
}

std::uint64_t peer_log_suppressed() noexcept {
  return bucket.total.load(std::memory_order_relaxed);
}

namespace detail {

PeerAdmission peer_log_admit() noexcept {
  const std::int64_t interval = bucket.interval_ns.load(std::memory_order_relaxed);
  bool admitted = false;
  if (interval > 0) {
    const std::int64_t tolerance = bucket.tolerance_ns.load(std::memory_order_relaxed);
    const std::int64_t now = now_ns();
    std::int64_t arrival = bucket.arrival_ns.load(std::memory_order_relaxed);
    for (;;) {
      const std::int64_t next = std::max(arrival, now) + interval;
      if (next - now > tolerance) break;
      if (bucket.arrival_ns.compare_exchange_weak(arrival, next, std::memory_order_relaxed)) {
        admitted = true;
        break;
      }
    }
  }
  if (!admitted) {
    bucket.pending.fetch_add(1, std::memory_order_relaxed);
    bucket.total.fetch_add(1, std::memory_order_relaxed);
    suppressed_counter().add(1);
    return {false, 0};
  }
  return {true, bucket.pending.exchange(0, std::memory_order_relaxed)};
}

}  // namespace detail

}  // namespace tern::log
