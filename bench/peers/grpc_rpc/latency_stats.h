#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace grpc_rpc {

// Latency figures in microseconds, exact over every sample (no histogram).
struct LatencyFigures {
  double mean_us = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double p999_us = 0;
  double min_us = 0;
  double max_us = 0;
};

// The figures of `nanoseconds`, which it sorts; a percentile p is the nearest-rank sample (the
// smallest one that at least p% of the samples do not exceed). nullopt when there is no sample.
// Any thread.
std::optional<LatencyFigures> summarize(std::vector<std::uint64_t>& nanoseconds);

}  // namespace grpc_rpc
