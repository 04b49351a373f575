#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "tern/base/result.h"

namespace tern::bench {

// utime + stime (fields 14 and 15, in clock ticks) of one /proc/<pid>/stat line; the command
// name in parentheses may hold spaces and parentheses. invalid_argument if malformed.
// Any thread.
Result<std::uint64_t> parse_stat_cpu_ticks(std::string_view stat);

// The CPU time a process has used so far, in clock ticks (pid 0: this process, all threads).
// Any thread.
Result<std::uint64_t> read_cpu_ticks(pid_t pid);

// The CPU a process uses over an interval, as % of one CPU (200 = two CPUs busy): this process
// through CLOCK_PROCESS_CPUTIME_ID (nanoseconds, all threads), another one through
// /proc/<pid>/stat (clock ticks, usually 10 ms). Measured by one thread; a process that
// vanished or cannot be read gives no figure.
class CpuMeter {
 public:
  // Measures `pid` (0: this process).
  explicit CpuMeter(pid_t pid = 0) noexcept : pid_(pid) {}

  // Starts (or restarts) the interval.
  void start();
  // Ends the interval; the % of one CPU used since start(), if both readings worked.
  std::optional<double> stop();

 private:
  pid_t pid_;
  // Nanoseconds of CPU time used so far, if they can be read.
  std::optional<double> cpu_ns() const;
  std::optional<double> start_ns_;
  std::chrono::steady_clock::time_point start_time_{};
};

}  // namespace tern::bench
