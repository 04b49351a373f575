#pragma once

// When a hedged call sends its backup (ChannelOptions::hedging): a fixed delay, or a percentile
// of the channel's recent reply latencies. Fibers of the channel's worker.

#include <array>
#include <chrono>
#include <cstddef>

#include "tern/rpc/channel.h"

namespace tern::rpc::detail {

// The latencies of the last kSize successful attempts of a channel.
class LatencyWindow {
 public:
  static constexpr std::size_t kSize = 256;
  // Fewer samples than this give no percentile.
  static constexpr std::size_t kMinSamples = 32;

  void record(std::chrono::nanoseconds latency) noexcept;
  // The latency under which `percent` % of the window's samples fall, or a negative duration
  // while there are fewer than kMinSamples.
  std::chrono::nanoseconds percentile(double percent) const;

 private:
  std::array<std::chrono::nanoseconds, kSize> samples_{};
  std::size_t next_ = 0;
  std::size_t count_ = 0;
};

// The delay before a hedge: options.delay, or with options.percentile set the larger of
// options.delay and that percentile of `latencies` (options.delay until enough replies came).
std::chrono::nanoseconds hedge_delay(const HedgingOptions& options, const LatencyWindow& latencies);

}  // namespace tern::rpc::detail
