#pragma once

#include <new>
#include <utility>

// Wait state that others touch while its fiber is parked (a Waiter in a primitive's queue, the
// value a channel hands over, an io_uring operation's record) must not live on a shared stack:
// a shared-stack fiber's frames are copied away while it is parked, and another fiber's run at
// the same addresses. ParkedNode keeps such state on the caller's stack as usual, and on the heap
// when the caller runs on a shared stack.

namespace tern::detail {

// Whether the calling fiber runs on its worker's shared stack (StackMode::shared). Any thread.
bool parks_off_stack() noexcept;

// A T that lives on the caller's stack, or on the heap for a shared-stack fiber. Owner fiber.
template <typename T>
class ParkedNode {
 public:
  template <typename... Args>
  explicit ParkedNode(bool on_heap, Args&&... args)
      : node_(on_heap ? new T(std::forward<Args>(args)...)
                      : ::new(static_cast<void*>(local_)) T(std::forward<Args>(args)...)) {}
  ~ParkedNode() {
    if (static_cast<void*>(node_) == static_cast<void*>(local_)) {
      node_->~T();
    } else {
      delete node_;
    }
  }
  ParkedNode(const ParkedNode&) = delete;
  ParkedNode& operator=(const ParkedNode&) = delete;

  T& operator*() const noexcept { return *node_; }
  T* operator->() const noexcept { return node_; }
  T* get() const noexcept { return node_; }

 private:
  alignas(T) unsigned char local_[sizeof(T)];
  T* node_;
};

}  // namespace tern::detail
