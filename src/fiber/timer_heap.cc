#include "timer_heap.h"

namespace tern::detail {

void TimerHeap::insert(TimerNode* node) {
  heap_.push_back(Slot{node->when, node});
  node->heap_index = heap_.size() - 1;
  sift_up(node->heap_index);
}

void TimerHeap::remove(TimerNode* node) noexcept {
  if (!node->armed()) return;
  const std::size_t index = node->heap_index;
  node->heap_index = TimerNode::kNotArmed;
  const Slot last = heap_.back();
  heap_.pop_back();
  if (last.node == node) return;
  place(index, last);
  sift_up(index);
  sift_down(last.node->heap_index);
}

TimerNode* TimerHeap::pop_expired(Deadline now) noexcept {
  if (heap_.empty() || heap_.front().when > now) return nullptr;
  TimerNode* node = heap_.front().node;
  remove(node);
  return node;
}

void TimerHeap::sift_up(std::size_t index) noexcept {
  const Slot moving = heap_[index];
  while (index > 0) {
    const std::size_t parent = (index - 1) / kArity;
    if (heap_[parent].when <= moving.when) break;
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, moving);
}

void TimerHeap::sift_down(std::size_t index) noexcept {
  const Slot moving = heap_[index];
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = kArity * index + 1;
    if (first >= n) break;
    const std::size_t end = first + kArity < n ? first + kArity : n;
    std::size_t least = first;
    for (std::size_t child = first + 1; child < end; ++child) {
      if (heap_[child].when < heap_[least].when) least = child;
    }
    if (moving.when <= heap_[least].when) break;
    place(index, heap_[least]);
    index = least;
  }
  place(index, moving);
}

}  // namespace tern::detail
