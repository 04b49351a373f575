#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "tern/base/result.h"

namespace tern::detail {

// A fiber stack: usable memory [base, base + size) above a guard region that faults on access.
struct Stack {
  void* mapping = nullptr;  // start of the whole mapping (the guard is at its low end)
  std::size_t mapping_size = 0;
  void* base = nullptr;  // lowest usable address
  std::size_t size = 0;  // usable bytes
  // Whether addr falls in this stack's guard region.
  bool in_guard(const void* addr) const noexcept { return addr >= mapping && addr < base; }
};

// Maps a stack of at least `size` usable bytes with a guard region below it. Memory is
// committed lazily by the kernel as the fiber touches it. Any thread.
Result<Stack> map_stack(std::size_t size);

// Maps `count` stacks of at least `size` usable bytes each, with their guards, in one mapping
// and appends them to `out`; each can be unmapped on its own. Any thread.
Result<void> map_stacks(std::size_t size, std::size_t count, std::vector<Stack>& out);

// Unmaps a stack returned by map_stack or map_stacks. Any thread.
void unmap_stack(const Stack& stack) noexcept;

// The system's page size. Any thread.
inline std::size_t page_size() noexcept {
  static const auto size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// The rounded usable size map_stack gives for a requested size (inline: every spawn asks it).
// Any thread.
inline std::size_t stack_size_for(std::size_t requested) noexcept {
  const std::size_t page = page_size();
  if (requested < 4 * page) requested = 4 * page;
  return (requested + page - 1) & ~(page - 1);
}

// A per-thread cache of unmapped-on-demand stacks, so that creating and destroying fibers in
// steady state makes no system call. It keeps up to max_cached stacks for good: that covers a
// server running a thousand calls at once per worker (each on a fiber of its own) without mapping
// a stack per call; a cached stack keeps only the pages its fibers touched. Above that, up to
// burst_cached, it keeps what a burst of fibers gave back (ten thousand connections that end and
// are replaced by as many new ones) until trim() finds those stacks unused for a whole interval:
// unmapping each such stack only to map another for the next fiber cost a munmap, and the new
// stack's guard and first page faults, per connection. Once it has mapped kMapBatch stacks one by
// one, it maps kMapBatch at once whenever it has none of the size asked for (and room to cache
// the rest), so that a rising number of fibers costs one mmap per batch rather than per fiber,
// while a program of a few fibers maps only those. Owner thread only.
class StackPool {
 public:
  static constexpr std::size_t kMapBatch = 16;

  explicit StackPool(std::size_t max_cached = 1024, std::size_t burst_cached = 16384)
      : max_cached_(max_cached), burst_cached_(std::max(max_cached, burst_cached)) {
    free_.reserve(max_cached_);
  }
  ~StackPool();
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;

  // A stack of at least `size` usable bytes, from the cache when one of that size is there.
  Result<Stack> take(std::size_t size);
  // Returns a stack to the cache, or unmaps it when the cache holds burst_cached already.
  void give(const Stack& stack) noexcept;
  // How many stacks the cache holds.
  std::size_t cached() const noexcept { return free_.size(); }
  // Whether the cache holds more than max_cached stacks (trim() may unmap some).
  bool holds_burst() const noexcept { return free_.size() > max_cached_; }
  // Unmaps the stacks above max_cached that stayed in the cache since the last trim() (the
  // fewest it held in between, less max_cached), the least recently given first, and starts a
  // new interval.
  void trim() noexcept;

 private:
  std::size_t max_cached_;
  std::size_t burst_cached_;
  std::vector<Stack> free_;
  std::size_t mapped_ = 0;     // stacks this pool has mapped, counted up to kMapBatch
  std::size_t low_water_ = 0;  // the fewest stacks cached since the last trim()
};

}  // namespace tern::detail
