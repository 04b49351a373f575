#pragma once

#include <atomic>
#include <cstdint>
#include <system_error>
#include <utility>
#include <vector>

#include "sanitizer_hooks.h"
#include "stack.h"
#include "tern/base/intrusive_list.h"
#include "tern/base/mpsc_queue.h"
#include "tern/fiber/context.h"
#include "tern/fiber/detail/waiter.h"
#include "tern/fiber/fiber.h"
#include "timer_heap.h"

namespace tern::detail {

class Scheduler;

// `ready` covers running as well as queued: nothing tells the two apart, so a switch writes no
// state (a waker sets `ready` when it queues a waiting fiber).
enum class FiberState : std::uint8_t { ready, waiting, finished };

struct FiberControl;

// A fiber waiting in join, as the fiber it joins sees it: on the joiner's stack (the heap for a
// shared-stack joiner). Owner worker only.
struct JoinWaiter {
  FiberControl* fiber = nullptr;
  bool fired = false;  // finish_running claimed the joiner (else a deadline or interrupt did)
};

// Values of a fiber's fiber-local storage: (value, destroy) per key.
using FiberLocals = std::vector<std::pair<void*, void (*)(void*)>>;

// Everything tern keeps about one fiber. It lives at the top of the fiber's own stack, or on the
// heap for a shared-stack fiber (the worker's main context has one as a plain member). Owner worker
// only, except `claim`, `wake_result` and `remote_hook`, which wakers on other threads use under
// the claim protocol.
struct FiberControl {
  ContextHandle context = nullptr;
  Scheduler* scheduler = nullptr;
  FiberControl* run_next = nullptr;      // the next fiber in the run queue or the spare fibers
  ListHook waiting_hook;                 // in the scheduler's list of interruptible waits
  ListHook all_hook;                     // in the scheduler's list of live fibers
  MpscNode remote_hook;                  // in the scheduler's queue of wakes from other threads
  TimerNode timer;                       // the deadline of the current wait, or kept (timer_kept)
  Deadline wait_deadline = kNoDeadline;  // the current wait's deadline, when it armed `timer`
  std::atomic<std::uint32_t> claim{0};
  std::error_code wake_result;
  FiberState state = FiberState::ready;
  bool interruptible_wait = false;
  bool interrupt_requested = false;
  bool is_main = false;
  bool on_shared_stack = false;  // StackMode::shared: runs on the worker's SharedStack
  // `timer` is still in the heap from a wait that ended before its far deadline: the next wait
  // with a later deadline reuses the node as it is (see Scheduler::arm_timer).
  bool timer_kept = false;
  std::uint32_t refs = 0;  // the running fiber holds one, a joinable handle another
  std::uint64_t id = 0;
  FiberEntry* entry = nullptr;
  JoinWaiter* joiner = nullptr;
  FiberLocals* locals = nullptr;
  Stack stack;                       // own stack, or the worker's shared stack (not owned)
  std::size_t stack_request = 0;     // the stack size spawn asked for (FiberOptions::stack_size)
  void* saved_stack = nullptr;       // shared stack: its used part while parked (heap)
  std::uint32_t saved_size = 0;      // bytes in saved_stack
  std::uint32_t saved_capacity = 0;  // bytes allocated for saved_stack
  SanitizerContext sanitizer;
  char name[32] = {};

  static FiberControl* from_timer(TimerNode* node) noexcept {
    return reinterpret_cast<FiberControl*>(reinterpret_cast<char*>(node) -
                                           offsetof(FiberControl, timer));
  }
  static FiberControl* from_remote(MpscNode* node) noexcept {
    return reinterpret_cast<FiberControl*>(reinterpret_cast<char*>(node) -
                                           offsetof(FiberControl, remote_hook));
  }
};

// Destroys the fiber-local values of fiber (on its own worker).
void destroy_fiber_locals(FiberControl* fiber) noexcept;

}  // namespace tern::detail
