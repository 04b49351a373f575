#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
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

// The machine's CPU time by kind, in clock ticks summed over all its CPUs (the "cpu" line of
// /proc/stat; guest time is already inside user).
struct MachineTicks {
  std::uint64_t user = 0;    // user + nice
  std::uint64_t system = 0;  // system calls and other kernel work on behalf of processes
  std::uint64_t irq = 0;     // hard + soft interrupts (loopback TCP's receive path runs here)
  std::uint64_t idle = 0;    // idle + iowait
  std::uint64_t steal = 0;   // time the hypervisor gave to others while this guest wanted it
  std::size_t cpus = 0;      // the number of "cpuN" lines

  std::uint64_t total() const noexcept { return user + system + irq + idle + steal; }
};

// Parses the text of /proc/stat; invalid_argument if its "cpu" line is missing or malformed.
// Any thread.
Result<MachineTicks> parse_machine_ticks(std::string_view proc_stat);
// Reads /proc/stat. Any thread.
Result<MachineTicks> read_machine_ticks();

// How the machine's CPUs spent an interval, each in % of all their time (the five add up to 100).
struct MachineSplit {
  double user_pct = 0;
  double system_pct = 0;
  double irq_pct = 0;
  double idle_pct = 0;
  double steal_pct = 0;
  std::size_t cpus = 0;
};

// The split between two readings; nullopt when no tick passed or a counter went backwards.
// Any thread.
std::optional<MachineSplit> machine_split(const MachineTicks& before, const MachineTicks& after);

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
