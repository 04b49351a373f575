#include "net_log.h"

#include <atomic>
#include <chrono>

#include "tern/log/log.h"

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
    TERN_LOG_WARN("{} (and {} similar messages)", message, skipped);
  } else {
    TERN_LOG_WARN("{}", message);
  }
}

}  // namespace tern::net::detail
