#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "tern/fiber/park.h"

namespace tern::detail {

// The default Parker: a futex word. park() sleeps on it until unpark() or the deadline; it
// knows nothing of I/O. Used when RuntimeOptions::make_parker is empty.
class FutexParker final : public Parker {
 public:
  void park(Deadline deadline) override;
  void unpark() noexcept override;

 private:
  std::atomic<std::uint32_t> notified_{0};
};

}  // namespace tern::detail
