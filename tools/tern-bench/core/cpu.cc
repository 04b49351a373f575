#include "core/cpu.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

#include "core/proc_file.h"

namespace tern::bench {

namespace {

// Removes the next space-separated field from the front of `rest` and returns it (empty when
// there is none).
std::string_view take_field(std::string_view& rest) {
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  const std::size_t end = std::min(rest.find(' '), rest.size());
  const std::string_view field = rest.substr(0, end);
  rest.remove_prefix(end);
  return field;
}

// The next field of `rest` as an unsigned number; nullopt if there is none or it is not one.
std::optional<std::uint64_t> take_number(std::string_view& rest) {
  const std::string_view field = take_field(rest);
  std::uint64_t number = 0;
  const auto [ptr, error] = std::from_chars(field.data(), field.data() + field.size(), number);
  if (field.empty() || error != std::errc{} || ptr != field.data() + field.size())
    return std::nullopt;
  return number;
}

}  // namespace

Result<std::uint64_t> parse_stat_cpu_ticks(std::string_view stat) {
  // After "pid (comm) " come the fields from 3 (state) on; utime is 14, stime 15.
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos) return fail(std::errc::invalid_argument);
  std::string_view rest = stat.substr(close + 1);
  for (int field = 3; field <= 13; ++field) {
    if (take_field(rest).empty()) return fail(std::errc::invalid_argument);
  }
  const std::optional<std::uint64_t> utime = take_number(rest);
  const std::optional<std::uint64_t> stime = take_number(rest);
  if (!utime || !stime) return fail(std::errc::invalid_argument);
  return *utime + *stime;
}

Result<std::uint64_t> read_cpu_ticks(pid_t pid) {
  const std::string path = pid == 0 ? "/proc/self/stat" : "/proc/" + std::to_string(pid) + "/stat";
  Result<std::string> stat = read_whole_file(path, std::errc::no_such_process);
  if (!stat) return fail(stat.error());
  return parse_stat_cpu_ticks(*stat);
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
      const std::optional<std::uint64_t> number = take_number(line);
      if (!number) return fail(std::errc::invalid_argument);
      value = *number;
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
  Result<std::string> text = read_whole_file("/proc/stat", std::errc::no_such_file_or_directory);
  if (!text) return fail(text.error());
  return parse_machine_ticks(*text);
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
