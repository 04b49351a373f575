#pragma once

#include <chrono>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tern/base/clock.h"
#include "tern/base/result.h"
#include "tern/fiber/fiber_options.h"

namespace tern {

class Fiber;

namespace detail {

struct FiberControl;

// The type-erased callable a fiber runs; constructed in the fiber's own stack memory. A plain
// function pointer rather than a virtual function: one load less per fiber.
class FiberEntry {
 public:
  // Calls the callable, then destroys the entry. An exception from the callable leaves the
  // entry undestroyed (the fiber then ends the program).
  void run_then_destroy() { run_(this); }

 protected:
  explicit FiberEntry(void (*run)(FiberEntry*)) noexcept : run_(run) {}
  ~FiberEntry() = default;

 private:
  void (*run_)(FiberEntry*);
};

template <typename Fn>
class FiberEntryOf final : public FiberEntry {
 public:
  template <typename F>
  explicit FiberEntryOf(F&& fn) : FiberEntry(&run), fn_(std::forward<F>(fn)) {}

 private:
  static void run(FiberEntry* entry) {
    auto* self = static_cast<FiberEntryOf*>(entry);
    self->fn_();
    self->~FiberEntryOf();
  }

  Fn fn_;
};

// A fiber made but not started, and the room reserved on its stack for its entry.
struct FiberSlot {
  FiberControl* fiber;
  void* entry_storage;
};

// Makes a fiber on the current worker with room for an entry of the given size and alignment.
// If no stack can be mapped it returns a slot with a null fiber, and create_failure() gives the
// errno of the failed mmap/mprotect (e.g. ENOMEM). (Two pointers come back in registers, where a
// Result would go through memory.) Worker fibers only.
[[nodiscard]] FiberSlot create_fiber(const FiberOptions& options, std::size_t entry_size,
                                     std::size_t entry_align);
// Entries up to this size and alignment fit every fiber's stack (one has 16 KiB at least).
inline constexpr std::size_t kSmallEntry = 1024;
// create_fiber for an entry of at most kSmallEntry bytes and alignment, which it need not check
// against the stack. Worker fibers only.
[[nodiscard]] FiberSlot create_fiber_small(const FiberOptions& options, std::size_t entry_size,
                                           std::size_t entry_align);
// Why the calling worker's last create_fiber failed. Worker fibers only.
std::error_code create_failure() noexcept;
// Ends the program through TERN_FATAL, saying which fiber's stack could not be mapped and why.
// Any thread.
[[noreturn]] void spawn_failed(const FiberOptions& options, std::error_code error) noexcept;
// Frees a fiber made by create_fiber whose entry could not be constructed. Worker fibers only.
void abandon_fiber(FiberControl* fiber) noexcept;
// Queues a made fiber to run `entry`; its handle is then adopt_fiber(fiber). Worker fibers only.
void start_fiber(FiberControl* fiber, FiberEntry* entry) noexcept;
// The joinable handle of a fiber start_fiber queued. Worker fibers only.
inline Fiber adopt_fiber(FiberControl* fiber) noexcept;

}  // namespace detail

// A handle to a fiber, like std::thread: join() it or detach() it before it is destroyed.
// A fiber runs on the worker that spawned it and never moves; its handle must be used from
// that worker too (debug builds abort otherwise).
class Fiber {
 public:
  // An empty handle that refers to no fiber.
  Fiber() noexcept = default;
  Fiber(Fiber&& other) noexcept : control_(std::exchange(other.control_, nullptr)) {}
  Fiber& operator=(Fiber&& other) noexcept;
  // Aborts with a message if the handle is still joinable (neither joined nor detached).
  ~Fiber() {
    if (control_ != nullptr) [[unlikely]]
      destroyed_while_joinable();
  }

  // Whether the handle refers to a fiber that was not joined or detached yet.
  bool joinable() const noexcept { return control_ != nullptr; }
  // Waits until the fiber finishes. Not interruptible. Owner worker only.
  void join();
  // Waits until the fiber finishes or the deadline passes (tern::deadline_exceeded(); the handle
  // stays joinable), or the waiting fiber is interrupted (std::errc::operation_canceled).
  // Owner worker only.
  [[nodiscard]] Result<void> join_until(Deadline deadline);
  // Lets the fiber run on without a handle; it frees itself when it finishes. Owner worker only.
  void detach();
  // Asks the fiber to stop: its current or next interruptible wait (sleep, channel, condition
  // variable, semaphore, event, wait group) returns std::errc::operation_canceled once.
  // Owner worker only.
  void interrupt();
  // The fiber's process-unique id (never 0). Owner worker only.
  std::uint64_t id() const;

 private:
  friend Fiber detail::adopt_fiber(detail::FiberControl*) noexcept;
  explicit Fiber(detail::FiberControl* control) noexcept : control_(control) {}
  void check_owner(const char* operation) const;
  [[noreturn]] void destroyed_while_joinable() const noexcept;
  [[nodiscard]] Result<void> join_until(Deadline deadline, bool interruptible);
  detail::FiberControl* control_ = nullptr;
};

inline Fiber detail::adopt_fiber(detail::FiberControl* fiber) noexcept { return Fiber(fiber); }

// Starts a fiber running fn() on the current worker; it runs when the current fiber next
// yields or waits. The callable is stored on the fiber's own stack: no heap allocation when a
// pooled stack is free. Fails with the errno of the failed mmap/mprotect (e.g. ENOMEM) if no
// stack can be mapped; fn is then not run (nor moved from when passed as an lvalue). An
// exception thrown by fn's copy or move propagates. Worker fibers only (use Runtime::run or
// Runtime::post to get onto a worker).
template <typename Fn>
[[nodiscard]] Result<Fiber> try_spawn(Fn&& fn,
                                      const FiberOptions& options = detail::kDefaultFiberOptions) {
  using Entry = detail::FiberEntryOf<std::decay_t<Fn>>;
  static_assert(std::is_invocable_v<std::decay_t<Fn>&>,
                "spawn needs a callable taking no arguments");
  constexpr bool small =
      sizeof(Entry) <= detail::kSmallEntry && alignof(Entry) <= detail::kSmallEntry;
  const detail::FiberSlot slot =
      small ? detail::create_fiber_small(options, sizeof(Entry), alignof(Entry))
            : detail::create_fiber(options, sizeof(Entry), alignof(Entry));
  if (slot.fiber == nullptr) [[unlikely]]
    return fail(detail::create_failure());
  Entry* entry;
  try {
    entry = ::new (slot.entry_storage) Entry(std::forward<Fn>(fn));
  } catch (...) {
    detail::abandon_fiber(slot.fiber);
    throw;
  }
  detail::start_fiber(slot.fiber, entry);
  return detail::adopt_fiber(slot.fiber);
}

// Like try_spawn, for fibers the program cannot do without: if no stack can be mapped it ends
// the program (TERN_FATAL) with a message naming the fiber and the error. Worker fibers only.
template <typename Fn>
[[nodiscard]] Fiber spawn(Fn&& fn, const FiberOptions& options = detail::kDefaultFiberOptions) {
  Result<Fiber> fiber = try_spawn(std::forward<Fn>(fn), options);
  if (!fiber) detail::spawn_failed(options, fiber.error());
  return std::move(*fiber);
}

// Operations on the fiber that calls them. Worker fibers only.
namespace this_fiber {

// The running fiber's process-unique id (never 0).
std::uint64_t id() noexcept;
// The running fiber's name, or an empty view.
std::string_view name() noexcept;
// Renames the running fiber (up to 31 characters are kept).
void set_name(std::string_view name) noexcept;
// Lets every other ready fiber on this worker run, then continues.
void yield() noexcept;
// Sleeps until the deadline. Returns std::errc::operation_canceled if interrupted first.
[[nodiscard]] Result<void> sleep_until(Deadline deadline);
// Sleeps for the duration. Returns std::errc::operation_canceled if interrupted first.
template <typename Rep, typename Period>
[[nodiscard]] Result<void> sleep_for(std::chrono::duration<Rep, Period> duration) {
  return sleep_until(deadline_after(duration));
}
// Whether this fiber was asked to stop (interrupt() or the runtime shutting down) and has not
// yet seen it in a wait.
bool stop_requested() noexcept;

}  // namespace this_fiber

}  // namespace tern
