#pragma once

#include <cstddef>
#include <memory>

#include "tern/base/clock.h"

namespace tern {

// What a worker does when it has no fiber to run: wait for outside work (I/O, timers of
// another layer, posts from other threads) until a deadline. The fiber layer calls it and
// never includes I/O code; tern::io implements it with epoll or io_uring.
class Parker {
 public:
  virtual ~Parker() = default;
  // Waits until unpark() is called, the parker's own events arrive, or `deadline` passes.
  // A deadline of Deadline::min() asks for a poll that never blocks. Worker thread only.
  virtual void park(Deadline deadline) = 0;
  // Makes the current or the next park() return promptly. Any thread.
  virtual void unpark() noexcept = 0;
  // Called each time the worker's loop runs while fibers are ready, except right after park()
  // returned (no fiber has run since): a chance to submit batched work and collect finished
  // work without blocking. Keep it cheap. Worker thread only.
  virtual void poll() {}
};

// Sets the Parker factory used when RuntimeOptions::make_parker is empty (tern::io installs its
// reactors here when it is linked in). Call before Runtime::run; any thread.
void set_default_parker_factory(std::unique_ptr<Parker> (*factory)(std::size_t worker)) noexcept;

}  // namespace tern
