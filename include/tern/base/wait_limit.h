#pragma once

#include <chrono>

#include "tern/base/clock.h"
#include "tern/base/coarse_clock.h"

namespace tern {

// How long a blocking operation may wait: until a deadline, or for an idle timeout counted from
// the moment the operation has to wait (a connection's timeout, renewed by every operation). An
// operation that completes at once never needs the deadline of an idle timeout, so it reads no
// clock for it. Two words, trivially copyable. Any thread.
class WaitLimit {
 public:
  // Until `deadline` (kNoDeadline: as long as it takes). Implicit: a Deadline is a WaitLimit.
  constexpr WaitLimit(Deadline deadline = kNoDeadline) noexcept : deadline_(deadline) {}

  // For `timeout` from when the operation first has to wait, counted on the coarse clock as
  // coarse_deadline_after() counts it; zero or less: an operation that would wait fails at once.
  static constexpr WaitLimit idle(std::chrono::nanoseconds timeout) noexcept {
    if (timeout.count() <= 0) return WaitLimit(Deadline{});
    WaitLimit limit;
    limit.idle_ = timeout;
    return limit;
  }

  // The deadline of a wait that starts now; an idle timeout's is computed from the coarse clock,
  // then kept, so that the later waits of one operation share the deadline of its first.
  Deadline fix() noexcept {
    if (idle_.count() > 0) [[unlikely]] {
      deadline_ = idle_deadline();
      idle_ = {};
    }
    return deadline_;
  }

  // fix() for a wait that read the coarse clock itself (coarse_now()): an idle timeout's deadline
  // counts from that reading.
  Deadline fix(Deadline coarse_reading) noexcept {
    if (idle_.count() > 0) {
      deadline_ = coarse_deadline_after(idle_, coarse_reading);
      idle_ = {};
    }
    return deadline_;
  }

  // Whether this limit is an idle timeout whose deadline is not fixed yet.
  constexpr bool is_idle() const noexcept { return idle_.count() > 0; }

 private:
  // coarse_deadline_after(idle_), out of line: fix() stays a test and a branch inline.
  Deadline idle_deadline() const noexcept;

  Deadline deadline_;
  std::chrono::nanoseconds idle_{0};
};

}  // namespace tern
