#pragma once

// Whether an idle worker's polling would take a CPU that other runnable threads want.

#include <chrono>
#include <optional>
#include <string_view>

#include "tern/base/clock.h"

namespace tern::detail {

// The count of runnable threads in the text of /proc/loadavg ("0.61 0.63 0.80 3/187 31493"
// gives 3), or nullopt for text of another shape. Any thread.
std::optional<int> runnable_threads_in_loadavg(std::string_view text) noexcept;

// Answers an idle worker's question "may I poll?": yes while the machine's runnable threads, the
// asking one included, fit in its online CPUs, so that polling only uses a CPU nobody else wants.
// Reads /proc/loadavg at most once per kRecheck; says no after two readings in a row found more
// runnable threads than CPUs (one such reading is often a kernel thread passing through), and
// yes where it cannot read the file. One per worker, used by that worker's thread.
class SpareCpuCheck {
 public:
  static constexpr std::chrono::milliseconds kRecheck{1};

  SpareCpuCheck() = default;
  ~SpareCpuCheck();
  SpareCpuCheck(const SpareCpuCheck&) = delete;
  SpareCpuCheck& operator=(const SpareCpuCheck&) = delete;

  // Whether a CPU is spare as of the last readings, read anew when older than kRecheck.
  bool spare(Clock::time_point now) noexcept;

 private:
  // Whether more threads are runnable than there are CPUs; false where that cannot be read.
  bool read_busy() noexcept;

  int fd_ = -1;              // /proc/loadavg, opened at the first reading
  bool unreadable_ = false;  // it could not be opened or parsed: always spare
  int cpus_ = 0;             // online CPUs
  int busy_readings_ = 0;    // consecutive readings that found every CPU wanted
  Clock::time_point checked_at_{};
};

}  // namespace tern::detail
