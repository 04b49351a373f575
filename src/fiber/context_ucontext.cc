// make_context and switch_context on ucontext (swapcontext), selected with
// -DTERN_CONTEXT=ucontext. It exists to compare against the assembly switch; swapcontext also
// saves and restores the signal mask, which costs a system call per switch.
#include <ucontext.h>

#include <cstdint>
#include <new>

#include "exit_context.h"
#include "tern/base/assert.h"
#include "tern/fiber/context.h"

namespace tern {

namespace {

// A ucontext-based context keeps its ucontext_t and entry near the top of its own stack.
struct UContext {
  ucontext_t uc;
  ContextEntry entry;
};

thread_local void* transfer_arg = nullptr;

void ucontext_start(unsigned hi, unsigned lo) {
  auto* self = reinterpret_cast<UContext*>((static_cast<std::uintptr_t>(hi) << 32) | lo);
  self->entry(transfer_arg);
  TERN_FATAL("a fiber context's entry returned; an entry must switch away instead");
}

}  // namespace

ContextHandle make_context(void* stack_base, std::size_t size, ContextEntry entry) noexcept {
  auto top = (reinterpret_cast<std::uintptr_t>(stack_base) + size - sizeof(UContext)) &
             ~std::uintptr_t{63};
  auto* self = new (reinterpret_cast<void*>(top)) UContext{};
  self->entry = entry;
  getcontext(&self->uc);
  self->uc.uc_stack.ss_sp = stack_base;
  self->uc.uc_stack.ss_size = top - reinterpret_cast<std::uintptr_t>(stack_base);
  self->uc.uc_link = nullptr;
  const auto address = reinterpret_cast<std::uintptr_t>(self);
  makecontext(&self->uc, reinterpret_cast<void (*)()>(&ucontext_start), 2,
              static_cast<unsigned>(address >> 32), static_cast<unsigned>(address));
  return self;
}

}  // namespace tern

extern "C" void* tern_switch_context(tern::ContextHandle* save, tern::ContextHandle to,
                                     void* arg) noexcept {
  // The context being left keeps its ucontext_t in this frame until it is resumed.
  tern::UContext here;
  *save = &here;
  tern::transfer_arg = arg;
  swapcontext(&here.uc, &static_cast<tern::UContext*>(to)->uc);
  return tern::transfer_arg;
}

extern "C" void tern_exit_context(tern::ContextHandle to, void* arg) noexcept {
  tern::ContextHandle abandoned = nullptr;  // never resumed
  tern_switch_context(&abandoned, to, arg);
}
