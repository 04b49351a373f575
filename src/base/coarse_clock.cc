#include "tern/base/coarse_clock.h"

namespace tern::detail {

std::int64_t read_coarse_resolution(std::atomic<std::int64_t>& cache) noexcept {
  timespec tick = {};
  if (::clock_getres(CLOCK_MONOTONIC_COARSE, &tick) != 0 || (tick.tv_sec == 0 && tick.tv_nsec == 0))
    tick = {0, 10'000'000};
  const std::int64_t ns = std::int64_t{tick.tv_sec} * 1'000'000'000 + tick.tv_nsec;
  cache.store(ns, std::memory_order_relaxed);
  return ns;
}

}  // namespace tern::detail
