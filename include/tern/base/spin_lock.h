#pragma once

#include <atomic>

namespace tern {

// A small test-and-test-and-set lock for critical sections of a few instructions (the inside
// of tern's sync primitives). Never parks a fiber. Usable from any thread.
class SpinLock {
 public:
  // Acquires the lock, spinning (and yielding the CPU after a while) until it is free.
  void lock() noexcept {
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    lock_slow();
  }
  // Acquires the lock if it is free; returns whether it did.
  bool try_lock() noexcept {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }
  // Releases the lock.
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  void lock_slow() noexcept;
  std::atomic<bool> locked_{false};
};

}  // namespace tern
