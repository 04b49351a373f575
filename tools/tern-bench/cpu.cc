#include "cpu.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string>

namespace tern::bench {

Result<std::uint64_t> parse_stat_cpu_ticks(std::string_view stat) {
  // After "pid (comm) " come the fields from 3 (state) on; utime is 14, stime 15.
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return fail(std::errc::invalid_argument);
  std::string_view rest = stat.substr(close + 1);
  std::uint64_t ticks = 0;
  for (int field = 3; field <= 15; ++field) {
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    const std::string_view value = rest.substr(0, end);
    if (value.empty()) return fail(std::errc::invalid_argument);
    if (field >= 14) {
      std::uint64_t number = 0;
      const auto [ptr, error] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (error != std::errc{} || ptr != value.data() + value.size())
        return fail(std::errc::invalid_argument);
      ticks += number;
    }
    rest.remove_prefix(end);
  }
  return ticks;
}

Result<std::uint64_t> read_cpu_ticks(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : "/proc/" + std::to_string(pid) + "/stat";
  std::ifstream file(path);
  if (!file) return fail(std::errc::no_such_process);
  const std::string stat((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse_stat_cpu_ticks(stat);
}

Result<MachineTicks> parse_machine_ticks(std::string_view proc_stat) {
  MachineTicks ticks;
  bool found = false;
  while (!proc_stat.empty()) {
    const std::size_t end = std::min(proc_stat.find('\n'), proc_stat.size());
    std::string_view line = proc_stat.substr(0, end);
    proc_stat.remove_prefix(std::min(end + 1, proc_stat.size()));
    if (!line.starts_with("cpu")) continue;
    if (line.size() > 3 && line[3] >= '0' && line[3] <= '9') {
      ++ticks.cpus;
      continue;
    }
    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    line.remove_prefix(3);
    std::uint64_t field[8] = {};
    for (std::uint64_t& value : field) {
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      const auto [ptr, error] = std::from_chars(line.data(), line.data() + line.size(), value);
      if (error != std::errc{} || ptr == line.data()) return fail(std::errc::invalid_argument);
      line.remove_prefix(static_cast<std::size_t>(ptr - line.data()));
    }
    ticks.user = field[0] + field[1];
    ticks.system = field[2];
    ticks.idle = field[3] + field[4];
    ticks.irq = field[5] + field[6];
    ticks.steal = field[7];
    found = true;
  }
  if (!found) return fail(std::errc::invalid_argument);
  return ticks;
}

Result<MachineTicks> read_machine_ticks() {
  std::ifstream file("/proc/stat");
  if (!file) return fail(std::errc::no_such_file_or_directory);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse_machine_ticks(text);
}

std::optional<MachineSplit> machine_split(const MachineTicks& before, const MachineTicks& after) {
  if (after.user < before.user || after.system < before.system || after.irq < before.irq ||
      after.idle < before.idle || after.steal < before.steal || after.total() <= before.total())
    return std::nullopt;
  const double total = static_cast<double>(after.total() - before.total());
  const auto pct = [total](std::uint64_t from, std::uint64_t to) {
    return static_cast<double>(to - from) / total * 100.0;
  };
  return MachineSplit{.user_pct = pct(before.user, after.user),
                      .system_pct = pct(before.system, after.system),
                      .irq_pct = pct(before.irq, after.irq),
                      .idle_pct = pct(before.idle, after.idle),
                      .steal_pct = pct(before.steal, after.steal),
                      .cpus = after.cpus};
}

std::optional<double> CpuMeter::cpu_ns() const {
  if (pid_ == 0) {
    timespec now = {};
    if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return std::nullopt;
    return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
  }
  const Result<std::uint64_t> ticks = read_cpu_ticks(pid_);
  if (!ticks) return std::nullopt;
  return static_cast<double>(*ticks) * 1e9 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void CpuMeter::start() {
  start_ns_ = cpu_ns();
  start_time_ = std::chrono::steady_clock::now();
}

std::optional<double> CpuMeter::stop() {
  const std::optional<double> now = cpu_ns();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  if (!now || !start_ns_ || seconds <= 0 || *now < *start_ns_) return std::nullopt;
  return (*now - *start_ns_) / 1e9 / seconds * 100.0;
}

}  // namespace tern::bench
