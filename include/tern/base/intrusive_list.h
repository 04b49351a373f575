#pragma once

#include <cstddef>

namespace tern {

// The links an object embeds to be a member of one IntrusiveList at a time.
struct ListHook {
  ListHook* prev = nullptr;
  ListHook* next = nullptr;
  // Whether the hook is in a list.
  bool linked() const noexcept { return next != nullptr; }
};

// A doubly linked list of objects that embed a ListHook (member `Hook`), with O(1) push, pop
// and remove and no allocation. Not thread-safe: the owner guards it.
template <typename T, ListHook T::* Hook>
class IntrusiveList {
 public:
  IntrusiveList() noexcept { head_.prev = head_.next = &head_; }
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;

  bool empty() const noexcept { return head_.next == &head_; }
  std::size_t size() const noexcept { return size_; }

  // Appends item; it must not be in a list.
  void push_back(T& item) noexcept { insert_before(&head_, &(item.*Hook)); }
  // Prepends item; it must not be in a list.
  void push_front(T& item) noexcept { insert_before(head_.next, &(item.*Hook)); }

  // The first item, or nullptr.
  T* front() noexcept { return empty() ? nullptr : owner(head_.next); }

  // Removes and returns the first item, or nullptr.
  T* pop_front() noexcept {
    if (empty()) return nullptr;
    ListHook* h = head_.next;
    unlink(h);
    return owner(h);
  }

  // Removes item, which must be in this list.
  void remove(T& item) noexcept { unlink(&(item.*Hook)); }

  // Calls fn(T&) for each item; fn must not change the list.
  template <typename Fn>
  void for_each(Fn&& fn) {
    for (ListHook* h = head_.next; h != &head_; h = h->next) fn(*owner(h));
  }

 private:
  static T* owner(ListHook* h) noexcept {
    const auto offset = reinterpret_cast<std::size_t>(&(static_cast<T*>(nullptr)->*Hook));
    return reinterpret_cast<T*>(reinterpret_cast<char*>(h) - offset);
  }
  void insert_before(ListHook* pos, ListHook* h) noexcept {
    h->next = pos;
    h->prev = pos->prev;
    pos->prev->next = h;
    pos->prev = h;
    ++size_;
  }
  void unlink(ListHook* h) noexcept {
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->prev = h->next = nullptr;
    --size_;
  }

  ListHook head_;
  std::size_t size_ = 0;
};

}  // namespace tern
