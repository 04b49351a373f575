#include "timer_heap.h"

namespace tern::detail {

void TimerHeap::insert(TimerNode* node) {
  heap_.push_back(node);
  node->heap_index = heap_.size() - 1;
  sift_up(node->heap_index);
}

void TimerHeap::remove(TimerNode* node) noexcept {
  if (!node->armed()) return;
  const std::size_t index = node->heap_index;
  node->heap_index = TimerNode::kNotArmed;
  TimerNode* last = heap_.back();
  heap_.pop_back();
  if (last == node) return;
  place(index, last);
  sift_up(index);
  sift_down(last->heap_index);
}

TimerNode* TimerHeap::pop_expired(Deadline now) noexcept {
  if (heap_.empty() || heap_.front()->when > now) return nullptr;
  TimerNode* node = heap_.front();
  remove(node);
  return node;
}

void TimerHeap::sift_up(std::size_t index) noexcept {
  TimerNode* node = heap_[index];
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (heap_[parent]->when <= node->when) break;
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, node);
}

void TimerHeap::sift_down(std::size_t index) noexcept {
  TimerNode* node = heap_[index];
  const std::size_t n = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= n) break;
    if (child + 1 < n && heap_[child + 1]->when < heap_[child]->when) ++child;
    if (node->when <= heap_[child]->when) break;
    place(index, heap_[child]);
    index = child;
  }
  place(index, node);
}

}  // namespace tern::detail
