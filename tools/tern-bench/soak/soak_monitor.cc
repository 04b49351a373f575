#include "soak/soak_monitor.h"

#include <cstdio>

#include <fmt/format.h>

#include "soak/soak_stats.h"

namespace tern::bench {

namespace {

std::string rss_text(const std::optional<std::uint64_t>& kib) {
  return kib ? fmt::format("{:.1f} MiB", static_cast<double>(*kib) / 1024.0) : "n/a";
}

std::string count_text(const std::optional<std::uint64_t>& count) {
  return count ? fmt::format("{}", *count) : "n/a";
}

}  // namespace

SoakMonitor::SoakMonitor(const Meter& meter, pid_t server_pid, std::string ops_unit, bool quiet)
    : meter_(meter), server_pid_(server_pid), ops_unit_(std::move(ops_unit)), quiet_(quiet) {}

SoakMonitor::~SoakMonitor() { stop(); }

void SoakMonitor::start() {
  start_ = Clock::now();
  take_sample(false);
  thread_ = std::thread([this] { loop(); });
}

void SoakMonitor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (start_ != Clock::time_point{}) take_sample(false);
}

void SoakMonitor::set_phase(std::string phase) {
  std::lock_guard lock(mutex_);
  phase_ = std::move(phase);
}

void SoakMonitor::mark_load_start() {
  const double now = elapsed_s();
  std::lock_guard lock(mutex_);
  load_start_s_ = now;
}

void SoakMonitor::mark_load_end() {
  const double now = elapsed_s();
  std::lock_guard lock(mutex_);
  load_end_s_ = now;
}

double SoakMonitor::elapsed_s() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

void SoakMonitor::loop() {
  for (Clock::time_point next = start_ + std::chrono::seconds(1);;
       next += std::chrono::seconds(1)) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    take_sample(!quiet_);
  }
}

void SoakMonitor::take_sample(bool print) {
  SoakSample sample;
  sample.t_s = elapsed_s();
  const Meter::Totals totals = meter_.totals();
  sample.ops = totals.done;
  sample.errors = totals.errors;
  if (server_pid_ > 0) {
    if (Result<std::uint64_t> rss = read_rss_kib(server_pid_)) sample.rss_kib = *rss;
    if (Result<std::uint64_t> fds = count_open_fds(server_pid_)) sample.fds = *fds;
  }
  std::string line;
  {
    std::lock_guard lock(mutex_);
    sample.phase = phase_;
    const double interval = sample.t_s - last_t_s_;
    const double rate = interval > 0 ? static_cast<double>(sample.ops - last_ops_) / interval : 0.0;
    last_ops_ = sample.ops;
    last_t_s_ = sample.t_s;
    if (print) {
      line = fmt::format("[{:6.1f} s] {:<8} {} {} ({:.0f}/s), errors {}, server RSS {}, fds {}\n",
                         sample.t_s, sample.phase, sample.ops, ops_unit_, rate, sample.errors,
                         rss_text(sample.rss_kib), count_text(sample.fds));
    }
    samples_.push_back(std::move(sample));
  }
  if (!line.empty()) std::fwrite(line.data(), 1, line.size(), stderr);
}

SoakTrend SoakMonitor::trend(double warmup_s) const {
  std::lock_guard lock(mutex_);
  SoakTrend trend;
  if (!load_start_s_) return trend;
  const double from = *load_start_s_ + warmup_s;
  const double to = load_end_s_.value_or(1e300);
  std::vector<std::pair<double, double>> rss;
  std::vector<std::pair<double, double>> fds;
  for (const SoakSample& s : samples_) {
    if (s.t_s < from || s.t_s > to) continue;
    ++trend.samples;
    if (s.rss_kib) rss.emplace_back(s.t_s, static_cast<double>(*s.rss_kib));
    if (s.fds) fds.emplace_back(s.t_s, static_cast<double>(*s.fds));
  }
  trend.rss_kib_per_s = least_squares_slope(rss);
  trend.fds_per_s = least_squares_slope(fds);
  return trend;
}

}  // namespace tern::bench
