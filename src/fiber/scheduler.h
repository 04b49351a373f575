#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "debug_checks.h"
#include "exit_context.h"
#include "fiber_control.h"
#include "run_queue.h"
#include "shared_stack.h"
#include "spare_cpu.h"
#include "stack.h"
#include "tern/base/intrusive_list.h"
#include "tern/base/mpsc_queue.h"
#include "tern/base/wait_limit.h"
#include "tern/fiber/park.h"
#include "tern/prof/loop_profiler.h"
#include "timer_heap.h"

namespace tern::detail {

class RuntimeState;

// A function posted to a worker from any thread; it runs in a fresh fiber there.
struct PostedTask : MpscNode {
  std::move_only_function<void()> fn;
};

// The calling worker's scheduler, when the caller is one of its fibers; else ends the program
// naming the public function (`operation`) and what to do instead. Any thread.
Scheduler* current_scheduler_or_die(const char* operation);

// One worker's fiber scheduler: a run queue of ready fibers, a queue of wakes and posts from
// other threads, the timers of waiting fibers, and a Parker to sleep in when idle. Fibers
// switch directly to one another; the worker's main context (the loop in run()) gets control
// when no fiber is ready and every 64 switches, to take in remote work, fire timers and poll.
// Everything is owner-thread-only except make_ready(), post() and request_stop().
class Scheduler {
 public:
  Scheduler(RuntimeState* runtime, std::size_t index, std::unique_ptr<Parker> parker);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // The scheduler of the calling thread, or nullptr off the workers.
  static Scheduler* current() noexcept { return current_scheduler; }

  // Runs the worker loop on the calling thread until stop is requested and every fiber and
  // posted task has finished.
  void run();

  // The fiber running now (the main context while the loop runs).
  FiberControl* running() const noexcept { return running_; }
  std::size_t index() const noexcept { return index_; }
  RuntimeState* runtime() const noexcept { return runtime_; }
  // Fibers started and not finished on this worker. Any thread.
  std::size_t fibers_alive() const noexcept { return alive_.load(std::memory_order_relaxed); }
  // Timers armed on this worker (fibers waiting with a deadline). Any thread.
  std::size_t timers_pending() const noexcept {
    return timers_pending_.load(std::memory_order_relaxed);
  }
  // What the worker loop does besides running fibers (zero turns each off).
  struct LoopSettings {
    // The loop profiler's report interval.
    std::chrono::nanoseconds prof_interval{0};
    // How long an idle loop polls for work before it sleeps.
    std::chrono::nanoseconds idle_poll{0};
    // Poll even while other runnable threads want every CPU (else the loop sleeps then).
    bool idle_poll_on_busy_cpus = false;
  };
  // Applies `settings` to the next run(). Owner thread, before run().
  void configure(const LoopSettings& settings) noexcept { settings_ = settings; }

  // Fiber life cycle (owner thread).
  // detail::create_fiber's work (a null fiber on failure, create_error() says why).
  FiberSlot create_fiber(const FiberOptions& options, std::size_t entry_size,
                         std::size_t entry_align);
  // create_fiber for an entry of at most kSmallEntry bytes and alignment.
  FiberSlot create_fiber_small(const FiberOptions& options, std::size_t entry_size,
                               std::size_t entry_align);
  // Why the last create_fiber failed.
  std::error_code create_error() const noexcept { return create_error_; }
  void start_fiber(FiberControl* fiber, FiberEntry* entry, bool joinable) noexcept;
  // Frees a fiber that never runs again: kept whole for the next spawn while there is room.
  void abandon_fiber(FiberControl* fiber) noexcept;
  // tern::detail::start_spawned_first (tern/fiber/detail/run_next.h).
  void start_spawned_first(bool on) noexcept { spawned_first_ = on; }
  // Drops one reference; a finished fiber with none left gives its stack back.
  void release(FiberControl* fiber) noexcept {
    if (--fiber->refs == 0) abandon_fiber(fiber);
  }

  // Waiting (owner thread, from the waiting fiber). yield from the worker's main context ends
  // the program (see switch_budget_).
  void yield() noexcept;
  std::error_code wait(FiberControl* self, Deadline deadline, bool interruptible);
  // Parks self, which is not on the shared stack, until the fiber it joins finishes and
  // finish_running wakes it (nothing else ends this wait): Fiber::join's own wait.
  void wait_for_join(FiberControl* self) noexcept;
  // wait() until `limit`, fixing it (tern::detail::wait's WaitLimit form).
  std::error_code wait(FiberControl* self, WaitLimit& limit, bool interruptible);
  void interrupt(FiberControl* fiber) noexcept;

  // Queues a claimed fiber to run. Any thread.
  void make_ready(FiberControl* fiber) noexcept;
  // Queues a task to run in a new fiber on this worker; false once the worker has closed.
  // Any thread.
  bool post(std::unique_ptr<PostedTask> task);
  // Asks the worker to finish: interruptible waits end with operation_canceled, and run()
  // returns once every fiber and posted task is done. Any thread.
  void request_stop() noexcept;
  // Whether stop was requested. Any thread.
  bool stop_requested() const noexcept { return stop_requested_.load(std::memory_order_acquire); }

 private:
  // The entry of every fiber (reached by a jump from the context trampoline). It ends in
  // finish_running, by a jump too, and never returns.
  static void fiber_main(void* from);
  // Runs next in place of the running fiber. Without a sanitizer nothing follows the switch, so
  // the compiler makes it a tail call: a yield's return address is then its caller's, and the
  // switch resumes the other fiber's call site by a predicted jump (arch/switch_x86_64.S).
  void switch_to(FiberControl* next) noexcept { switch_from(running_, next); }
  // switch_to with the running fiber at hand (`prev`), which saves reloading it.
  void switch_from(FiberControl* prev, FiberControl* next) noexcept;
  // switch_from for neither fiber on the shared stack: what the fast paths of yield and
  // suspend use, which a worker with shared-stack fibers never takes (see switch_budget_).
  void switch_plain(FiberControl* prev, FiberControl* next) noexcept;
  // Gives a fiber being created its id (from this worker's block of ids) and its name.
  void name_new_fiber(FiberControl& fiber, const FiberOptions& options);
  // create_fiber for every case but the common one (see create_fiber).
  [[gnu::noinline]] FiberSlot create_fiber_slow(const FiberOptions& options, std::size_t entry_size,
                                                std::size_t entry_align);
  // The rest of create_fiber for a fiber with its stack: id, name, first frame and entry room.
  FiberSlot prepare_fiber(FiberControl* fiber, const FiberOptions& options, std::size_t entry_size,
                          std::size_t entry_align);
  // abandon_fiber for a shared-stack fiber or with the spare list full.
  [[gnu::noinline]] void drop_fiber(FiberControl* fiber) noexcept;
  // Shared stacks (scheduler_shared.cc).
  Result<FiberSlot> create_shared_fiber(const FiberOptions& options, std::size_t entry_size,
                                        std::size_t entry_align);
  void free_shared_fiber(FiberControl* fiber) noexcept;
  // A switch to or from a shared-stack fiber. Away from one it goes through the copier
  // context, which copies it out (or frees a finished one) before it goes on to `next`, so
  // the context that resumes needs no work after the switch.
  [[gnu::noinline]] void switch_shared(FiberControl* prev, FiberControl* next) noexcept;
  [[noreturn]] static void copier_main(void* from);
  void suspend() noexcept;
  // A wait that used up the switch budget: the loop's turn, or with shared-stack fibers on the
  // worker possibly just a switch with the shared-stack test (see switch_budget_).
  [[gnu::noinline]] void suspend_slow() noexcept;
  // A yield that used up the switch budget: gives the worker's loop its turn, or ends the
  // program when the loop itself yielded.
  [[gnu::noinline]] void yield_to_loop(FiberControl* self) noexcept;
  // Whether the loop's turn may be taken on the yielding fiber's own stack: the turn would
  // only take in work and poll (no stop to handle, no profiler timing the loop's phases, no
  // shared-stack fiber to copy around), and self's stack has room for it.
  bool turn_here_allowed(const FiberControl* self) const noexcept;
  // What a loop turn does before it picks a fiber: frees the last finished fiber, takes in
  // remote work and fires due timers.
  void take_in_work();
  // Polls the parker, unless it has just returned from a park (its events are fresh then).
  void poll_parker();
  // Gives back the stack of the last finished fiber nobody holds a handle to (it cannot be
  // given back on its own stack, so this waits until another context runs).
  void free_finished() noexcept {
    if (finished_ != nullptr) abandon_fiber(std::exchange(finished_, nullptr));
  }
  // Ends the running fiber and resumes the next one; never returns (not [[noreturn]], so that
  // fiber_main reaches it by a jump: see exit_context.h).
  void finish_running() noexcept;
  // finish_running with a kept timer to remove, a finished fiber to free by a call, or shared
  // stacks on the worker.
  [[gnu::noinline]] void finish_running_slow(FiberControl* self) noexcept;
  // The bookkeeping of a fiber's end; returns the context to run next.
  FiberControl* end_fiber(FiberControl* self) noexcept;
  // Leaves the finished fiber prev for next, from prev's stack, with nothing saved.
  void exit_to(FiberControl* prev, FiberControl* next) noexcept;
  // exit_to for neither fiber on the shared stack.
  void exit_plain(FiberControl* prev, FiberControl* next) noexcept;
  // Keeps a fiber that never runs again whole on the spare list, when that takes no call (it
  // is not a shared-stack fiber and the list has room); else returns false.
  bool keep_spare(FiberControl* fiber) noexcept;
  // Claims the fiber joining the finishing one and returns it, ready to run, unless a deadline
  // or interrupt claimed it first (then nullptr).
  FiberControl* claim_joiner(JoinWaiter& joiner) noexcept;
  void push_ready(FiberControl* fiber) noexcept { run_queue_.push_back(fiber); }
  // A finished fiber kept whole for the next spawn, or nullptr (see abandon_fiber).
  FiberControl* take_spare_fiber(std::size_t stack_request) noexcept;
  // Gives the stacks of the spare fibers back to the stack pool.
  void release_spare_fibers() noexcept;
  // Before the worker sleeps with a burst of stacks cached: unmaps those a whole
  // kStackTrimInterval left unused, when that interval is over; returns when to look again
  // (kNoDeadline once no burst is left).
  Deadline trim_stacks() noexcept;
  std::size_t take_remote_work();
  void fire_timers();
  // A timed or interruptible wait until `deadline`; `started`: the coarse time at its start
  // (Deadline{} without a deadline).
  std::error_code wait_from(FiberControl* self, Deadline deadline, Deadline started,
                            bool interruptible);
  // Arms self's timer for the wait that starts, reusing a kept node that fires no later.
  void arm_timer(FiberControl* self, Deadline deadline);
  // After a wait with a timer: keeps the node in the heap while its deadline is far (the next
  // wait, often a socket read's idle timeout, then makes no heap operation), else disarms it.
  // `started`: the coarse time at the start of the wait.
  void settle_timer(FiberControl* self, Deadline started) noexcept;
  // Disarms a finishing fiber's kept timer.
  void drop_kept_timer(FiberControl* self) noexcept;
  // Publishes the armed timers that some wait still needs for timers_pending() after the heap
  // changed (kept nodes do not count).
  void count_timers() noexcept {
    timers_pending_.store(timers_.size() - kept_timers_, std::memory_order_relaxed);
  }
  void interrupt_all_waiting() noexcept;
  bool try_close();
  void report_shutdown_progress();
  void wake_parker() noexcept;
  void sync_with_wakers() noexcept;
  void check_can_park(const FiberControl* self) const {
    if (std_mutexes_held() > 0) [[unlikely]]
      report_parking_with_mutex(self);
  }
  [[noreturn, gnu::cold]] void report_parking_with_mutex(const FiberControl* self) const;
  // Polls the parker, posts, timers and stop for up to settings_.idle_poll; true when something
  // turned up (the loop then runs again instead of sleeping).
  bool poll_for_work();
  // Runs fn, timed as `phase` when the profiler is on: one test of prof_ when it is off (the
  // timed copy of fn is a separate function, so the untimed one stays inlined).
  template <typename Fn>
  void timed(prof::LoopPhase phase, Fn&& fn);
  template <typename Fn>
  [[gnu::noinline]] void timed_on(prof::LoopPhase phase, Fn& fn);
  void start_profiler();
  // Records a phase that began at `start` and reports when the interval is over (cold path).
  [[gnu::noinline]] void end_phase(prof::LoopPhase phase, std::uint64_t start) noexcept;
  void report_profile(std::uint64_t now, bool final);
  void stop_profiler();

  // How many fiber-to-fiber switches may pass before the main context gets a turn.
  static constexpr std::uint32_t kSwitchesPerRound = 64;
  // The least stack a fiber needs for the loop's turn to run on it (turn_here_allowed): the
  // reactor's poll and the take-in of posted work run there then.
  static constexpr std::size_t kTurnStackMin = 32 * 1024;
  // How many finished fibers a worker keeps whole (control block, stack and guard) for the
  // next spawn; more go back to the stack pool as bare stacks.
  static constexpr std::uint32_t kMaxSpareFibers = 64;

  // Read on every yield. tern's libraries are static and go into executables (position
  // dependent or PIE), where this variable sits at a fixed offset from the thread pointer:
  // local-exec reads it with one instruction, where the default for a variable of another
  // translation unit loads the offset first. A -fPIC build (no -fPIE) keeps the default.
#if defined(__PIE__) || !defined(__PIC__)
  [[gnu::tls_model("local-exec")]]
#endif
  static constinit thread_local Scheduler* current_scheduler;

  RuntimeState* runtime_;
  std::size_t index_;
  std::unique_ptr<Parker> parker_;
  FiberControl main_;
  FiberControl* running_ = &main_;
  // Whether a shared-stack fiber was ever made here: until then a switch tests nothing else.
  bool shared_stack_used_ = false;
  FiberControl* finished_ = nullptr;  // see free_finished()
  RunQueue run_queue_;
  bool spawned_first_ = false;  // start_fiber queues at the front (start_spawned_first)
  IntrusiveList<FiberControl, &FiberControl::waiting_hook> interruptible_;
  IntrusiveList<FiberControl, &FiberControl::all_hook> live_;
  MpscQueue remote_fibers_;
  MpscQueue remote_tasks_;
  TimerHeap timers_;
  std::size_t kept_timers_ = 0;  // nodes in timers_ kept after their wait ended (timer_kept)
  StackPool stacks_;
  static constexpr std::chrono::seconds kStackTrimInterval{1};
  Deadline next_stack_trim_{};            // see trim_stacks()
  FiberControl* spare_fibers_ = nullptr;  // linked through run_next, the latest first
  std::error_code create_error_;          // see create_error()
  std::uint32_t spare_count_ = 0;
  SharedStack shared_stack_;
  // The context that copies frames off and onto the shared stack between two of its fibers.
  FiberControl copier_;
  Stack copier_stack_;
  FiberControl* copier_from_ = nullptr;
  FiberControl* copier_to_ = nullptr;
  // Fiber-to-fiber switches left before the main context's turn (counted down: a decrement
  // and a branch per switch). The loop sets it when it hands the worker to a fiber, and to 1
  // while it runs itself, so that a yield there takes the budget's slow path (yield_to_loop),
  // which reports it. Once the worker has made a shared-stack fiber it stays at 1, so that
  // every yield and wait takes its slow path, which tests for shared-stack fibers and counts
  // the switches in shared_budget_: the fast paths test nothing else.
  std::uint32_t switch_budget_ = 1;
  std::uint32_t shared_budget_ = kSwitchesPerRound;  // switch_budget_ while shared stacks are used
  // What the loop sets switch_budget_ to when it hands the worker to a fiber.
  std::uint32_t round_budget() const noexcept { return shared_stack_used_ ? 1 : kSwitchesPerRound; }
  std::uint64_t next_id_ = 0;
  std::uint64_t last_id_ = 0;
  bool stop_seen_ = false;
  bool just_parked_ = false;  // park() returned and no fiber has run since
  SpareCpuCheck spare_cpu_;   // may idle polling take a CPU? (see poll_for_work)
  Deadline next_shutdown_report_{};
  std::atomic<bool> sleeping_{false};
  std::atomic<std::uint64_t> wake_sync_{0};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> closed_{false};
  std::atomic<std::uint32_t> posters_{0};  // other threads inside post() or make_ready()
  std::atomic<std::size_t> alive_{0};      // written by the owner only
  // timers_.size() less the kept nodes, written by the owner only.
  std::atomic<std::size_t> timers_pending_{0};
  LoopSettings settings_;
#if TERN_PROF_ENABLED
  std::unique_ptr<prof::LoopProfiler> profiler_;
  prof::LoopProfiler* prof_ = nullptr;  // profiler_.get() while run() profiles
#endif
};

// yield, suspend and switch_to are the path of every switch: inline, so that this_fiber::yield
// is one function that ends in a jump to the context switch.
inline void Scheduler::switch_from(FiberControl* prev, FiberControl* next) noexcept {
  if (shared_stack_used_ && (prev->on_shared_stack || next->on_shared_stack)) [[unlikely]] {
    switch_shared(prev, next);
    return;
  }
  switch_plain(prev, next);
}

inline void Scheduler::switch_plain(FiberControl* prev, FiberControl* next) noexcept {
  running_ = next;
  sanitizer_before_switch(prev->sanitizer, next->sanitizer, prev->state == FiberState::finished);
#if TERN_ASAN || TERN_TSAN
  auto* from = static_cast<FiberControl*>(switch_context(&prev->context, next->context, prev));
  sanitizer_after_switch(prev->sanitizer, from->sanitizer);
#else
  switch_context(&prev->context, next->context, prev);
#endif
}

inline void Scheduler::suspend() noexcept {
  if (--switch_budget_ == 0) [[unlikely]] {
    suspend_slow();
    return;
  }
  FiberControl* next = run_queue_.pop_front();
  if (next == nullptr) next = &main_;
  if (next == running_) return;  // woken before it parked (its waker set it ready)
  switch_plain(running_, next);
}

// A yield hands the worker straight to the first ready fiber and queues itself behind the
// others in the same step (RunQueue::rotate), with the same turns for the worker's loop (one
// switch in kSwitchesPerRound) as every other switch.
inline void Scheduler::yield() noexcept {
  FiberControl* self = running_;
  check_can_park(self);
  if (--switch_budget_ == 0) [[unlikely]] {
    yield_to_loop(self);
    return;
  }
  if (run_queue_.empty()) return;  // nobody else is ready: go on running
  switch_plain(self, run_queue_.rotate(self));
}

inline void Scheduler::wait_for_join(FiberControl* self) noexcept {
  check_can_park(self);
  self->claim.store(0, std::memory_order_release);  // detail::begin_wait
  self->state = FiberState::waiting;
  suspend();
}

inline bool Scheduler::keep_spare(FiberControl* fiber) noexcept {
  if (fiber->on_shared_stack || spare_count_ >= kMaxSpareFibers) [[unlikely]]
    return false;
  sanitizer_destroy(fiber->sanitizer);
  fiber->run_next = spare_fibers_;
  spare_fibers_ = fiber;
  ++spare_count_;
  return true;
}

inline void Scheduler::abandon_fiber(FiberControl* fiber) noexcept {
  if (!keep_spare(fiber)) [[unlikely]]
    drop_fiber(fiber);
}

// Inline: a spawn's way from tern::spawn to the run queue is then one call.
inline void Scheduler::start_fiber(FiberControl* fiber, FiberEntry* entry, bool joinable) noexcept {
  fiber->entry = entry;
  fiber->refs = joinable ? 2 : 1;
  fiber->state = FiberState::ready;
  live_.push_back(*fiber);
  alive_.store(alive_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (spawned_first_) [[unlikely]] {
    run_queue_.push_front(fiber);
  } else {
    push_ready(fiber);
  }
}

template <typename Fn>
inline void Scheduler::timed(prof::LoopPhase phase, Fn&& fn) {
#if TERN_PROF_ENABLED
  if (prof_ != nullptr) [[unlikely]] {
    timed_on(phase, fn);
    return;
  }
#else
  (void)phase;
#endif
  fn();
}

#if TERN_PROF_ENABLED
template <typename Fn>
void Scheduler::timed_on(prof::LoopPhase phase, Fn& fn) {
  const std::uint64_t start = prof_->lap();  // where the previous phase ended
  fn();
  end_phase(phase, start);
}
#endif

}  // namespace tern::detail
