#pragma once

#include <cstddef>

namespace tern {

namespace detail {
// Reserves a new fiber-local key. Any thread.
std::size_t new_fiber_local_key() noexcept;
// The current fiber's value slot for key; `destroy` frees a non-null value when the fiber
// ends. Worker fibers only.
void*& fiber_local_slot(std::size_t key, void (*destroy)(void*));
}  // namespace detail

// A variable with one instance per fiber, created (value-initialized) on first use in each
// fiber and destroyed when that fiber ends. Usually a static or global. get() from worker
// fibers only.
template <typename T>
class FiberLocal {
 public:
  FiberLocal() noexcept : key_(detail::new_fiber_local_key()) {}
  FiberLocal(const FiberLocal&) = delete;
  FiberLocal& operator=(const FiberLocal&) = delete;

  // The calling fiber's instance.
  T& get() {
    void*& slot = detail::fiber_local_slot(key_, &destroy);
    if (slot == nullptr) slot = new T();
    return *static_cast<T*>(slot);
  }
  T& operator*() { return get(); }
  T* operator->() { return &get(); }

 private:
  static void destroy(void* value) { delete static_cast<T*>(value); }
  std::size_t key_;
};

}  // namespace tern
