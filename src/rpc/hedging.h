#pragma once

// When a hedged call sends its backup (ChannelOptions::hedging): a fixed delay, or a percentile
// of the channel's recent reply latencies. Fibers of the channel's worker.

#include <chrono>
#include <cstddef>
#include <vector>

#include "tern/rpc/channel.h"

namespace tern::rpc::detail {

// The latencies of the last kSize successful attempts of a channel. It allocates its samples at
// the first one: a channel of one endpoint records none and holds no memory for them.
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
  std::vector<std::chrono::nanoseconds> samples_;  // up to kSize, then a ring
  std::size_t next_ = 0;                           // the ring's oldest sample once it is full
};

// The delay before a hedge: options.delay, or with options.percentile set the larger of
// options.delay and that percentile of `latencies` (options.delay until enough replies came).
std::chrono::nanoseconds hedge_delay(const HedgingOptions& options, const LatencyWindow& latencies);

}  // namespace tern::rpc::detail
