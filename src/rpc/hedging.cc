#include "hedging.h"

#include <algorithm>
#include <array>

namespace tern::rpc::detail {

void LatencyWindow::record(std::chrono::nanoseconds latency) noexcept {
  if (samples_.size() < kSize) {
    if (samples_.empty()) samples_.reserve(kSize);
    samples_.push_back(latency);
    return;
  }
  samples_[next_] = latency;
  next_ = (next_ + 1) % kSize;
}

std::chrono::nanoseconds LatencyWindow::percentile(double percent) const {
  const std::size_t count = samples_.size();
  if (count < kMinSamples) return std::chrono::nanoseconds(-1);
  // A copy on the stack: the window is small and this runs once per hedgeable call.
  std::array<std::chrono::nanoseconds, kSize> sorted;
  std::copy(samples_.begin(), samples_.end(), sorted.begin());
  const auto end = sorted.begin() + static_cast<std::ptrdiff_t>(count);
  const double clamped = std::clamp(percent, 0.0, 100.0);
  const auto rank = static_cast<std::size_t>(clamped / 100.0 * static_cast<double>(count - 1));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(rank), end);
  return sorted[rank];
}

std::chrono::nanoseconds hedge_delay(const HedgingOptions& options,
                                     const LatencyWindow& latencies) {
  const std::chrono::nanoseconds fixed = options.delay;
  if (options.percentile <= 0) return fixed;
  const std::chrono::nanoseconds observed = latencies.percentile(options.percentile);
  return observed.count() < 0 ? fixed : std::max(fixed, observed);
}

}  // namespace tern::rpc::detail
