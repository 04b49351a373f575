// Out-of-line parts of tern::base: the error category and the spin lock (fatal.cc: TERN_FATAL).
#include <sched.h>

#include "tern/base/result.h"
#include "tern/base/spin_lock.h"

namespace tern {

namespace {

class TernErrorCategory final : public std::error_category {
 public:
  const char* name() const noexcept override { return "tern"; }
  std::string message(int value) const override {
    switch (static_cast<Errc>(value)) {
      case Errc::closed:
        return "closed";
      case Errc::lagged:
        return "subscriber lagged behind and missed messages";
      case Errc::stopped:
        return "runtime stopped";
      case Errc::eof:
        return "unexpected end of stream";
    }
    return "unknown tern error";
  }
};

}  // namespace

const std::error_category& error_category() noexcept {
  static const TernErrorCategory category;
  return category;
}

void SpinLock::lock_slow() noexcept {
  for (unsigned spins = 0;; ++spins) {
    while (locked_.load(std::memory_order_relaxed)) {
      if (spins++ < 128) {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
      } else {
        ::sched_yield();  // the holder may have been preempted; let it run
      }
    }
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
  }
}

}  // namespace tern
