// The worker-loop profiler: per-phase statistics, the report table, the registry of live
// profilers that the metrics read, and TERN_PROF's interval syntax.
#include "tern/prof/loop_profiler.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "tern/base/duration.h"
#include "tern/prof/metrics.h"

namespace tern::prof {

namespace detail {
constinit thread_local LoopProfiler* current_loop_profiler = nullptr;
}  // namespace detail

namespace {

struct LiveProfilers {
  std::mutex mutex;
  std::vector<const LoopProfiler*> profilers;
};

LiveProfilers& live() {
  static LiveProfilers* instance = new LiveProfilers;  // never destroyed: used at exit
  return *instance;
}

constexpr LoopPhase kPhases[kLoopPhaseCount] = {LoopPhase::wait,   LoopPhase::poll,
                                                LoopPhase::handle, LoopPhase::run,
                                                LoopPhase::timers, LoopPhase::posts};

void add_max(std::atomic<std::uint64_t>& max, std::uint64_t value) noexcept {
  if (value > max.load(std::memory_order_relaxed)) max.store(value, std::memory_order_relaxed);
}

void add_to(std::atomic<std::uint64_t>& cell, std::uint64_t value) noexcept {
  cell.store(cell.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
}

double usec(std::uint64_t ns) { return static_cast<double>(ns) / 1000.0; }

// Every live profiler's totals, as tern_loop_phase_seconds (a summary) and
// tern_loop_phase_max_seconds, labelled by worker and phase.
void collect_phases(std::vector<Family>& out) {
  Family seconds{"tern_loop_phase_seconds",
                 "Time each worker spent per loop phase (the profiler, TERN_PROF)",
                 MetricKind::summary,
                 {}};
  Family max{"tern_loop_phase_max_seconds",
             "Longest single run of a worker's loop phase",
             MetricKind::gauge,
             {}};
  LoopProfiler::for_each_totals([&](std::size_t worker, LoopPhase phase, const PhaseTotals& t) {
    Labels labels{{"worker", std::to_string(worker)}, {"phase", std::string(phase_label(phase))}};
    seconds.series.push_back(
        Series{.labels = labels, .sum = static_cast<double>(t.total_ns) * 1e-9, .count = t.count});
    max.series.push_back(Series{.labels = labels, .value = static_cast<double>(t.max_ns) * 1e-9});
  });
  out.push_back(std::move(seconds));
  out.push_back(std::move(max));
}

[[maybe_unused]] const Registration phase_metrics =
    MetricsRegistry::global().collector(&collect_phases);

}  // namespace

std::string_view phase_label(LoopPhase phase) noexcept {
  switch (phase) {
    case LoopPhase::wait:
      return "wait";
    case LoopPhase::poll:
      return "poll";
    case LoopPhase::handle:
      return "handle";
    case LoopPhase::run:
      return "run";
    case LoopPhase::timers:
      return "timers";
    case LoopPhase::posts:
      return "posts";
  }
  return "?";
}

std::string_view phase_title(LoopPhase phase) noexcept {
  switch (phase) {
    case LoopPhase::wait:
      return "wait events";
    case LoopPhase::poll:
      return "poll events";
    case LoopPhase::handle:
      return "handle events";
    case LoopPhase::run:
      return "run fibers";
    case LoopPhase::timers:
      return "timers";
    case LoopPhase::posts:
      return "posts";
  }
  return "?";
}

LoopProfiler::LoopProfiler(std::size_t worker, std::chrono::nanoseconds interval)
    : worker_(worker),
      interval_ns_(static_cast<std::uint64_t>(std::max<std::int64_t>(interval.count(), 1))),
      interval_start_ns_(now()),
      next_report_ns_(interval_start_ns_ + interval_ns_),
      lap_ns_(interval_start_ns_) {
  LiveProfilers& registry = live();
  std::lock_guard lock(registry.mutex);
  registry.profilers.push_back(this);
}

LoopProfiler::~LoopProfiler() {
  if (detail::current_loop_profiler == this) detail::current_loop_profiler = nullptr;
  LiveProfilers& registry = live();
  std::lock_guard lock(registry.mutex);
  std::erase(registry.profilers, this);
}

void LoopProfiler::detach() noexcept {
  if (detail::current_loop_profiler == this) detail::current_loop_profiler = nullptr;
}

void LoopProfiler::record(LoopPhase phase, std::uint64_t start, std::uint64_t end) noexcept {
  std::uint64_t ns = end > start ? end - start : 0;
  if (phase == LoopPhase::handle) {
    nested_ns_ += ns;
  } else {
    lap_ns_ = end;
    if (phase == LoopPhase::wait || phase == LoopPhase::poll) {
      ns = ns > nested_ns_ ? ns - nested_ns_ : 0;
      nested_ns_ = 0;
    }
  }
  Phase& p = phases_[static_cast<std::size_t>(phase)];
  p.interval.record(ns);
  add_to(p.count, 1);
  add_to(p.total_ns, ns);
  add_max(p.max_ns, ns);
}

Deadline LoopProfiler::next_report() const noexcept {
  return Deadline(std::chrono::duration_cast<Clock::duration>(
      std::chrono::nanoseconds(static_cast<std::int64_t>(next_report_ns_))));
}

bool LoopProfiler::interval_empty() const noexcept {
  return std::all_of(phases_.begin(), phases_.end(),
                     [](const Phase& p) { return p.interval.count() == 0; });
}

std::string LoopProfiler::take_report(std::uint64_t now, bool final) {
  const std::uint64_t elapsed = now > interval_start_ns_ ? now - interval_start_ns_ : 0;
  std::uint64_t busy = 0;  // every phase but the wait
  for (LoopPhase phase : kPhases)
    if (phase != LoopPhase::wait) busy += phases_[static_cast<std::size_t>(phase)].interval.sum();
  char line[256];
  std::snprintf(
      line, sizeof line, "tern prof: worker %zu, %s%.3f s, busy %.1f%% (times in usec)\n", worker_,
      final ? "last " : "", static_cast<double>(elapsed) * 1e-9,
      elapsed == 0 ? 0.0 : 100.0 * static_cast<double>(busy) / static_cast<double>(elapsed));
  std::string table = line;
  for (LoopPhase phase : kPhases) {
    Histogram& h = phases_[static_cast<std::size_t>(phase)].interval;
    const std::string title(phase_title(phase));
    std::snprintf(line, sizeof line,
                  "%20s cnt=%llu total-usec=%llu avg=%.3f max-usec=%.3f p99-usec=%.3f\n",
                  title.c_str(), static_cast<unsigned long long>(h.count()),
                  static_cast<unsigned long long>(h.sum() / 1000), h.mean() / 1000.0, usec(h.max()),
                  usec(h.percentile(99)));
    table += line;
    h.reset();
  }
  interval_start_ns_ = now;
  while (next_report_ns_ <= now) next_report_ns_ += interval_ns_;
  return table;
}

PhaseTotals LoopProfiler::totals(LoopPhase phase) const noexcept {
  const Phase& p = phases_[static_cast<std::size_t>(phase)];
  return PhaseTotals{p.count.load(std::memory_order_relaxed),
                     p.total_ns.load(std::memory_order_relaxed),
                     p.max_ns.load(std::memory_order_relaxed)};
}

void LoopProfiler::for_each_totals(
    const std::function<void(std::size_t, LoopPhase, const PhaseTotals&)>& fn) {
  LiveProfilers& registry = live();
  std::lock_guard lock(registry.mutex);
  for (const LoopProfiler* profiler : registry.profilers)
    for (LoopPhase phase : kPhases) fn(profiler->worker_, phase, profiler->totals(phase));
}

Result<std::chrono::milliseconds> parse_interval(std::string_view text) noexcept {
  const Result<std::chrono::nanoseconds> parsed = parse_duration(text);
  if (!parsed) return fail(parsed.error());
  if (parsed->count() == 0) {
    if (text == "0" || text == "off") return std::chrono::milliseconds(0);
    return fail(std::errc::invalid_argument);  // "0s": a zero interval is written "0" or "off"
  }
  if (*parsed < std::chrono::milliseconds(1) || *parsed > std::chrono::hours(24 * 365 * 30))
    return fail(std::errc::invalid_argument);
  return std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
}

}  // namespace tern::prof
