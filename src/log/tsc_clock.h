#pragma once

#include <cstdint>

namespace tern::log::detail {

// Turns record stamps into CLOCK_REALTIME nanoseconds. With an invariant TSC that the kernel
// also uses as its clock source, callers stamp records with rdtsc (a few ns cheaper than
// clock_gettime) and the writer maps ticks to wall time through an anchor it renews about once
// a second. Otherwise stamps already are nanoseconds. Writer thread (or the crash path, which
// holds the writer's lock).
class TscClock {
 public:
  // Whether callers may stamp with rdtsc on this machine. Any thread.
  static bool usable() noexcept;
  // CLOCK_REALTIME now, in nanoseconds. Any thread.
  static std::uint64_t realtime_ns() noexcept;

  // Measures the tick rate (about 2 ms, once per process; later calls renew the anchor).
  void calibrate() noexcept;
  // Renews the anchor if a second has passed since the last one.
  void maybe_renew() noexcept;
  // The wall time of a stamp.
  std::uint64_t to_ns(std::uint64_t stamp) const noexcept;

 private:
  struct Pair {
    std::uint64_t ticks = 0;
    std::uint64_t ns = 0;
  };
  static Pair sample() noexcept;

  bool calibrated_ = false;
  double ns_per_tick_ = 0;
  Pair anchor_;
};

}  // namespace tern::log::detail
