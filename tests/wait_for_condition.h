#pragma once

// Waiting on a condition with a deadline from a fiber, for tests of any layer from fiber up.

#include <chrono>

#include "tern/base/clock.h"
#include "tern/fiber/fiber.h"

namespace tern_test {

// Checks pred every millisecond (sleeping the fiber in between) until it holds or the deadline
// passes; returns whether it held. For states with no event to wait on (e.g. a counter).
// Worker fibers only.
template <typename Pred>
bool wait_until_condition(Pred pred, tern::Deadline deadline) {
  using namespace std::chrono_literals;
  while (!pred()) {
    if (tern::Clock::now() >= deadline) return false;
    if (!tern::this_fiber::sleep_for(1ms)) return pred();
  }
  return true;
}

}  // namespace tern_test
