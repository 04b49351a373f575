#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/prof/histogram.h"

// The worker-loop profiler (bServer's "bprof", report 000 in
// docs/benchmark-methods.md): each worker times the phases of its
// loop and, every interval, reports per phase `name cnt= total-usec= avg= max-usec= p99-usec=`.
// The scheduler and the reactors time a phase only through a pointer that is nullptr while
// profiling is off (one predictable test per phase, no clock read) and that does not exist when
// TERN_PROF_ENABLED=0.

namespace tern::prof {

// The phases of a worker's loop.
enum class LoopPhase : std::uint8_t {
  wait,    // parked: the blocking wait for I/O events, timers or posts (idle time included)
  poll,    // the non-blocking check for I/O events between runs of fibers
  handle,  // dispatching the events a wait or poll returned (waking their fibers)
  run,     // running ready fibers until control comes back to the loop
  timers,  // firing expired timers
  posts,   // taking in fibers woken and tasks posted from other threads
};
inline constexpr std::size_t kLoopPhaseCount = 6;

// The phase's metric label ("wait") and its name in the table ("wait events"). Any thread.
std::string_view phase_label(LoopPhase phase) noexcept;
std::string_view phase_title(LoopPhase phase) noexcept;

// How often a phase ran, for how long in total, and its longest run.
struct PhaseTotals {
  std::uint64_t count = 0;
  std::uint64_t total_ns = 0;
  std::uint64_t max_ns = 0;
};

class LoopProfiler;

namespace detail {
// The profiler of the calling worker while it profiles, else nullptr.
extern constinit thread_local LoopProfiler* current_loop_profiler;
}  // namespace detail

// One worker's phase statistics: for the current interval a Histogram per phase (count, total,
// max, p99), and totals since it was created that other threads may read. Everything but
// totals() and for_each_totals() belongs to the worker's thread.
class LoopProfiler {
 public:
  // A profiler for worker `worker` that reports every `interval` (> 0).
  LoopProfiler(std::size_t worker, std::chrono::nanoseconds interval);
  ~LoopProfiler();
  LoopProfiler(const LoopProfiler&) = delete;
  LoopProfiler& operator=(const LoopProfiler&) = delete;

  // The calling thread's profiler (set by attach()), or nullptr. Any thread.
  static LoopProfiler* current() noexcept { return detail::current_loop_profiler; }
  // Makes this the calling thread's profiler, or stops that. Owner thread.
  void attach() noexcept { detail::current_loop_profiler = this; }
  void detach() noexcept;

  // The clock the profiler reads, in nanoseconds. Any thread.
  static std::uint64_t now() noexcept {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count());
  }

  // Records one run of `phase` from `start` to `end` (now() values). A handle phase counts as
  // nested in the wait or poll that encloses it, which is recorded without it. Owner thread.
  void record(LoopPhase phase, std::uint64_t start, std::uint64_t end) noexcept;
  // Where the last phase other than handle ended: the loop's phases follow one another, so the
  // next one starts there and costs one clock read instead of two. Owner thread.
  std::uint64_t lap() const noexcept { return lap_ns_; }
  // Makes the next phase start now (after time that belongs to no phase, such as a report).
  void restart_lap() noexcept { lap_ns_ = now(); }

  // Whether the interval is over at `now`, and when it ends (a parked worker wakes for it).
  bool report_due(std::uint64_t now) const noexcept { return now >= next_report_ns_; }
  Deadline next_report() const noexcept;
  // Whether anything was recorded since the last report.
  bool interval_empty() const noexcept;
  // The interval's table (a header line, then one line per phase), and a new interval starts.
  // `final`: the worker is stopping (the header says so). Owner thread.
  std::string take_report(std::uint64_t now, bool final = false);

  std::size_t worker() const noexcept { return worker_; }
  // The totals of `phase` since creation. Any thread.
  PhaseTotals totals(LoopPhase phase) const noexcept;
  // Calls fn(worker, phase, totals) for every phase of every live profiler. Any thread; fn
  // must not create or destroy profilers.
  static void for_each_totals(
      const std::function<void(std::size_t, LoopPhase, const PhaseTotals&)>& fn);

 private:
  struct Phase {
    Histogram interval;
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> total_ns{0};
    std::atomic<std::uint64_t> max_ns{0};
  };

  std::size_t worker_;
  std::uint64_t interval_ns_;
  std::uint64_t interval_start_ns_;
  std::uint64_t next_report_ns_;
  std::uint64_t nested_ns_ = 0;
  std::uint64_t lap_ns_;
  std::array<Phase, kLoopPhaseCount> phases_;
};

namespace detail {
// The timed copy of timed_phase's fn, kept out of line so the untimed one stays inlined.
template <typename Fn>
[[gnu::noinline]] void run_timed(LoopProfiler* profiler, LoopPhase phase, Fn& fn) {
  const std::uint64_t start = LoopProfiler::now();
  fn();
  profiler->record(phase, start, LoopProfiler::now());
}
}  // namespace detail

// Runs fn, timing it as `phase` of `profiler` unless that is nullptr (profiling off: one test,
// no clock read). Owner thread of the profiler.
template <typename Fn>
inline void timed_phase(LoopProfiler* profiler, LoopPhase phase, Fn&& fn) {
#if TERN_PROF_ENABLED
  if (profiler != nullptr) [[unlikely]] {
    detail::run_timed(profiler, phase, fn);
    return;
  }
#else
  (void)profiler;
  (void)phase;
#endif
  fn();
}

// Parses a profiler interval: a positive number with a unit, as in "10s", "500ms", "1m",
// "1.5s" or "1h"; "0" and "off" mean off (zero). Any thread.
[[nodiscard]] Result<std::chrono::milliseconds> parse_interval(std::string_view text) noexcept;

}  // namespace tern::prof
