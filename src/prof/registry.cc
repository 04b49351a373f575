#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "tern/base/assert.h"
#include "tern/prof/counter.h"

namespace tern::prof {

#if TERN_PROF_ENABLED

namespace {

// Cells per thread: a counter takes one, a timer three (count, total, max), a histogram one per
// bucket and one for the sum (32 KiB per thread that counts anything).
constexpr std::size_t kMaxCells = 4096;

struct Metric {
  std::string name;
  std::string help;
  bool is_timer;
  bool listed;
  std::size_t slot;
};

struct ThreadCells {
  std::atomic<std::uint64_t> cells[kMaxCells] = {};
};

// The registry: metric names, the cells of live threads, and what exited threads left.
struct Registry {
  std::mutex mutex;
  std::vector<Metric> metrics;
  std::size_t next_slot = 0;
  bool max_cell[kMaxCells] = {};  // a timer's max: folded with max, not summed
  std::vector<ThreadCells*> live;
  ThreadCells retired;
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: threads may exit late
  return *instance;
}

// Folds an exiting thread's cells into the retired totals.
struct ThreadCellsOwner {
  ThreadCells* cells = nullptr;
  ~ThreadCellsOwner() {
    if (cells == nullptr) return;
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    for (std::size_t i = 0; i < r.next_slot; ++i) {
      const std::uint64_t mine = cells->cells[i].load(std::memory_order_relaxed);
      std::atomic<std::uint64_t>& into = r.retired.cells[i];
      if (r.max_cell[i]) {
        if (mine > into.load(std::memory_order_relaxed))
          into.store(mine, std::memory_order_relaxed);
      } else {
        into.store(into.load(std::memory_order_relaxed) + mine, std::memory_order_relaxed);
      }
    }
    std::erase(r.live, cells);
    delete cells;
    detail::current_thread_cells = nullptr;  // a later count on this thread starts anew
  }
};

thread_local ThreadCellsOwner thread_owner;

std::size_t reserve(Registry& r, std::size_t width) {
  TERN_ASSERT(r.next_slot + width <= kMaxCells,
              "tern::prof: too many counters, timers and histograms");
  r.next_slot += width;
  return r.next_slot - width;
}

}  // namespace

namespace detail {

std::size_t register_metric(std::string_view name, bool is_timer) {
  return register_metric(name, {}, is_timer, true);
}

std::size_t register_metric(std::string_view name, std::string_view help, bool is_timer,
                            bool listed) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::size_t slot = reserve(r, is_timer ? 3 : 1);
  if (is_timer) r.max_cell[slot + 2] = true;
  r.metrics.push_back(Metric{std::string(name), std::string(help), is_timer, listed, slot});
  return slot;
}

std::size_t register_cells(std::size_t width) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return reserve(r, width);
}

constinit thread_local std::atomic<std::uint64_t>* current_thread_cells = nullptr;

std::atomic<std::uint64_t>* attach_thread_cells() noexcept {
  auto* cells = new ThreadCells;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    r.live.push_back(cells);
  }
  thread_owner.cells = cells;
  current_thread_cells = cells->cells;
  return current_thread_cells;
}

std::uint64_t read_counter(std::size_t slot) {
  std::uint64_t sum = 0;
  read_cells(slot, std::span(&sum, 1));
  return sum;
}

void read_cells(std::size_t slot, std::span<std::uint64_t> out) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = r.retired.cells[slot + i].load(std::memory_order_relaxed);
  for (ThreadCells* cells : r.live)
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] += cells->cells[slot + i].load(std::memory_order_relaxed);
}

TimerStats read_timer(std::size_t slot) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  TimerStats stats;
  auto fold = [&](const ThreadCells& cells) {
    stats.count += cells.cells[slot].load(std::memory_order_relaxed);
    stats.total_ns += cells.cells[slot + 1].load(std::memory_order_relaxed);
    const std::uint64_t max = cells.cells[slot + 2].load(std::memory_order_relaxed);
    if (max > stats.max_ns) stats.max_ns = max;
  };
  fold(r.retired);
  for (ThreadCells* cells : r.live) fold(*cells);
  return stats;
}

}  // namespace detail

std::vector<Sample> snapshot() {
  std::vector<Metric> metrics;
  {
    Registry& r = registry();
    std::lock_guard lock(r.mutex);
    metrics = r.metrics;
  }
  std::vector<Sample> samples;
  samples.reserve(metrics.size());
  for (const Metric& m : metrics) {
    if (!m.listed) continue;
    Sample sample;
    sample.name = m.name;
    sample.help = m.help;
    sample.is_timer = m.is_timer;
    if (m.is_timer) {
      sample.timer = detail::read_timer(m.slot);
    } else {
      sample.value = detail::read_counter(m.slot);
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

#else

std::vector<Sample> snapshot() { return {}; }

#endif  // TERN_PROF_ENABLED

}  // namespace tern::prof
