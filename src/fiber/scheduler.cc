#include "scheduler.h"

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "context_frame.h"
#include "debug_checks.h"
#include "runtime_state.h"
#include "stack_overflow.h"
#include "tern/base/assert.h"
#include "tern/base/coarse_clock.h"
#include "tern/base/result.h"
#include "tern/log/log.h"
#include "tern/prof/counter.h"
#include "tern/prof/metrics.h"

namespace tern::detail {

constinit thread_local Scheduler* Scheduler::current_scheduler = nullptr;

namespace {

prof::Counter idle_polls_cut(
    "fiber.idle_polls_cut",
    "Idle polls a worker ended early or never began, sleeping instead, because other runnable "
    "threads wanted every CPU");

// A wait whose deadline is this long or more after its start leaves its timer in the heap, when
// something else ends it, for the fiber's next wait (Scheduler::settle_timer): one stale firing at
// most, against a removal and an insertion per wait.
constexpr std::chrono::seconds kKeepTimerBeyond{1};

bool claim_fiber(FiberControl* fiber) noexcept {
  std::uint32_t expected = 0;
  return fiber->claim.compare_exchange_strong(expected, 1, std::memory_order_acq_rel,
                                              std::memory_order_acquire);
}

std::uintptr_t align_down(std::uintptr_t value, std::size_t alignment) {
  return value & ~(static_cast<std::uintptr_t>(alignment) - 1);
}

// Every scheduler that exists, for the metrics (tern_fibers_alive, tern_timers_pending,
// tern_workers).
struct LiveSchedulers {
  std::mutex mutex;
  std::vector<const Scheduler*> schedulers;
};

LiveSchedulers& live_schedulers() {
  static LiveSchedulers* instance = new LiveSchedulers;  // never destroyed: used at exit
  return *instance;
}

void collect_fiber_metrics(std::vector<prof::Family>& out) {
  prof::Family alive{"tern_fibers_alive",
                     "Fibers started and not yet finished, per worker",
                     prof::MetricKind::gauge,
                     {}};
  prof::Family timers{"tern_timers_pending",
                      "Timers armed (fibers waiting with a deadline), per worker",
                      prof::MetricKind::gauge,
                      {}};
  prof::Family workers{
      "tern_workers", "Worker threads of the running tern runtimes", prof::MetricKind::gauge, {}};
  LiveSchedulers& live = live_schedulers();
  std::lock_guard lock(live.mutex);
  for (const Scheduler* scheduler : live.schedulers) {
    alive.series.push_back(prof::Series{.labels = {{"worker", std::to_string(scheduler->index())}},
                                        .value = static_cast<double>(scheduler->fibers_alive())});
    timers.series.push_back(
        prof::Series{.labels = {{"worker", std::to_string(scheduler->index())}},
                     .value = static_cast<double>(scheduler->timers_pending())});
  }
  workers.series.push_back(prof::Series{.value = static_cast<double>(live.schedulers.size())});
  out.push_back(std::move(alive));
  out.push_back(std::move(timers));
  out.push_back(std::move(workers));
}

[[maybe_unused]] const prof::Registration fiber_metrics =
    prof::MetricsRegistry::global().collector(&collect_fiber_metrics);

}  // namespace

Scheduler::Scheduler(RuntimeState* runtime, std::size_t index, std::unique_ptr<Parker> parker)
    : runtime_(runtime), index_(index), parker_(std::move(parker)) {
  main_.scheduler = this;
  main_.is_main = true;
  main_.refs = 1;
  std::snprintf(main_.name, sizeof main_.name, "worker-%zu", index);
  LiveSchedulers& live = live_schedulers();
  std::lock_guard lock(live.mutex);
  live.schedulers.push_back(this);
}

Scheduler::~Scheduler() {
  release_spare_fibers();
  if (copier_stack_.mapping != nullptr) {
    sanitizer_destroy(copier_.sanitizer);
    unmap_stack(copier_stack_);
  }
  {
    LiveSchedulers& live = live_schedulers();
    std::lock_guard lock(live.mutex);
    std::erase(live.schedulers, this);
  }
  if (main_.locals != nullptr) {
    for (auto& [value, destroy] : *main_.locals)
      if (value != nullptr) destroy(value);
    delete main_.locals;
  }
}

void Scheduler::run() {
  current_scheduler = this;
  main_.id = runtime_->allocate_fiber_ids(1);
  sanitizer_adopt_thread(main_.sanitizer);
  AltSignalStack alt_stack;
  start_profiler();
  for (;;) {
    take_in_work();
    if (!stop_seen_ && stop_requested()) {
      stop_seen_ = true;
      next_shutdown_report_ = Clock::now() + runtime_->options().shutdown_report_interval;
      interrupt_all_waiting();
    }
    if (stop_seen_) {
      if (live_.empty()) {
        if (try_close()) break;
        continue;
      }
      report_shutdown_progress();
    }
    if (!run_queue_.empty()) {
      poll_parker();
      timed(prof::LoopPhase::run, [this] {
        switch_budget_ = round_budget();
        shared_budget_ = kSwitchesPerRound;
        switch_to(run_queue_.pop_front());
        switch_budget_ = 1;  // the loop runs again: see switch_budget_
      });
      continue;
    }
    if (settings_.idle_poll.count() > 0 && poll_for_work()) {
      just_parked_ = true;
      continue;
    }
    sleeping_.store(true, std::memory_order_relaxed);
    sync_with_wakers();
    if (take_remote_work() > 0 || (!stop_seen_ && stop_requested())) {
      sleeping_.store(false, std::memory_order_relaxed);
      continue;
    }
    Deadline deadline = timers_.empty() ? kNoDeadline : timers_.earliest();
    if (stop_seen_) deadline = std::min(deadline, next_shutdown_report_);
    if (stacks_.holds_burst()) deadline = std::min(deadline, trim_stacks());
#if TERN_PROF_ENABLED
    if (prof_ != nullptr) deadline = std::min(deadline, prof_->next_report());
#endif
    timed(prof::LoopPhase::wait, [this, deadline] { parker_->park(deadline); });
    just_parked_ = true;
    sleeping_.store(false, std::memory_order_relaxed);
  }
  free_finished();
  stop_profiler();
  current_scheduler = nullptr;
}

void Scheduler::take_in_work() {
  free_finished();
  take_remote_work();
  if (!timers_.empty()) fire_timers();
}

void Scheduler::poll_parker() {
  // Right after park() the parker's events are fresh: polling again would be a wasted system
  // call (an epoll_wait or io_uring_enter per wake-up) before any fiber has run.
  if (!just_parked_) timed(prof::LoopPhase::poll, [this] { parker_->poll(); });
  just_parked_ = false;
}

bool Scheduler::poll_for_work() {
  bool found = false;
  bool cut = false;
  timed(prof::LoopPhase::wait, [this, &found, &cut] {
    // Wakers leave remote work without unparking while sleeping_ is false: it is looked for
    // here, as are the parker's events, due timers and a stop request.
    const Deadline until = Clock::now() + settings_.idle_poll;
    for (Deadline now = Clock::now(); now < until; now = Clock::now()) {
      // Polling while other threads want every CPU would delay them (and a polling CPU never
      // goes idle, so the kernel does not move waiting threads to it): sleep instead.
      if (!settings_.idle_poll_on_busy_cpus && !spare_cpu_.spare(now)) {
        cut = true;
        return;
      }
      parker_->poll();
      if (!run_queue_.empty() || take_remote_work() > 0 ||
          (!timers_.empty() && timers_.earliest() <= now) || (!stop_seen_ && stop_requested())) {
        found = true;
        return;
      }
    }
  });
  if (cut) idle_polls_cut.add(1);
  return found;
}

void Scheduler::start_profiler() {
#if TERN_PROF_ENABLED
  if (settings_.prof_interval.count() <= 0) return;
  profiler_ = std::make_unique<prof::LoopProfiler>(index_, settings_.prof_interval);
  prof_ = profiler_.get();
  prof_->attach();
  prof_->restart_lap();
#endif
}

void Scheduler::end_phase([[maybe_unused]] prof::LoopPhase phase,
                          [[maybe_unused]] std::uint64_t start) noexcept {
#if TERN_PROF_ENABLED
  const std::uint64_t end = prof::LoopProfiler::now();
  prof_->record(phase, start, end);
  if (prof_->report_due(end)) {
    report_profile(end, false);
    prof_->restart_lap();
  }
#endif
}

void Scheduler::report_profile([[maybe_unused]] std::uint64_t now, [[maybe_unused]] bool final) {
#if TERN_PROF_ENABLED
  const std::string table = prof_->take_report(now, final);
  const RuntimeOptions& options = runtime_->options();
  if (options.prof_report) {
    options.prof_report(index_, table);
  } else {
    TERN_LOG_INFO("{}", std::string_view(table).substr(0, table.size() - 1));  // one record
  }
#endif
}

void Scheduler::stop_profiler() {
#if TERN_PROF_ENABLED
  if (prof_ == nullptr) return;
  if (!prof_->interval_empty()) report_profile(prof::LoopProfiler::now(), true);
  prof_->detach();
  prof_ = nullptr;
  profiler_.reset();
#endif
}

void Scheduler::name_new_fiber(FiberControl& fiber, const FiberOptions& options) {
  if (next_id_ == last_id_) {
    constexpr std::uint64_t kIdBlock = 1024;
    next_id_ = runtime_->allocate_fiber_ids(kIdBlock);
    last_id_ = next_id_ + kIdBlock;
  }
  fiber.id = next_id_++;
  const std::size_t name_length = std::min(options.name.size(), sizeof fiber.name - 1);
  if (name_length > 0) std::memcpy(fiber.name, options.name.data(), name_length);
  fiber.name[name_length] = '\0';  // a spare fiber's block holds its last name
}

inline FiberControl* Scheduler::take_spare_fiber(std::size_t stack_request) noexcept {
  FiberControl* fiber = spare_fibers_;
  if (fiber == nullptr) return nullptr;
  if (fiber->stack_request != stack_request) [[unlikely]] {
    if (fiber->stack.size != stack_size_for(stack_request)) return nullptr;
    fiber->stack_request = stack_request;
  }
  spare_fibers_ = fiber->run_next;
  --spare_count_;
  // What a finished fiber's block may still hold from its last run; everything else is back
  // at its initial value once a fiber finishes (no wait armed or queued, no entry, no
  // fiber-locals, unlinked hooks). wake_result is written by every wake before it is read.
  fiber->claim.store(0, std::memory_order_relaxed);
  fiber->interrupt_requested = false;
  fiber->joiner = nullptr;
#if TERN_ASAN || TERN_TSAN
  fiber->sanitizer = SanitizerContext{};  // ASan: the fake stack of its last park
#endif
  return fiber;
}

Deadline Scheduler::trim_stacks() noexcept {
  const Deadline now = Clock::now();
  if (now >= next_stack_trim_) {
    stacks_.trim();
    next_stack_trim_ = now + kStackTrimInterval;
  }
  return stacks_.holds_burst() ? next_stack_trim_ : kNoDeadline;
}

void Scheduler::release_spare_fibers() noexcept {
  while (FiberControl* fiber = spare_fibers_) {
    spare_fibers_ = fiber->run_next;
    const Stack stack = fiber->stack;
    fiber->~FiberControl();
    stacks_.give(stack);
  }
  spare_count_ = 0;
}

namespace {

// create_fiber off a worker fiber: ends the program, saying so.
[[gnu::cold, gnu::noinline]] FiberSlot create_fiber_outside_fiber() {
  (void)current_scheduler_or_die("tern::spawn");
  return FiberSlot{nullptr, nullptr};  // not reached
}

}  // namespace

FiberSlot create_fiber(const FiberOptions& options, std::size_t entry_size,
                       std::size_t entry_align) {
  Scheduler* scheduler = Scheduler::current();
  if (scheduler == nullptr || scheduler->running()->is_main) [[unlikely]]
    return create_fiber_outside_fiber();
  return scheduler->create_fiber(options, entry_size, entry_align);
}

FiberSlot create_fiber_small(const FiberOptions& options, std::size_t entry_size,
                             std::size_t entry_align) {
  Scheduler* scheduler = Scheduler::current();
  // Reached by jumps, like create_fiber_small's slow path: the common spawn then makes no call
  // and saves no register.
  if (scheduler == nullptr || scheduler->running()->is_main) [[unlikely]]
    return create_fiber_outside_fiber();
  return scheduler->create_fiber_small(options, entry_size, entry_align);
}

std::error_code create_failure() noexcept { return Scheduler::current()->create_error(); }

FiberSlot Scheduler::create_fiber(const FiberOptions& options, std::size_t entry_size,
                                  std::size_t entry_align) {
  if (entry_size > kSmallEntry || entry_align > kSmallEntry)
    return create_fiber_slow(options, entry_size, entry_align);
  return create_fiber_small(options, entry_size, entry_align);
}

FiberSlot Scheduler::create_fiber_small(const FiberOptions& options, std::size_t entry_size,
                                        std::size_t entry_align) {
  // The common spawn, done here without a call: the last finished fiber (if any) kept as a
  // spare, a spare fiber with the stack size asked for at the head of the list, ids left in
  // this worker's block and no name to copy. Anything else takes the general path.
  if (finished_ != nullptr) [[unlikely]] {  // its stack is the warmest one to reuse
    if (!keep_spare(finished_)) return create_fiber_slow(options, entry_size, entry_align);
    finished_ = nullptr;
  }
  FiberControl* fiber = spare_fibers_;
  if (fiber == nullptr || fiber->stack_request != options.stack_size ||
      options.stack_mode == StackMode::shared || next_id_ == last_id_ || !options.name.empty())
      [[unlikely]]
    return create_fiber_slow(options, entry_size, entry_align);
  // The entry fits below the control block in the upper half of the smallest stack (16 KiB,
  // stack_size_for), as prepare_fiber checks for larger ones.
  static_assert(sizeof(FiberControl) + 64 + 2 * kSmallEntry < 16 * 1024 / 2);
  take_spare_fiber(options.stack_size);
  fiber->id = next_id_++;
  fiber->name[0] = '\0';  // a spare fiber's block holds its last name
  const auto entry_at = align_down(reinterpret_cast<std::uintptr_t>(fiber) - entry_size,
                                   std::max<std::size_t>(entry_align, 16));
  const Stack& stack = fiber->stack;
  fiber->context = new_context(stack.base, entry_at - reinterpret_cast<std::uintptr_t>(stack.base),
                               &Scheduler::fiber_main);
  sanitizer_create(fiber->sanitizer, stack.base, stack.size);
  return FiberSlot{fiber, reinterpret_cast<void*>(entry_at)};
}

FiberSlot Scheduler::create_fiber_slow(const FiberOptions& options, std::size_t entry_size,
                                       std::size_t entry_align) {
  free_finished();  // its stack is the warmest one to reuse
  if (options.stack_mode == StackMode::shared) {
    Result<FiberSlot> slot = create_shared_fiber(options, entry_size, entry_align);
    if (slot) return *slot;
    create_error_ = slot.error();
    return FiberSlot{nullptr, nullptr};
  }
  // The control block sits at the top of the stack, the entry right below it.
  FiberControl* fiber = take_spare_fiber(options.stack_size);
  if (fiber == nullptr) {
    Result<Stack> stack = stacks_.take(options.stack_size);
    if (!stack) {
      create_error_ = stack.error();
      return FiberSlot{nullptr, nullptr};
    }
    const auto top = reinterpret_cast<std::uintptr_t>(stack->base) + stack->size;
    const auto control_at = align_down(top - sizeof(FiberControl),
                                       alignof(FiberControl) > 64 ? alignof(FiberControl) : 64);
    fiber = ::new (reinterpret_cast<void*>(control_at)) FiberControl;
    fiber->scheduler = this;
    fiber->stack = *stack;
    fiber->stack_request = options.stack_size;
  }
  return prepare_fiber(fiber, options, entry_size, entry_align);
}

inline FiberSlot Scheduler::prepare_fiber(FiberControl* fiber, const FiberOptions& options,
                                          std::size_t entry_size, std::size_t entry_align) {
  const Stack& stack = fiber->stack;
  const auto base = reinterpret_cast<std::uintptr_t>(stack.base);
  const auto entry_at = align_down(reinterpret_cast<std::uintptr_t>(fiber) - entry_size,
                                   std::max<std::size_t>(entry_align, 16));
  TERN_ASSERT(entry_at > base + stack.size / 2,
              "tern::spawn: the callable is larger than half the fiber's stack");
  name_new_fiber(*fiber, options);
  fiber->context = new_context(stack.base, entry_at - base, &Scheduler::fiber_main);
  sanitizer_create(fiber->sanitizer, stack.base, stack.size);
  return FiberSlot{fiber, reinterpret_cast<void*>(entry_at)};
}

void Scheduler::drop_fiber(FiberControl* fiber) noexcept {
  if (fiber->on_shared_stack) {
    free_shared_fiber(fiber);
    return;
  }
  sanitizer_destroy(fiber->sanitizer);
  const Stack stack = fiber->stack;
  fiber->~FiberControl();
  stacks_.give(stack);
}

void Scheduler::fiber_main(void* from) {
  Scheduler* self_scheduler = current_scheduler;
  FiberControl* self = self_scheduler->running_;
  sanitizer_after_switch(self->sanitizer, static_cast<FiberControl*>(from)->sanitizer);
  try {
    self->entry->run_then_destroy();
  } catch (const std::exception& e) {
    TERN_FATAL("fiber '{}' (id {}) ended with an exception: {}", self->name, self->id, e.what());
  } catch (...) {
    TERN_FATAL("fiber '{}' (id {}) ended with an exception", self->name, self->id);
  }
  if (self->locals != nullptr) destroy_fiber_locals(self);
  // A jump (sibling call), like finish_running's own exit: the fiber ends with no call
  // outstanding, so the return-stack predictor holds what it held when the fiber started.
  self_scheduler->finish_running();
}

void Scheduler::finish_running() noexcept {
  FiberControl* self = running_;
  // What takes a call (a kept timer to remove, shared stacks, a finished fiber that cannot be
  // kept as a spare) goes the general way; the common end makes none and saves no register.
  if (self->timer_kept || shared_stack_used_) [[unlikely]] {
    finish_running_slow(self);
    return;
  }
  if (finished_ != nullptr) [[unlikely]] {
    if (!keep_spare(finished_)) {
      finish_running_slow(self);
      return;
    }
    finished_ = nullptr;
  }
  exit_plain(self, end_fiber(self));
}

void Scheduler::finish_running_slow(FiberControl* self) noexcept {
  drop_kept_timer(self);
  free_finished();
  exit_to(self, end_fiber(self));
}

inline FiberControl* Scheduler::end_fiber(FiberControl* self) noexcept {
  self->state = FiberState::finished;
  live_.remove(*self);
  alive_.store(alive_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  FiberControl* next = nullptr;
  if (self->joiner != nullptr) {
    // The joiner runs next when nothing else is ready (what the run queue would give), without
    // a trip through the queue; else it queues behind the others.
    if (FiberControl* joiner = claim_joiner(*self->joiner)) {
      if (run_queue_.empty()) {
        next = joiner;
      } else {
        push_ready(joiner);
      }
    }
  }
  if (--self->refs == 0) finished_ = self;  // the running fiber's own reference
  if (next == nullptr) next = run_queue_.pop_front();
  return next != nullptr ? next : &main_;
}

void Scheduler::exit_to(FiberControl* prev, FiberControl* next) noexcept {
  if (shared_stack_used_ && (prev->on_shared_stack || next->on_shared_stack)) [[unlikely]] {
    switch_shared(prev, next);  // the copier drops prev; nothing resumes it
    return;
  }
  exit_plain(prev, next);
}

inline void Scheduler::exit_plain(FiberControl* prev, FiberControl* next) noexcept {
#if TERN_TSAN
  // ThreadSanitizer's instrumentation leaves each function with a call of __tsan_func_exit,
  // which a call in tail position runs before its jump: after sanitizer_before_switch, it would
  // pop a frame off `next`'s shadow stack (a fiber's, or the thread's own), which then runs dry.
  // switch_plain makes the annotation and the switch in one call that never returns here.
  switch_plain(prev, next);
#else
#if TERN_ASAN
  // The fiber's frames never return, so AddressSanitizer would keep their poisoned bytes (red
  // zones, variables out of scope) on the stack the next fiber made there starts on.
  __asan_handle_no_return();
#endif
  running_ = next;
  sanitizer_before_switch(prev->sanitizer, next->sanitizer, true);
  tern_exit_context(next->context, prev);
#endif
}

FiberControl* Scheduler::claim_joiner(JoinWaiter& joiner) noexcept {
  // Only this worker can claim a fiber waiting in join (its handle is owner-only; its deadline
  // and interrupts fire here), so the claim needs no locked read-modify-write.
  FiberControl* fiber = joiner.fiber;
  if (fiber->claim.load(std::memory_order_relaxed) != 0) return nullptr;
  fiber->claim.store(1, std::memory_order_relaxed);
  joiner.fired = true;  // a joiner reads no wake_result when its waiter fired
  fiber->state = FiberState::ready;
  return fiber;
}

void Scheduler::suspend_slow() noexcept {
  switch_budget_ = 1;  // see switch_budget_
  FiberControl* next = nullptr;
  if (shared_stack_used_ && --shared_budget_ != 0) next = run_queue_.pop_front();
  if (next == nullptr) next = &main_;  // the loop's turn (it sets the budgets again)
  if (next == running_) return;        // woken before it parked (its waker set it ready)
  switch_to(next);
}

void Scheduler::yield_to_loop(FiberControl* self) noexcept {
  switch_budget_ = 1;  // the loop's turn, or the loop runs already (see switch_budget_)
  if (self == &main_) [[unlikely]] {
    (void)current_scheduler_or_die("tern::this_fiber::yield");
    return;
  }
  if (shared_stack_used_ && --shared_budget_ != 0) {  // not the loop's turn yet
    if (run_queue_.empty()) return;
    switch_from(self, run_queue_.rotate(self));
    return;
  }
  push_ready(self);
  if (!turn_here_allowed(self)) {
    switch_from(self, &main_);
    return;
  }
  // The turn the loop would take, in its order (take in work, poll, then the first ready fiber,
  // which may be self), without the two switches through the main context: each breaks the
  // predicted pattern of the fibers' switches (measured 0.9 ns per switch with two fibers
  // yielding, 57 ns per turn).
  take_in_work();
  poll_parker();
  switch_budget_ = kSwitchesPerRound;
  FiberControl* next = run_queue_.pop_front();
  if (next != self) switch_from(self, next);
}

bool Scheduler::turn_here_allowed(const FiberControl* self) const noexcept {
#if TERN_PROF_ENABLED
  if (prof_ != nullptr) return false;
#endif
  return !stop_seen_ && !stop_requested() && !shared_stack_used_ &&
         self->stack.size >= kTurnStackMin;
}

void Scheduler::report_parking_with_mutex(const FiberControl* self) const {
  TERN_FATAL(
      "fiber '{}' (id {}) is about to wait or yield while holding a std::mutex (or another "
      "pthread mutex); another fiber on this worker that takes it would deadlock the worker. "
      "Use tern::Mutex, or release it first.",
      self->name, self->id);
}

std::error_code Scheduler::wait(FiberControl* self, Deadline deadline, bool interruptible) {
  TERN_ASSERT(self == running_ && !self->is_main, "tern: wait() outside a worker fiber");
  check_can_park(self);
  if (deadline == kNoDeadline && !interruptible) {  // join: only a waker ends this wait
    self->state = FiberState::waiting;
    suspend();
    return self->wake_result;
  }
  // A timed wait reads the coarse clock once: to see a deadline already past, and afterwards to
  // judge whether its timer is far enough off to keep (settle_timer).
  return wait_from(self, deadline, deadline != kNoDeadline ? coarse_now() : Deadline{},
                   interruptible);
}

std::error_code Scheduler::wait(FiberControl* self, WaitLimit& limit, bool interruptible) {
  if (!limit.is_idle()) return wait(self, limit.fix(), interruptible);
  TERN_ASSERT(self == running_ && !self->is_main, "tern: wait() outside a worker fiber");
  check_can_park(self);
  // The idle timeout's deadline counts from the reading the wait makes anyway.
  const Deadline started = coarse_now();
  return wait_from(self, limit.fix(started), started, interruptible);
}

std::error_code Scheduler::wait_from(FiberControl* self, Deadline deadline, Deadline started,
                                     bool interruptible) {
  bool claimed_elsewhere = false;
  if (interruptible && (self->interrupt_requested || stop_requested())) {
    if (claim_fiber(self)) {
      self->interrupt_requested = false;
      return std::make_error_code(std::errc::operation_canceled);
    }
    claimed_elsewhere = true;
  } else if (deadline != kNoDeadline && deadline <= started) {
    // Surely past (coarse_now() lags): no timer. One that passed within the lag is fired by the
    // next fire_timers(), which reads the clock precisely, before this fiber could run again.
    if (claim_fiber(self)) return deadline_exceeded();
    claimed_elsewhere = true;
  }
  if (!claimed_elsewhere) {
    if (deadline != kNoDeadline) arm_timer(self, deadline);
    if (interruptible) {
      self->interruptible_wait = true;
      interruptible_.push_back(*self);
    }
  }
  self->state = FiberState::waiting;
  suspend();
  if (self->wait_deadline != kNoDeadline) settle_timer(self, started);
  if (self->waiting_hook.linked()) interruptible_.remove(*self);
  self->interruptible_wait = false;
  return self->wake_result;
}

void Scheduler::arm_timer(FiberControl* self, Deadline deadline) {
  self->wait_deadline = deadline;
  if (self->timer_kept) {  // still in the heap from an earlier wait
    self->timer_kept = false;
    --kept_timers_;
    if (self->timer.when <= deadline) {  // fires first; fire_timers re-arms it for `deadline`
      count_timers();
      return;
    }
    timers_.remove(&self->timer);
  }
  self->timer.when = deadline;
  timers_.insert(&self->timer);
  count_timers();
}

void Scheduler::settle_timer(FiberControl* self, Deadline started) noexcept {
  self->wait_deadline = kNoDeadline;
  if (!self->timer.armed()) return;  // it fired
  // Waits such as a connection's reads with an idle timeout of minutes end long before their
  // deadline, thousands of times a second on a busy server: removing the node and inserting it
  // again moves other fibers' nodes in a heap of one per connection, each a cache miss. Kept,
  // the node fires at most once more, and is then re-armed for the wait going on or dropped.
  // "Far" counts from the start of the wait, which spares a clock read: a wait that outlasted
  // the margin keeps a node due soon, which costs that one stale firing and nothing more.
  if (self->timer.when > started + kKeepTimerBeyond) {
    self->timer_kept = true;
    ++kept_timers_;
  } else {
    timers_.remove(&self->timer);
  }
  count_timers();
}

void Scheduler::drop_kept_timer(FiberControl* self) noexcept {
  if (!self->timer_kept) return;
  self->timer_kept = false;
  --kept_timers_;
  timers_.remove(&self->timer);
  count_timers();
}

void Scheduler::interrupt(FiberControl* fiber) noexcept {
  fiber->interrupt_requested = true;
  if (fiber->state == FiberState::waiting && fiber->interruptible_wait && claim_fiber(fiber)) {
    fiber->interrupt_requested = false;
    fiber->wake_result = std::make_error_code(std::errc::operation_canceled);
    fiber->state = FiberState::ready;
    push_ready(fiber);
  }
}

void Scheduler::interrupt_all_waiting() noexcept {
  interruptible_.for_each([this](FiberControl& fiber) {
    if (claim_fiber(&fiber)) {
      fiber.wake_result = std::make_error_code(std::errc::operation_canceled);
      fiber.state = FiberState::ready;
      push_ready(&fiber);
    }
  });
}

void Scheduler::make_ready(FiberControl* fiber) noexcept {
  if (current_scheduler == this) {
    fiber->state = FiberState::ready;
    push_ready(fiber);
    return;
  }
  // The woken fiber may run, finish and let this worker shut down as soon as it is queued:
  // counting this waker as a poster keeps the scheduler alive until unpark() is done.
  posters_.fetch_add(1, std::memory_order_seq_cst);
  remote_fibers_.push(&fiber->remote_hook);
  wake_parker();
  posters_.fetch_sub(1, std::memory_order_release);
}

void Scheduler::wake_parker() noexcept {
  sync_with_wakers();
  if (sleeping_.load(std::memory_order_relaxed)) parker_->unpark();
}

void Scheduler::sync_with_wakers() noexcept {
  // A read-modify-write on one shared word orders "publish work, then read sleeping_" in a
  // waker against "set sleeping_, then look for work" in the worker: whichever comes second
  // sees the other's write. (A fence would do on its own, but ThreadSanitizer cannot model one.)
  wake_sync_.fetch_add(1, std::memory_order_acq_rel);
}

bool Scheduler::post(std::unique_ptr<PostedTask> task) {
  posters_.fetch_add(1, std::memory_order_seq_cst);
  if (closed_.load(std::memory_order_seq_cst)) {
    posters_.fetch_sub(1, std::memory_order_release);
    return false;
  }
  remote_tasks_.push(task.release());
  wake_parker();
  posters_.fetch_sub(1, std::memory_order_release);
  return true;
}

void Scheduler::request_stop() noexcept {
  stop_requested_.store(true, std::memory_order_seq_cst);
  parker_->unpark();
}

std::size_t Scheduler::take_remote_work() {
  // The common turn finds both queues drained: four loads, no timed phase, no call.
  if (remote_fibers_.drained() && remote_tasks_.drained()) return 0;
  std::size_t taken = 0;
  timed(prof::LoopPhase::posts, [this, &taken] {
    while (MpscNode* node = remote_fibers_.pop()) {
      FiberControl* fiber = FiberControl::from_remote(node);
      fiber->state = FiberState::ready;
      push_ready(fiber);
      ++taken;
    }
    while (MpscNode* node = remote_tasks_.pop()) {
      std::unique_ptr<PostedTask> task(static_cast<PostedTask*>(node));
      auto run_task = [task = std::move(task)]() mutable { task->fn(); };
      using Entry = FiberEntryOf<decltype(run_task)>;
      const FiberOptions options{.name = "posted"};
      // Posted work always runs once accepted: without a stack for it the program cannot go on.
      const FiberSlot slot = create_fiber(options, sizeof(Entry), alignof(Entry));
      if (slot.fiber == nullptr) spawn_failed(options, create_error_);
      start_fiber(slot.fiber, ::new (slot.entry_storage) Entry(std::move(run_task)), false);
      ++taken;
    }
  });
  return taken;
}

void Scheduler::fire_timers() {
  // Between parks, a loop that finds the earliest timer two ticks past the coarse clock (which
  // lags by about one) knows none is due without a precise clock read (tens of ns on a VM, and
  // this runs before every fiber switch); a longer lag only delays a timer, never fires one
  // early. Right after a park, the precise clock always decides.
  if (!just_parked_ && timers_.earliest() > coarse_now() + 2 * coarse_resolution()) return;
  timed(prof::LoopPhase::timers, [this] {
    const Deadline now = Clock::now();
    while (TimerNode* node = timers_.pop_expired(now)) {
      FiberControl* fiber = FiberControl::from_timer(node);
      if (fiber->timer_kept) {  // no wait needs it any more
        fiber->timer_kept = false;
        --kept_timers_;
        continue;
      }
      if (fiber->wait_deadline > now) {  // a kept node the wait reused: due later
        fiber->timer.when = fiber->wait_deadline;
        timers_.insert(node);
        continue;
      }
      if (claim_fiber(fiber)) {
        fiber->wake_result = deadline_exceeded();
        fiber->state = FiberState::ready;
        push_ready(fiber);
      }
    }
    count_timers();
  });
}

bool Scheduler::try_close() {
  closed_.store(true, std::memory_order_seq_cst);
  while (posters_.load(std::memory_order_seq_cst) != 0) std::this_thread::yield();
  return take_remote_work() == 0;
}

void Scheduler::report_shutdown_progress() {
  const Deadline now = Clock::now();
  if (now < next_shutdown_report_) return;
  next_shutdown_report_ = now + runtime_->options().shutdown_report_interval;
  std::fprintf(stderr, "tern: worker %zu is shutting down and waits for %zu fiber(s):", index_,
               live_.size());
  std::size_t shown = 0;
  live_.for_each([&shown](FiberControl& fiber) {
    if (shown++ < 8)
      std::fprintf(stderr, " '%s' (id %llu)", fiber.name,
                   static_cast<unsigned long long>(fiber.id));
  });
  std::fprintf(stderr, "; a fiber that ignores operation_canceled keeps its runtime alive\n");
}

}  // namespace tern::detail
