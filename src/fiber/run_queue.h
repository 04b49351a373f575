#pragma once

#include "fiber_control.h"

namespace tern::detail {

// A worker's fibers that are ready to run, first in first out: a singly linked list through
// FiberControl::run_next, so that a push or a pop is a couple of pointer moves and a yield
// can hand the worker on with a single step (rotate). The last fiber's run_next is left as it
// is (pop_front knows the last fiber by tail_), which saves a store per push.
// Owner worker only.
class RunQueue {
 public:
  bool empty() const noexcept { return head_ == nullptr; }

  // The fiber that runs next, or nullptr.
  FiberControl* front() const noexcept { return head_; }

  // Appends fiber, which must not be queued.
  void push_back(FiberControl* fiber) noexcept {
    if (head_ == nullptr) {
      head_ = fiber;
    } else {
      tail_->run_next = fiber;
    }
    tail_ = fiber;
  }

  // Prepends fiber, which must not be queued.
  void push_front(FiberControl* fiber) noexcept {
    fiber->run_next = head_;
    if (head_ == nullptr) tail_ = fiber;
    head_ = fiber;
  }

  // Removes and returns the first fiber, or nullptr.
  FiberControl* pop_front() noexcept {
    FiberControl* first = head_;
    if (first != nullptr) head_ = first == tail_ ? nullptr : first->run_next;
    return first;
  }

  // Removes and returns the first fiber and appends `fiber` in its place at the back: what a
  // yield does. The queue must not be empty. With one fiber queued (two fibers taking turns)
  // it reads no link: the new head is `fiber` itself, so the next yield's load of the head
  // waits for one store (of a value this yield loaded) instead of a store and then a load of
  // a link that store wrote.
  FiberControl* rotate(FiberControl* fiber) noexcept {
    FiberControl* first = head_;
    FiberControl* last = tail_;
    if (first == last) [[likely]] {
      head_ = fiber;
    } else {
      head_ = first->run_next;
      last->run_next = fiber;
    }
    // Kept apart: merged into one 16-byte store (GCC's SLP vectorizer does that at -O3), the
    // next yield's 8-byte load of tail_ would wait for that store to retire instead of being
    // forwarded from it (12% of a yield's samples when it happened).
    asm volatile("" ::: "memory");
    tail_ = fiber;
    return first;
  }

 private:
  FiberControl* head_ = nullptr;
  FiberControl* tail_ = nullptr;  // the last fiber while the queue is not empty
};

}  // namespace tern::detail
