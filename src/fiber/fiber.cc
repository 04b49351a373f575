// The Fiber handle, this_fiber, and the waiting protocol of detail/waiter.h.
#include "tern/fiber/fiber.h"

#include <cstring>

#include "fiber_control.h"
#include "scheduler.h"
#include "stack.h"
#include "tern/base/assert.h"
#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/detail/run_next.h"

namespace tern {

namespace detail {

namespace {

// A wake's result, copied rather than built: std::error_code() calls system_category().
const std::error_code kNoError{};

}  // namespace

Scheduler* current_scheduler_or_die(const char* operation) {
  Scheduler* scheduler = Scheduler::current();
  if (scheduler == nullptr) {
    TERN_FATAL("{} called outside a tern::Runtime: call it from a fiber (inside Runtime::run)",
               operation);
  }
  if (scheduler->running()->is_main) {
    TERN_FATAL(
        "{} called on a worker thread outside any fiber: call it from a fiber (spawn or post "
        "one)",
        operation);
  }
  return scheduler;
}

FiberControl* current_fiber(const char* operation) {
  return current_scheduler_or_die(operation)->running();
}

void begin_wait(FiberControl* self) noexcept { self->claim.store(0, std::memory_order_release); }

bool claim(Waiter& w) noexcept {
  std::uint32_t expected = 0;
  return w.fiber->claim.compare_exchange_strong(expected, 1, std::memory_order_acq_rel,
                                                std::memory_order_acquire);
}

void wake(Waiter& w) noexcept {
  FiberControl* fiber = w.fiber;
  w.fired = true;
  fiber->wake_result = kNoError;
  fiber->scheduler->make_ready(fiber);
}

std::error_code wait(FiberControl* self, Deadline deadline, bool interruptible) {
  return self->scheduler->wait(self, deadline, interruptible);
}

std::error_code wait(FiberControl* self, WaitLimit& limit, bool interruptible) {
  return self->scheduler->wait(self, limit, interruptible);
}

void keep_interrupt(FiberControl* self) noexcept { self->interrupt_requested = true; }

void interrupt(FiberControl* fiber) noexcept { fiber->scheduler->interrupt(fiber); }

void drop_interrupt(FiberControl* self) noexcept { self->interrupt_requested = false; }

std::error_code wait_in(SpinLock& guard, WaitList& queue, Waiter& waiter, Deadline deadline,
                        bool interruptible) {
  if (waiter.fiber == nullptr)
    waiter.fiber = current_fiber(
        "a blocking tern call (a Channel, Event, Semaphore, WaitGroup or Broadcast wait)");
  begin_wait(waiter.fiber);
  queue.push_back(waiter);
  guard.unlock();
  const std::error_code result = wait(waiter.fiber, deadline, interruptible);
  if (!waiter.fired) {
    guard.lock();
    withdraw(queue, waiter);
    guard.unlock();
  }
  return result;
}

std::error_code wait_for_waker(SpinLock& guard, WaitList& queue, Deadline deadline) {
  const ParkedNode<Waiter> waiter(parks_off_stack());
  const std::error_code result = wait_in(guard, queue, *waiter, deadline, true);
  return waiter->fired ? std::error_code() : result;
}

bool parks_off_stack() noexcept {
  const Scheduler* scheduler = Scheduler::current();
  return scheduler != nullptr && scheduler->running()->on_shared_stack;
}

void spawn_failed(const FiberOptions& options, std::error_code error) noexcept {
  TERN_FATAL("tern::spawn: cannot map a stack of {} bytes for fiber \"{}\": {}",
             stack_size_for(options.stack_size), options.name, error.message());
}

void abandon_fiber(FiberControl* fiber) noexcept { fiber->scheduler->abandon_fiber(fiber); }

void start_spawned_first(bool on) noexcept {
  current_scheduler_or_die("tern::detail::start_spawned_first")->start_spawned_first(on);
}

void start_fiber(FiberControl* fiber, FiberEntry* entry) noexcept {
  fiber->scheduler->start_fiber(fiber, entry, true);
}

}  // namespace detail

Fiber& Fiber::operator=(Fiber&& other) noexcept {
  if (this != &other) {
    if (control_ != nullptr) {
      TERN_FATAL("a joinable Fiber handle (fiber '{}', id {}) was assigned over; join or detach it",
                 control_->name, control_->id);
    }
    control_ = std::exchange(other.control_, nullptr);
  }
  return *this;
}

void Fiber::destroyed_while_joinable() const noexcept {
  TERN_FATAL(
      "the handle of fiber '{}' (id {}) was destroyed while joinable; call join() or detach() "
      "first",
      control_->name, control_->id);
}

void Fiber::check_owner([[maybe_unused]] const char* operation) const {
  TERN_ASSERT(control_ != nullptr, "tern::Fiber: operation on an empty handle");
#if TERN_DEBUG_CHECKS
  if (detail::Scheduler::current() != control_->scheduler) {
    TERN_FATAL(
        "Fiber::{} on fiber '{}' (id {}) from another thread; a fiber handle may only be used on "
        "the worker that spawned it",
        operation, control_->name, control_->id);
  }
#endif
}

void Fiber::join() {
  check_owner("join");
  detail::FiberControl* target = control_;
  if (target->state != detail::FiberState::finished) {
    detail::Scheduler* scheduler = detail::current_scheduler_or_die("tern::Fiber::join");
    detail::FiberControl* self = scheduler->running();
    TERN_ASSERT(self != target, "a fiber cannot join itself");
    if (self->on_shared_stack) [[unlikely]] {
      (void)join_until(kNoDeadline, false);  // its waiter cannot live on its stack
      return;
    }
    // Only the target's finish ends this wait (no deadline, no interrupt): the waiter is always
    // fired when it returns, and the wait needs none of wait()'s bookkeeping.
    detail::JoinWaiter waiter;
    waiter.fiber = self;
    target->joiner = &waiter;
    scheduler->wait_for_join(self);
    target->joiner = nullptr;
  }
  control_ = nullptr;
  target->scheduler->release(target);
}

Result<void> Fiber::join_until(Deadline deadline) {
  check_owner("join_until");
  return join_until(deadline, true);
}

Result<void> Fiber::join_until(Deadline deadline, bool interruptible) {
  detail::FiberControl* target = control_;
  if (target->state != detail::FiberState::finished) {
    detail::FiberControl* self = detail::current_fiber("tern::Fiber::join");
    TERN_ASSERT(self != target, "a fiber cannot join itself");
    const detail::ParkedNode<detail::JoinWaiter> waiter(self->on_shared_stack);
    waiter->fiber = self;
    detail::begin_wait(self);
    target->joiner = waiter.get();
    const std::error_code result = detail::wait(self, deadline, interruptible);
    target->joiner = nullptr;
    if (!waiter->fired) return fail(result);  // the handle stays joinable
  }
  control_ = nullptr;
  target->scheduler->release(target);
  return {};
}

void Fiber::detach() {
  check_owner("detach");
  detail::FiberControl* target = std::exchange(control_, nullptr);
  target->scheduler->release(target);
}

void Fiber::interrupt() {
  check_owner("interrupt");
  control_->scheduler->interrupt(control_);
}

std::uint64_t Fiber::id() const {
  check_owner("id");
  return control_->id;
}

namespace this_fiber {

std::uint64_t id() noexcept { return detail::current_fiber("tern::this_fiber::id")->id; }

std::string_view name() noexcept { return detail::current_fiber("tern::this_fiber::name")->name; }

void set_name(std::string_view name) noexcept {
  detail::FiberControl* self = detail::current_fiber("tern::this_fiber::set_name");
  const std::size_t length = std::min(name.size(), sizeof self->name - 1);
  std::memcpy(self->name, name.data(), length);
  self->name[length] = '\0';
}

namespace {

// Ends the program for a yield off the workers. Not [[noreturn]]: yield then reaches it by a
// jump, like its other exits, and needs no stack frame of its own. (A yield in a worker's main
// context is caught by the scheduler: Scheduler::yield_to_loop.)
[[gnu::cold, gnu::noinline]] void yield_outside_fiber() noexcept {
  (void)detail::current_scheduler_or_die("tern::this_fiber::yield");
}

}  // namespace

void yield() noexcept {
  // The worker's scheduler at hand: the yielding fiber's own pointer to it would be one more
  // load on the way to the switch.
  detail::Scheduler* scheduler = detail::Scheduler::current();
  if (scheduler == nullptr) [[unlikely]]
    return yield_outside_fiber();
  scheduler->yield();
}

Result<void> sleep_until(Deadline deadline) {
  detail::FiberControl* self = detail::current_fiber("tern::this_fiber::sleep_for/sleep_until");
  detail::begin_wait(self);
  const std::error_code result = detail::wait(self, deadline, true);
  if (result == std::errc::timed_out) return {};
  return fail(result);
}

bool stop_requested() noexcept {
  detail::FiberControl* self = detail::current_fiber("tern::this_fiber::stop_requested");
  return self->interrupt_requested || self->scheduler->stop_requested();
}

}  // namespace this_fiber

}  // namespace tern
