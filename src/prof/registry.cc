#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "tern/base/assert.h"
#include "tern/prof/counter.h"

namespace tern::prof {

#if TERN_PROF_ENABLED

namespace {

// Cells per thread: a counter takes one, a timer three (count, total, max).
constexpr std::size_t kMaxCells = 1024;

struct Metric {
  std::string name;
  bool is_timer;
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
  std::vector<ThreadCells*> live;
  ThreadCells retired;
};

Registry& registry() {
  static Registry* instance = new Registry;  // never destroyed: threads may exit late
  return *instance;
}

bool is_timer_slot(const Registry& r, std::size_t slot, std::size_t* base) {
  for (const Metric& m : r.metrics) {
    if (m.is_timer && slot >= m.slot && slot < m.slot + 3) {
      *base = m.slot;
      return true;
    }
  }
  return false;
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
      std::size_t base = 0;
      if (is_timer_slot(r, i, &base) && i == base + 2) {
        if (mine > into.load(std::memory_order_relaxed))
          into.store(mine, std::memory_order_relaxed);
      } else {
        into.store(into.load(std::memory_order_relaxed) + mine, std::memory_order_relaxed);
      }
    }
    std::erase(r.live, cells);
    delete cells;
  }
};

thread_local ThreadCellsOwner thread_owner;
thread_local std::atomic<std::uint64_t>* fast_cells = nullptr;

std::atomic<std::uint64_t>* attach_thread() {
  auto* cells = new ThreadCells;
  Registry& r = registry();
  {
    std::lock_guard lock(r.mutex);
    r.live.push_back(cells);
  }
  thread_owner.cells = cells;
  fast_cells = cells->cells;
  return fast_cells;
}

}  // namespace

namespace detail {

std::size_t register_metric(std::string_view name, bool is_timer) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  const std::size_t width = is_timer ? 3 : 1;
  TERN_ASSERT(r.next_slot + width <= kMaxCells, "tern::prof: too many counters and timers");
  r.metrics.push_back(Metric{std::string(name), is_timer, r.next_slot});
  r.next_slot += width;
  return r.next_slot - width;
}

std::atomic<std::uint64_t>* thread_cells() noexcept {
  std::atomic<std::uint64_t>* cells = fast_cells;
  return cells != nullptr ? cells : attach_thread();
}

std::uint64_t read_counter(std::size_t slot) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::uint64_t sum = r.retired.cells[slot].load(std::memory_order_relaxed);
  for (ThreadCells* cells : r.live) sum += cells->cells[slot].load(std::memory_order_relaxed);
  return sum;
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
    Sample sample;
    sample.name = m.name;
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
