#pragma once

#include <cstddef>

namespace tern::detail {

// While alive, gives the calling worker thread an alternate signal stack and makes sure the
// process-wide SIGSEGV handler is installed, so that a fiber running into its stack's guard
// region aborts with a message naming the fiber instead of corrupting memory. Worker thread.
class AltSignalStack {
 public:
  AltSignalStack();
  ~AltSignalStack();
  AltSignalStack(const AltSignalStack&) = delete;
  AltSignalStack& operator=(const AltSignalStack&) = delete;

 private:
  void* memory_ = nullptr;
  std::size_t size_ = 0;
  bool installed_ = false;
};

}  // namespace tern::detail
