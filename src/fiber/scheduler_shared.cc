// The scheduler's side of shared stacks (FiberOptions::stack_mode = StackMode::shared): making
// and freeing such fibers, and the copies around their switches. A shared-stack fiber is copied
// out as soon as it parks, so that its stack never looks valid to a pointer that outlived the
// park: by the copier, a small context of its own that copies the parking fiber out (or frees a
// finished one) and, when the next fiber is on the shared stack too, copies that one in.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "runtime_state.h"
#include "scheduler.h"
#include "tern/base/assert.h"

namespace tern::detail {

namespace {

// The copier runs only memcpy and the sanitizer hooks.
constexpr std::size_t kCopierStackSize = 16 * 1024;
// The alignment of a shared-stack fiber's heap block (what malloc gives).
constexpr std::size_t kBlockAlign = alignof(std::max_align_t);
static_assert(alignof(FiberControl) <= kBlockAlign);

}  // namespace

Result<FiberSlot> Scheduler::create_shared_fiber(const FiberOptions& options,
                                                 std::size_t entry_size, std::size_t entry_align) {
#if !TERN_SHARED_STACKS
  (void)options;
  (void)entry_size;
  (void)entry_align;
  return fail(std::errc::not_supported);  // ucontext switches keep no stack pointer to copy at
#else
  if (!shared_stack_.mapped()) {
    if (Result<void> mapped = shared_stack_.map(); !mapped) return fail(mapped.error());
    Result<Stack> copier_stack = map_stack(kCopierStackSize);
    if (!copier_stack) return fail(copier_stack.error());
    copier_stack_ = *copier_stack;
    copier_.scheduler = this;
    copier_.context = make_context(copier_stack_.base, copier_stack_.size, &copier_main);
    std::strcpy(copier_.name, "shared-stack-copier");
    sanitizer_create(copier_.sanitizer, copier_stack_.base, copier_stack_.size);
  }
  // The control block and the entry share one heap block; nothing of the fiber's that another
  // fiber may touch while it is parked lives on the shared stack.
  // malloc's alignment serves every callable but over-aligned ones.
  if (entry_align > kBlockAlign) return fail(std::errc::invalid_argument);
  const std::size_t entry_offset = (sizeof(FiberControl) + kBlockAlign - 1) & ~(kBlockAlign - 1);
  void* block = std::malloc(entry_offset + entry_size);
  if (block == nullptr) return fail(std::errc::not_enough_memory);
  auto* fiber = ::new (block) FiberControl;
  fiber->scheduler = this;
  fiber->on_shared_stack = true;
  if (!shared_stack_used_) {  // from now on every yield and wait counts in shared_budget_
    shared_stack_used_ = true;
    shared_budget_ = switch_budget_;
    switch_budget_ = 1;
  }
  fiber->stack = shared_stack_.stack();  // not owned: for the stack overflow report
  name_new_fiber(*fiber, options);
  // context stays null until the fiber first runs: SharedStack::load builds its first frame.
  sanitizer_create(fiber->sanitizer, shared_stack_.base(), shared_stack_.size());
  return FiberSlot{fiber, static_cast<char*>(block) + entry_offset};
#endif
}

void Scheduler::free_shared_fiber(FiberControl* fiber) noexcept {
  if (shared_stack_.occupant() == fiber) shared_stack_.drop();
  SharedStack::free_saved(fiber);
  sanitizer_destroy(fiber->sanitizer);
  fiber->~FiberControl();
  std::free(fiber);
}

void Scheduler::switch_shared(FiberControl* prev, FiberControl* next) noexcept {
  if (!prev->on_shared_stack) {  // next is on the shared stack, which is free: copy it in
    shared_stack_.load(next, &Scheduler::fiber_main);
    running_ = next;
    sanitizer_before_switch(prev->sanitizer, next->sanitizer, prev->state == FiberState::finished);
    [[maybe_unused]] auto* from =
        static_cast<FiberControl*>(switch_context(&prev->context, next->context, prev));
    sanitizer_after_switch(prev->sanitizer, from->sanitizer);
    return;
  }
  // prev leaves the shared stack: the copier copies it out, then goes on to next.
  running_ = next;
  copier_from_ = prev;
  copier_to_ = next;
  sanitizer_before_switch(prev->sanitizer, copier_.sanitizer, prev->state == FiberState::finished);
  [[maybe_unused]] auto* from =
      static_cast<FiberControl*>(switch_context(&prev->context, copier_.context, prev));
  sanitizer_after_switch(prev->sanitizer, from->sanitizer);
}

void Scheduler::copier_main(void* /*from*/) {
  Scheduler* self = current_scheduler;
  for (;;) {
    FiberControl* prev = self->copier_from_;
    FiberControl* next = self->copier_to_;
    sanitizer_after_switch(self->copier_.sanitizer, prev->sanitizer);
    if (prev->state == FiberState::finished) {
      self->shared_stack_.drop();
    } else {
      self->shared_stack_.evict();
    }
    if (next->on_shared_stack) self->shared_stack_.load(next, &Scheduler::fiber_main);
    sanitizer_before_switch(self->copier_.sanitizer, next->sanitizer, false);
    // Lands in next's switch_to (or fiber_main), which sees prev as where it came from.
    switch_context(&self->copier_.context, next->context, prev);
  }
}

}  // namespace tern::detail
