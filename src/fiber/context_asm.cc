// make_context on the assembly switch in arch/ (the frame is built in context_frame.h).
#include "context_frame.h"

namespace tern {

ContextHandle make_context(void* stack_base, std::size_t size, ContextEntry entry) noexcept {
  return detail::new_context(stack_base, size, entry);
}

}  // namespace tern
