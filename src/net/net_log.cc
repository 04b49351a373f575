#include "net_log.h"

#include <atomic>
#include <chrono>
#include <cstdio>

namespace tern::net::detail {

void log_rate_limited(const std::string& message) {
  static std::atomic<std::int64_t> last_second{-1};
  static std::atomic<std::uint64_t> suppressed{0};
  const std::int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  std::int64_t previous = last_second.load(std::memory_order_relaxed);
  if (previous == now || !last_second.compare_exchange_strong(previous, now)) {
    suppressed.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::uint64_t skipped = suppressed.exchange(0, std::memory_order_relaxed);
  if (skipped > 0) {
    std::fprintf(stderr, "tern: %s (and %llu similar messages)\n", message.c_str(),
                 static_cast<unsigned long long>(skipped));
  } else {
    std::fprintf(stderr, "tern: %s\n", message.c_str());
  }
}

}  // namespace tern::net::detail
