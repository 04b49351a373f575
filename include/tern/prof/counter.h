#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// tern::prof: named counters and timers, kept per thread without atomics' read-modify-write
// and summed on read (as brpc's bvar). Built with TERN_PROF_ENABLED=0 they compile to nothing.

namespace tern::prof {

// What a Timer has recorded, over every thread.
struct TimerStats {
  std::uint64_t count = 0;
  std::uint64_t total_ns = 0;
  std::uint64_t max_ns = 0;
};

// One named metric as read by snapshot().
struct Sample {
  std::string name;
  std::string help;  // what it counts, if its creator said (empty otherwise)
  bool is_timer = false;
  std::uint64_t value = 0;  // counters: the sum
  TimerStats timer;         // timers
};

namespace detail {
// Marks a Counter that a metrics registry lists under its own name (snapshot() skips it).
struct Unlisted {};
}  // namespace detail

#if TERN_PROF_ENABLED

namespace detail {
// Reserves per-thread cells for a metric named `name` (one for a counter, three for a timer)
// and returns the first. Unlisted metrics are left out of snapshot(). Any thread.
std::size_t register_metric(std::string_view name, bool is_timer);
std::size_t register_metric(std::string_view name, std::string_view help, bool is_timer,
                            bool listed);
// Reserves `width` per-thread cells that are summed on read (a histogram's buckets). Any thread.
std::size_t register_cells(std::size_t width);
// Sums cells [slot, slot + out.size()) over all threads, live and exited. Any thread.
void read_cells(std::size_t slot, std::span<std::uint64_t> out);
// The calling thread's cells once it has any, else nullptr.
extern constinit thread_local std::atomic<std::uint64_t>* current_thread_cells;
// Creates the calling thread's cells. Any thread.
std::atomic<std::uint64_t>* attach_thread_cells() noexcept;
// The calling thread's cells (created on first use). Any thread.
inline std::atomic<std::uint64_t>* thread_cells() noexcept {
  std::atomic<std::uint64_t>* cells = current_thread_cells;
  return cells != nullptr ? cells : attach_thread_cells();
}
// Sums a counter's or reads a timer's cells over all threads, live and exited. Any thread.
std::uint64_t read_counter(std::size_t slot);
TimerStats read_timer(std::size_t slot);
}  // namespace detail

// A named event count. add() from any thread; value() from any thread.
class Counter {
 public:
  // Registers a counter; metrics are usually static and live as long as the process.
  explicit Counter(std::string_view name) : slot_(detail::register_metric(name, false)) {}
  // Registers a counter with a line of help text (shown by the metrics endpoint).
  Counter(std::string_view name, std::string_view help)
      : slot_(detail::register_metric(name, help, false, true)) {}
  // A counter that snapshot() leaves out, for a registry that exports it under its own name.
  Counter(detail::Unlisted, std::string_view name)
      : slot_(detail::register_metric(name, {}, false, false)) {}
  // Adds n on the calling thread's cell (no lock, no atomic read-modify-write).
  void add(std::uint64_t n = 1) noexcept {
    std::atomic<std::uint64_t>& cell = detail::thread_cells()[slot_];
    cell.store(cell.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  // The sum over all threads (a snapshot).
  std::uint64_t value() const { return detail::read_counter(slot_); }

 private:
  std::size_t slot_;
};

// A named duration statistic: count, total and max in nanoseconds. record() from any thread.
class Timer {
 public:
  explicit Timer(std::string_view name) : slot_(detail::register_metric(name, true)) {}
  // Registers a timer with a line of help text.
  Timer(std::string_view name, std::string_view help)
      : slot_(detail::register_metric(name, help, true, true)) {}
  // Records one duration on the calling thread's cells.
  void record(std::uint64_t ns) noexcept {
    std::atomic<std::uint64_t>* cells = detail::thread_cells() + slot_;
    cells[0].store(cells[0].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    cells[1].store(cells[1].load(std::memory_order_relaxed) + ns, std::memory_order_relaxed);
    if (ns > cells[2].load(std::memory_order_relaxed))
      cells[2].store(ns, std::memory_order_relaxed);
  }
  // The statistics over all threads (a snapshot).
  TimerStats read() const { return detail::read_timer(slot_); }

 private:
  std::size_t slot_;
};

// Records the time from its construction to its destruction into a Timer. Any thread.
class ScopedTimer {
 public:
  explicit ScopedTimer(Timer& timer) noexcept
      : timer_(timer), start_(std::chrono::steady_clock::now()) {}
  ~ScopedTimer() {
    const auto elapsed = std::chrono::steady_clock::now() - start_;
    timer_.record(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()));
  }
  ScopedTimer(const ScopedTimer&) = delete;
  ScopedTimer& operator=(const ScopedTimer&) = delete;

 private:
  Timer& timer_;
  std::chrono::steady_clock::time_point start_;
};

#else  // TERN_PROF_ENABLED

class Counter {
 public:
  explicit Counter(std::string_view) {}
  Counter(std::string_view, std::string_view) {}
  Counter(detail::Unlisted, std::string_view) {}
  void add(std::uint64_t = 1) noexcept {}
  std::uint64_t value() const { return 0; }
};

class Timer {
 public:
  explicit Timer(std::string_view) {}
  Timer(std::string_view, std::string_view) {}
  void record(std::uint64_t) noexcept {}
  TimerStats read() const { return {}; }
};

class ScopedTimer {
 public:
  explicit ScopedTimer(Timer&) noexcept {}
};

#endif  // TERN_PROF_ENABLED

// Every listed counter and timer with its current value, in registration order. Any thread.
std::vector<Sample> snapshot();

}  // namespace tern::prof

#define TERN_PROF_CONCAT2(a, b) a##b
#define TERN_PROF_CONCAT(a, b) TERN_PROF_CONCAT2(a, b)
// Times the rest of the enclosing scope into `timer` (a tern::prof::Timer).
#define TERN_PROF_SCOPE(timer) \
  ::tern::prof::ScopedTimer TERN_PROF_CONCAT(tern_prof_scope_, __LINE__)(timer)
