#include "latency_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace grpc_rpc {

namespace {

double microseconds(std::uint64_t nanoseconds) { return static_cast<double>(nanoseconds) / 1e3; }

// The nearest-rank percentile of sorted, non-empty samples.
std::uint64_t percentile(const std::vector<std::uint64_t>& sorted, double p) {
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const auto index = static_cast<std::size_t>(std::max(rank, 1.0)) - 1;
  return sorted[std::min(index, sorted.size() - 1)];
}

}  // namespace

std::optional<LatencyFigures> summarize(std::vector<std::uint64_t>& nanoseconds) {
  if (nanoseconds.empty()) return std::nullopt;
  std::sort(nanoseconds.begin(), nanoseconds.end());
  long double sum = 0;
  for (const std::uint64_t sample : nanoseconds) sum += static_cast<long double>(sample);
  LatencyFigures figures;
  figures.mean_us = static_cast<double>(sum / static_cast<long double>(nanoseconds.size())) / 1e3;
  figures.p50_us = microseconds(percentile(nanoseconds, 50));
  figures.p90_us = microseconds(percentile(nanoseconds, 90));
  figures.p99_us = microseconds(percentile(nanoseconds, 99));
  figures.p999_us = microseconds(percentile(nanoseconds, 99.9));
  figures.min_us = microseconds(nanoseconds.front());
  figures.max_us = microseconds(nanoseconds.back());
  return figures;
}

}  // namespace grpc_rpc
