#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <vector>

#include "scheduler.h"
#include "tern/fiber/runtime.h"

namespace tern::detail {

// What a Runtime shares with its schedulers. Created by Runtime; read by the workers.
class RuntimeState {
 public:
  RuntimeState(Runtime* owner, RuntimeOptions options);
  Runtime* owner() const noexcept { return owner_; }
  const RuntimeOptions& options() const noexcept { return options_; }
  std::size_t worker_count() const noexcept { return worker_count_; }
  // Reserves `count` consecutive fiber ids and returns the first. Any thread.
  std::uint64_t allocate_fiber_ids(std::uint64_t count) noexcept {
    return next_fiber_id.fetch_add(count, std::memory_order_relaxed);
  }

  std::vector<std::unique_ptr<Scheduler>> schedulers;
  std::atomic<bool> running{false};
  // Guards `schedulers` and `accepting` for posts from threads that are not this runtime's
  // workers; the workers themselves need no lock (schedulers outlive every worker thread).
  std::shared_mutex outside_posts;
  bool accepting = false;

 private:
  Runtime* owner_;
  RuntimeOptions options_;
  std::size_t worker_count_;
  static std::atomic<std::uint64_t> next_fiber_id;
};

}  // namespace tern::detail
