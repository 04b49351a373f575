#pragma once

#include <system_error>

#include "tern/base/clock.h"
#include "tern/base/intrusive_list.h"
#include "tern/base/spin_lock.h"
#include "tern/base/wait_limit.h"

// The waiting machinery under tern's sync primitives. A fiber that must wait puts a Waiter
// (on its own stack) into the primitive's queue under the primitive's lock, drops the lock
// and calls wait(). A waker, under the same lock, removes the Waiter, claim()s it, hands over
// what it carries and, after dropping the lock, wake()s it. Deadlines and interrupts race
// with wakers through the same claim, so exactly one party resumes a waiting fiber; the
// fiber, once resumed, removes any of its Waiters that are still queued.

namespace tern::detail {

struct FiberControl;

// One fiber's place in a primitive's queue. Lives on the waiting fiber's stack.
struct Waiter {
  ListHook hook;
  FiberControl* fiber = nullptr;
  void* slot = nullptr;  // what the primitive hands over through this waiter, if anything
  bool fired = false;    // set by the waker that claimed this waiter
  bool closed = false;   // set by a waker that woke it because the primitive closed
};

// A queue of waiters; the owning primitive guards it with its lock.
using WaitList = IntrusiveList<Waiter, &Waiter::hook>;

// The fiber running on this thread; aborts with a message outside a worker fiber.
FiberControl* current_fiber(const char* operation);

// Starts a wait for the current fiber: clears its wake claim. Call before queueing Waiters.
void begin_wait(FiberControl* self) noexcept;

// Claims the fiber waiting in `w`; only the claimer may wake it. Returns false if the fiber
// was already claimed (by a deadline, an interrupt or another queue). Any thread.
bool claim(Waiter& w) noexcept;

// Wakes the fiber of a waiter claimed by the caller and marks `w` fired. `w` may be gone as
// soon as this returns. Any thread.
void wake(Waiter& w) noexcept;

// Parks the current fiber until a claimer wakes it (returns {}), the deadline passes
// (tern::deadline_exceeded(), equal to std::errc::timed_out) or, if interruptible, it is
// interrupted (operation_canceled).
// Worker fibers only; no lock may be held.
std::error_code wait(FiberControl* self, Deadline deadline, bool interruptible);
// wait() until `limit`, which it fixes: an idle timeout's deadline counts from the coarse clock
// reading the wait makes anyway, and the caller's later waits for the same operation share it.
std::error_code wait(FiberControl* self, WaitLimit& limit, bool interruptible);

// Leaves an interrupt pending again after wait() returned operation_canceled for it but the
// caller reports something else (an I/O operation that completed anyway): the fiber's next
// interruptible wait sees it. Owner worker only.
void keep_interrupt(FiberControl* self) noexcept;

// Interrupts `fiber` as Fiber::interrupt does, for code that knows a fiber by its control block
// rather than by a handle (a connection's own fiber, stopped by another fiber of its worker).
// Owner worker only.
void interrupt(FiberControl* fiber) noexcept;

// Drops an interrupt pending on the current fiber that no wait has seen yet (the work it was
// meant to stop ended on its own). Owner worker only.
void drop_interrupt(FiberControl* self) noexcept;

// The common case of all of the above for the current fiber: with `guard` held, queues a
// waiter for it in `queue`, drops `guard`, waits, and on a deadline or interrupt withdraws the
// waiter again. Returns the wait's result; waiter.fired tells whether a waker claimed it.
// `guard` is not held on return. Worker fibers only.
std::error_code wait_in(SpinLock& guard, WaitList& queue, Waiter& waiter, Deadline deadline,
                        bool interruptible);

// wait_in for primitives whose wakers hand over nothing: {} when a waker claimed the fiber,
// else the error that ended the wait. `guard` is held on entry and not on return.
std::error_code wait_for_waker(SpinLock& guard, WaitList& queue, Deadline deadline);

// Pops waiters until one can be claimed and returns it (nullptr if none). Lock held.
inline Waiter* claim_first(WaitList& queue) noexcept {
  while (Waiter* w = queue.pop_front())
    if (claim(*w)) return w;
  return nullptr;
}

// Moves every waiter of `queue` that can be claimed into `claimed`. Lock held.
inline void claim_all(WaitList& queue, WaitList& claimed) noexcept {
  while (Waiter* w = queue.pop_front())
    if (claim(*w)) claimed.push_back(*w);
}

// Wakes every waiter of a list filled by claim_all. Call after dropping the lock.
inline void wake_all(WaitList& claimed, bool closed = false) noexcept {
  while (Waiter* w = claimed.pop_front()) {
    w->closed = closed;
    wake(*w);
  }
}

// Removes `w` from `queue` if it is still there (after a deadline or interrupt). Lock held.
inline void withdraw(WaitList& queue, Waiter& w) noexcept {
  if (w.hook.linked()) queue.remove(w);
}

}  // namespace tern::detail
