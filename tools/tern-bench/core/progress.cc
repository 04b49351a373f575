#include "core/progress.h"

#include <cstdio>

#include <fmt/format.h>

namespace tern::bench {

Meter::Meter(std::size_t slots) : slots_(new Slot[slots == 0 ? 1 : slots]), count_(slots) {}

Meter::Totals Meter::totals() const noexcept {
  Totals sum;
  for (std::size_t i = 0; i < count_; ++i) {
    sum.sent += slots_[i].sent.load(std::memory_order_relaxed);
    sum.done += slots_[i].done.load(std::memory_order_relaxed);
    sum.bytes += slots_[i].bytes.load(std::memory_order_relaxed);
    sum.errors += slots_[i].errors.load(std::memory_order_relaxed);
  }
  return sum;
}

Progress::Progress(const Meter& meter, std::chrono::duration<double> interval,
                   ProgressFormat format, bool quiet)
    : meter_(meter), interval_(interval), format_(std::move(format)), quiet_(quiet) {}

Progress::~Progress() { stop(); }

void Progress::start() {
  if (quiet_ || thread_.joinable() || interval_.count() <= 0) return;
  thread_ = std::thread([this] { loop(); });
}

void Progress::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Progress::loop() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto step = std::chrono::duration_cast<Clock::duration>(interval_);
  Clock::time_point previous_time = start;
  Meter::Totals previous = meter_.totals();
  for (Clock::time_point next = start + step;; next += step) {
    {
      std::unique_lock lock(mutex_);
      if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    const Clock::time_point now = Clock::now();
    const Meter::Totals total = meter_.totals();
    ProgressSample sample;
    sample.elapsed_s = std::chrono::duration<double>(now - start).count();
    sample.interval_s = std::chrono::duration<double>(now - previous_time).count();
    sample.total = total;
    sample.delta = {total.sent - previous.sent, total.done - previous.done,
                    total.bytes - previous.bytes, total.errors - previous.errors};
    const std::string line = format_(sample) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    previous = total;
    previous_time = now;
  }
}

ProgressFormat Progress::rate_line(std::string unit) {
  return [unit = std::move(unit)](const ProgressSample& s) {
    const double rate = s.interval_s > 0 ? static_cast<double>(s.delta.done) / s.interval_s : 0;
    return fmt::format("[{:6.1f} s] {:.0f} {}/s (total {}), errors {}", s.elapsed_s, rate, unit,
                       s.total.done, s.total.errors);
  };
}

}  // namespace tern::bench
