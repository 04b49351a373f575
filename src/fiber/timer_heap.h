#pragma once

#include <cstddef>
#include <vector>

#include "tern/base/clock.h"

namespace tern::detail {

// An entry in a TimerHeap; embedded in the object that waits for it.
struct TimerNode {
  static constexpr std::size_t kNotArmed = ~std::size_t{0};
  Deadline when{};
  std::size_t heap_index = kNotArmed;
  bool armed() const noexcept { return heap_index != kNotArmed; }
};

// A 4-ary min-heap of timers ordered by deadline, with O(log n) insert and remove of any node
// (each node knows its index). Each slot holds its node's deadline, so ordering never reads the
// nodes themselves (they live in fiber control blocks, cold when thousands of fibers wait), and a
// slot's four children share one or two cache lines. Owner thread only.
class TimerHeap {
 public:
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  // The earliest deadline; the heap must not be empty.
  Deadline earliest() const noexcept { return heap_.front().when; }
  // Arms node for node->when; it must not be armed.
  void insert(TimerNode* node);
  // Disarms node if it is armed.
  void remove(TimerNode* node) noexcept;
  // Removes and returns the earliest node if its deadline is at or before now, else nullptr.
  TimerNode* pop_expired(Deadline now) noexcept;

 private:
  static constexpr std::size_t kArity = 4;
  struct Slot {
    Deadline when;
    TimerNode* node;
  };
  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;
  void place(std::size_t index, const Slot& slot) noexcept {
    heap_[index] = slot;
    slot.node->heap_index = index;
  }
  std::vector<Slot> heap_;
};

}  // namespace tern::detail
