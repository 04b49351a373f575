#pragma once

#include <atomic>

namespace tern {

// The link an object embeds to be queued in an MpscQueue.
struct MpscNode {
  std::atomic<MpscNode*> next{nullptr};
};

// An intrusive, unbounded, lock-free queue with many producers and one consumer (Vyukov's
// design). push() is wait-free and may be called from any thread; pop() only from the one
// consumer thread. A node must stay alive until it has been popped.
class MpscQueue {
 public:
  MpscQueue() noexcept : head_(&stub_), tail_(&stub_) {}
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // Enqueues node. Any thread.
  void push(MpscNode* node) noexcept {
    node->next.store(nullptr, std::memory_order_relaxed);
    MpscNode* prev = head_.exchange(node, std::memory_order_acq_rel);
    prev->next.store(node, std::memory_order_release);
  }

  // Whether pop() would return nullptr now without looking further: nothing queued since the
  // queue was last drained (or a first push still between its two steps). Two loads, for a
  // consumer that polls an idle queue often. Consumer thread only.
  bool drained() const noexcept {
    return tail_ == &stub_ && stub_.next.load(std::memory_order_acquire) == nullptr;
  }

  // Dequeues the oldest node, or returns nullptr when empty (or when a producer is between
  // its two steps; that node shows up on a later call). Consumer thread only.
  MpscNode* pop() noexcept {
    MpscNode* tail = tail_;
    MpscNode* next = tail->next.load(std::memory_order_acquire);
    if (tail == &stub_) {
      if (next == nullptr) return nullptr;
      tail_ = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    if (tail != head_.load(std::memory_order_acquire)) return nullptr;
    push(&stub_);
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      tail_ = next;
      return tail;
    }
    return nullptr;
  }

 private:
  std::atomic<MpscNode*> head_;
  alignas(64) MpscNode* tail_;
  MpscNode stub_;
};

}  // namespace tern
