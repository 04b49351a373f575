// The writer's mapping from TSC ticks to wall time.
#include "tsc_clock.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "tern/base/detail/sys_calls.h"
#include "tern/log/detail/record.h"

namespace tern::log::detail {

namespace {

// A few microseconds of noise over a one-second baseline is far below a microsecond of error;
// a rate further off than this means the wall clock was stepped: keep the old rate.
constexpr double kMaxRateChange = 1e-3;

#if defined(__x86_64__)
bool invariant_tsc() noexcept {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000000u, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1u << 8)) != 0;
}

bool kernel_clock_is_tsc() noexcept {
  const int fd = ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                        O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[16] = {};
  const ssize_t n = tern::detail::sys.read(fd, text, sizeof text - 1);
  tern::detail::sys.close(fd);
  return n >= 3 && std::strncmp(text, "tsc", 3) == 0 && (n == 3 || text[3] == '\n');
}
#endif

}  // namespace

bool TscClock::usable() noexcept {
#if defined(__x86_64__)
  static const bool usable = invariant_tsc() && kernel_clock_is_tsc();
  return usable;
#else
  return false;
#endif
}

std::uint64_t TscClock::realtime_ns() noexcept {
  timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(now.tv_nsec);
}

TscClock::Pair TscClock::sample() noexcept {
#if defined(__x86_64__)
  // The pair whose clock read is bracketed most tightly by two tick reads.
  Pair best;
  std::uint64_t best_width = ~std::uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    const std::uint64_t before = __builtin_ia32_rdtsc();
    const std::uint64_t ns = realtime_ns();
    const std::uint64_t after = __builtin_ia32_rdtsc();
    if (after - before < best_width) {
      best_width = after - before;
      best = {before + (after - before) / 2, ns};
    }
  }
  return best;
#else
  return {0, realtime_ns()};
#endif
}

void TscClock::calibrate() noexcept {
  if (!shared.tsc.load(std::memory_order_relaxed)) return;
  if (calibrated_) {
    maybe_renew();
    return;
  }
  const Pair first = sample();
  tern::detail::sleep_thread(2'000'000);  // 2 ms
  const Pair second = sample();
  ns_per_tick_ =
      static_cast<double>(second.ns - first.ns) / static_cast<double>(second.ticks - first.ticks);
  anchor_ = second;
  calibrated_ = true;
}

void TscClock::maybe_renew() noexcept {
  if (!calibrated_) return;
  const Pair now = sample();
  if (now.ns < anchor_.ns + 1'000'000'000u || now.ticks <= anchor_.ticks) {
    if (now.ns >= anchor_.ns) return;
    anchor_ = now;  // the wall clock went back: follow it
    return;
  }
  const double rate =
      static_cast<double>(now.ns - anchor_.ns) / static_cast<double>(now.ticks - anchor_.ticks);
  if (std::fabs(rate - ns_per_tick_) <= kMaxRateChange * ns_per_tick_) ns_per_tick_ = rate;
  anchor_ = now;
}

std::uint64_t TscClock::to_ns(std::uint64_t stamp) const noexcept {
  if (!calibrated_) return shared.tsc.load(std::memory_order_relaxed) ? realtime_ns() : stamp;
  const auto ticks = static_cast<std::int64_t>(stamp - anchor_.ticks);
  return anchor_.ns +
         static_cast<std::uint64_t>(std::llround(static_cast<double>(ticks) * ns_per_tick_));
}

}  // namespace tern::log::detail
