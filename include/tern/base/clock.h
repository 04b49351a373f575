#pragma once

#include <chrono>

namespace tern {

// The clock behind every deadline and timeout in tern (monotonic).
using Clock = std::chrono::steady_clock;

// A point in time by which a blocking operation must finish.
using Deadline = Clock::time_point;

// A deadline that never passes: the operation waits as long as it takes.
inline constexpr Deadline kNoDeadline = Deadline::max();

// Turns a timeout into a deadline, saturating instead of overflowing: a timeout too long for the
// clock is no deadline, a negative one is now. Any thread.
template <typename Rep, typename Period>
Deadline deadline_after(std::chrono::duration<Rep, Period> timeout) noexcept {
  const auto now = Clock::now();
  if (timeout <= timeout.zero()) return now;
  const auto limit =
      std::chrono::duration_cast<std::chrono::duration<Rep, Period>>(kNoDeadline - now);
  if (timeout >= limit) return kNoDeadline;
  return now + std::chrono::duration_cast<Clock::duration>(timeout);
}

}  // namespace tern
