#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "core/report.h"
#include "tern/prof/histogram.h"

namespace tern::bench {

// Latencies in nanoseconds, one tern::prof::Histogram per client thread (no sharing while the
// load runs), merged when it is over.
class LatencyRecorder {
 public:
  // One histogram per slot (worker index or blocking thread number). Any thread.
  explicit LatencyRecorder(std::size_t slots) : slots_(slots == 0 ? 1 : slots) {}

  // Records one latency in slot `slot`. Only from the thread that owns the slot.
  void record(std::size_t slot, std::chrono::nanoseconds latency) noexcept {
    slots_[slot].record(latency.count() < 0 ? 0 : static_cast<std::uint64_t>(latency.count()));
  }
  // The slot's histogram, for a thread that records into it directly.
  prof::Histogram& slot(std::size_t slot) noexcept { return slots_[slot]; }
  // Every slot merged. Once no thread records any more.
  prof::Histogram merged() const;

 private:
  std::vector<prof::Histogram> slots_;
};

// Adds <prefix>mean_us, p50_us, p90_us, p99_us, p999_us, min_us and max_us (microseconds with
// three decimals) of a histogram of nanoseconds to `figures`; null values when it is empty.
// Any thread.
void add_latency_figures(Json& figures, const prof::Histogram& nanoseconds,
                         std::string_view prefix = "");

// "latency us: mean 12.345, p50 ..., max ..." for the text report.
std::string latency_line(std::string_view what, const prof::Histogram& nanoseconds);

}  // namespace tern::bench
