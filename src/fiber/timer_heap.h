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

// A binary min-heap of timers ordered by deadline, with O(log n) insert and remove of any
// node (each node knows its index). Owner thread only.
class TimerHeap {
 public:
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  // The earliest deadline; the heap must not be empty.
  Deadline earliest() const noexcept { return heap_.front()->when; }
  // Arms node for node->when; it must not be armed.
  void insert(TimerNode* node);
  // Disarms node if it is armed.
  void remove(TimerNode* node) noexcept;
  // Removes and returns the earliest node if its deadline is at or before now, else nullptr.
  TimerNode* pop_expired(Deadline now) noexcept;

 private:
  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;
  void place(std::size_t index, TimerNode* node) noexcept {
    heap_[index] = node;
    node->heap_index = index;
  }
  std::vector<TimerNode*> heap_;
};

}  // namespace tern::detail
