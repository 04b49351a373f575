// make_context on the assembly switch in arch/ (the frame is built in context_frame.h).
#include "context_frame.h"

#if !TERN_CONTEXT_ASM
#error "context_asm.cc is the TERN_CONTEXT=asm build's (new_context would call make_context)"
#endif

namespace tern {

ContextHandle make_context(void* stack_base, std::size_t size, ContextEntry entry) noexcept {
  return detail::new_context(stack_base, size, entry);
}

}  // namespace tern
