#pragma once

// Tells AddressSanitizer and ThreadSanitizer about context switches, which they cannot see: ASan
// needs each stack's bounds (or it misreads a switched-to stack as an overflow), TSan needs one
// fiber object per context (or it mixes their histories). tern's fibers call these around every
// switch; code that switches raw contexts itself (tern/fiber/context.h: a benchmark, its own
// scheduler) calls them the same way. In builds without those sanitizers they are empty.
//
// The order, for a switch from context A to context B:
//   sanitizer_before_switch(A, B, a_ends);  switch_context(...);  // in A
//   sanitizer_after_switch(B, A);                                 // first thing in B
// Each context's state is set up once with sanitizer_create (a stack of its own) or
// sanitizer_adopt_thread (the thread's own stack) and released with sanitizer_destroy.

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define TERN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TERN_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define TERN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TERN_TSAN 1
#endif
#endif

#if TERN_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#if TERN_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace tern {

// The sanitizer state one context carries; used by the thread the context runs on.
struct SanitizerContext {
  const void* stack_bottom = nullptr;  // ASan: the stack's lowest address (learned for a thread)
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;  // ASan: the fake stack saved while switched out
  void* tsan_fiber = nullptr;  // TSan: the fiber object of this context
};

// Sets up the context of the stack [bottom, bottom + size) before its first switch. Any thread.
inline void sanitizer_create(SanitizerContext& ctx, const void* bottom, std::size_t size) {
#if TERN_ASAN
  ctx.stack_bottom = bottom;
  ctx.stack_size = size;
#else
  (void)ctx;
  (void)bottom;
  (void)size;
#endif
#if TERN_TSAN
  ctx.tsan_fiber = __tsan_create_fiber(0);
#endif
}

// Sets up the context of the calling thread's own stack. From that thread.
inline void sanitizer_adopt_thread(SanitizerContext& ctx) {
#if TERN_TSAN
  ctx.tsan_fiber = __tsan_get_current_fiber();
#else
  (void)ctx;
#endif
}

// Releases what sanitizer_create made, once the context never runs again. Any thread.
inline void sanitizer_destroy(SanitizerContext& ctx) {
#if TERN_TSAN
  if (ctx.tsan_fiber != nullptr) __tsan_destroy_fiber(ctx.tsan_fiber);
  ctx.tsan_fiber = nullptr;
#else
  (void)ctx;
#endif
}

// Call right before switching from `from` to `to`; `from_ends` when `from` never resumes. From
// the context being left.
inline void sanitizer_before_switch(SanitizerContext& from, SanitizerContext& to, bool from_ends) {
#if TERN_ASAN
  __sanitizer_start_switch_fiber(from_ends ? nullptr : &from.fake_stack, to.stack_bottom,
                                 to.stack_size);
#else
  (void)from;
  (void)from_ends;
#endif
#if TERN_TSAN
  __tsan_switch_to_fiber(to.tsan_fiber, 0);
#else
  (void)to;
#endif
}

// Call first thing after a switch lands in `self`, coming from `from`. From `self`.
inline void sanitizer_after_switch(SanitizerContext& self, SanitizerContext& from) {
#if TERN_ASAN
  const void* from_bottom = nullptr;
  std::size_t from_size = 0;
  __sanitizer_finish_switch_fiber(self.fake_stack, &from_bottom, &from_size);
  if (from.stack_bottom == nullptr) {  // a thread's own stack: learn its bounds
    from.stack_bottom = from_bottom;
    from.stack_size = from_size;
  }
#else
  (void)self;
  (void)from;
#endif
}

}  // namespace tern
