#pragma once

// How soon a busy worker's loop gets its turn, for tests of the scheduler's switch budget.

#include <memory>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace tern_test {

// Posts a task to worker 0 and yields until it has run, at most 1000 times; returns the yields it
// took, or -1 if the post failed or the task had not run by then. A fiber on worker 0 only.
inline int yields_until_post_runs() {
  auto ran = std::make_shared<bool>(false);
  if (!tern::post(0, [ran] { *ran = true; })) return -1;
  int yields = 0;
  while (!*ran && yields < 1000) {
    tern::this_fiber::yield();
    ++yields;
  }
  return *ran ? yields : -1;
}

}  // namespace tern_test
