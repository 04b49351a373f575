#pragma once

#include <cstddef>

#include "stack.h"
#include "tern/base/result.h"
#include "tern/fiber/context.h"

namespace tern::detail {

struct FiberControl;

// One worker's shared stack (FiberOptions::stack_mode = StackMode::shared) and the fiber whose
// frames are on it. A shared-stack fiber runs at the same addresses as every other one of its
// worker: before it runs, its saved frames are copied in; once it has parked, they are copied
// out to a heap buffer of the size it used. Owner thread only; never called from a context
// that runs on this stack while it copies.
class SharedStack {
 public:
  SharedStack() = default;
  ~SharedStack();
  SharedStack(const SharedStack&) = delete;
  SharedStack& operator=(const SharedStack&) = delete;

  // Maps the stack on first use.
  Result<void> map();
  bool mapped() const noexcept { return stack_.mapping != nullptr; }
  const Stack& stack() const noexcept { return stack_; }
  void* base() const noexcept { return stack_.base; }
  std::size_t size() const noexcept { return stack_.size; }
  // The fiber whose frames are on the stack now, or nullptr.
  FiberControl* occupant() const noexcept { return occupant_; }

  // Puts `fiber`'s frames on the stack: copies its saved bytes in, or on its first run builds
  // the frame that starts it in `entry`. The stack must be free (evict() first).
  void load(FiberControl* fiber, ContextEntry entry) noexcept;
  // Copies the occupant's used part (from its saved stack pointer to the top) to its buffer
  // and frees the stack. In debug builds the freed bytes are overwritten (and poisoned under
  // AddressSanitizer), so a stale pointer into them reads garbage instead of old values.
  void evict() noexcept;
  // Frees the stack of a finished occupant without copying.
  void drop() noexcept;
  // Frees the saved bytes of a fiber that will never run again.
  static void free_saved(FiberControl* fiber) noexcept;

 private:
  void scrub(std::size_t from_top) noexcept;

  Stack stack_;
  FiberControl* occupant_ = nullptr;
};

}  // namespace tern::detail
