#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tern/prof/counter.h"

// tern::prof's metrics registry: named counters, gauges and histograms with help text and
// labels, read together and rendered for Prometheus (tern/prof/prometheus.h). Every listed
// tern::prof::Counter and Timer is exported too, so a layer only has to count.

namespace tern::prof {

// One label of a series: name="value".
struct Label {
  std::string name;
  std::string value;
  bool operator==(const Label&) const = default;
};
using Labels = std::vector<Label>;

// The Prometheus type of a family.
enum class MetricKind { counter, gauge, histogram, summary };

// One series of a family, as read at one moment.
struct Series {
  Labels labels;
  double value = 0;  // counter, gauge
  // histogram: (upper bound, values <= bound), cumulative, the last bound +Inf
  std::vector<std::pair<double, std::uint64_t>> buckets;
  double sum = 0;           // histogram, summary
  std::uint64_t count = 0;  // histogram, summary
};

// A named set of series of one kind, as read by MetricsRegistry::collect().
struct Family {
  std::string name;
  std::string help;
  MetricKind kind = MetricKind::gauge;
  std::vector<Series> series;
};

// A value that goes up and down. set(), add() and value() from any thread.
class Gauge {
 public:
  void set(std::int64_t value) noexcept { value_.store(value, std::memory_order_relaxed); }
  void add(std::int64_t delta) noexcept { value_.fetch_add(delta, std::memory_order_relaxed); }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

// A histogram with fixed bucket bounds for values recorded on any thread without a lock: each
// thread adds to its own buckets (relaxed atomics, no read-modify-write) and a read sums every
// thread's. Values are integers (nanoseconds, bytes); the registry scales them for export.
// Built with TERN_PROF_ENABLED=0 it records nothing.
class Distribution {
 public:
  // `bounds`: strictly increasing inclusive upper bounds; larger values fall in a last,
  // unbounded bucket. Any thread.
  explicit Distribution(std::vector<std::uint64_t> bounds);

  // Counts one value. Any thread.
  void record(std::uint64_t value) noexcept {
#if TERN_PROF_ENABLED
    const std::size_t bucket = static_cast<std::size_t>(
        std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
    std::atomic<std::uint64_t>* cells = detail::thread_cells() + slot_;
    cells[bucket].store(cells[bucket].load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    std::atomic<std::uint64_t>& sum = cells[bounds_.size() + 1];
    sum.store(sum.load(std::memory_order_relaxed) + value, std::memory_order_relaxed);
#else
    (void)value;
#endif
  }

  // What every thread has recorded: per bucket (bounds().size() + 1, not cumulative), the sum
  // of the values and their number. Any thread.
  struct Reading {
    std::vector<std::uint64_t> counts;
    std::uint64_t sum = 0;
    std::uint64_t count = 0;
  };
  Reading read() const;
  const std::vector<std::uint64_t>& bounds() const noexcept { return bounds_; }

 private:
  std::vector<std::uint64_t> bounds_;
  std::size_t slot_ = 0;
};

class MetricsRegistry;

// Keeps a callback registered while it lives; destroying it (or reset()) unregisters the
// callback and waits for a call in progress to finish. Any thread, but not from the callback.
class Registration {
 public:
  Registration() = default;
  Registration(Registration&& other) noexcept : id_(std::exchange(other.id_, 0)) {}
  Registration& operator=(Registration&& other) noexcept;
  ~Registration() { reset(); }
  void reset() noexcept;

 private:
  friend class MetricsRegistry;
  explicit Registration(std::uint64_t id) noexcept : id_(id) {}
  std::uint64_t id_ = 0;
};

// The process's metrics: families of counters, gauges and histograms, callbacks that compute
// values when read, and (implicitly) every listed tern::prof::Counter and Timer. Names follow
// Prometheus rules ([a-zA-Z_:][a-zA-Z0-9_:]*, counters end in _total). Metrics are created once
// and live as long as the process. Every function may be called from any thread.
class MetricsRegistry {
 public:
  // The registry of the process.
  static MetricsRegistry& global();

  // The counter `name` with `labels`, created on first use (later calls return the same one).
  Counter& counter(std::string_view name, std::string_view help, Labels labels = {});
  // The gauge `name` with `labels`, created on first use.
  Gauge& gauge(std::string_view name, std::string_view help, Labels labels = {});
  // The histogram `name` with `labels`, created on first use with `bounds`; exported values
  // and bounds are multiplied by `unit` (1e-9 turns nanoseconds into seconds).
  Distribution& distribution(std::string_view name, std::string_view help,
                             std::vector<std::uint64_t> bounds, double unit = 1.0,
                             Labels labels = {});

  // A gauge whose value `read` computes each time the registry is read (on the reading
  // thread). The callback must not register or unregister metrics.
  [[nodiscard]] Registration gauge_callback(std::string_view name, std::string_view help,
                                            Labels labels, std::function<double()> read);
  // A callback that appends whole families each time the registry is read (series of families
  // with the same name are merged). It must not register or unregister metrics.
  [[nodiscard]] Registration collector(std::function<void(std::vector<Family>&)> collect);

  // Every family with its current values: registered metrics, callbacks, then tern::prof
  // counters ("a.b" becomes tern_a_b_total) and timers (a summary tern_a_b_seconds and a gauge
  // tern_a_b_max_seconds). Series with the same name and labels are summed.
  std::vector<Family> collect() const;

  // Unregisters callback `id` (what Registration's destructor calls).
  void unregister(std::uint64_t id) noexcept;

  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

 private:
  struct State;
  MetricsRegistry();
  ~MetricsRegistry();
  std::unique_ptr<State> state_;
};

// Whether `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). Any thread.
bool valid_metric_name(std::string_view name) noexcept;
// Whether `name` is a valid label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __).
bool valid_label_name(std::string_view name) noexcept;

// Seconds since the process started (since tern::prof was initialized). Any thread.
double uptime_seconds() noexcept;

}  // namespace tern::prof
