#include "tern/fiber/fiber_local.h"

#include <atomic>

#include "fiber_control.h"
#include "scheduler.h"

namespace tern::detail {

namespace {
std::atomic<std::size_t> next_key{0};
}  // namespace

std::size_t new_fiber_local_key() noexcept {
  return next_key.fetch_add(1, std::memory_order_relaxed);
}

void*& fiber_local_slot(std::size_t key, void (*destroy)(void*)) {
  FiberControl* self = current_fiber("tern::FiberLocal::get");
  if (self->locals == nullptr) self->locals = new FiberLocals();
  FiberLocals& locals = *self->locals;
  if (locals.size() <= key) locals.resize(key + 1, {nullptr, nullptr});
  locals[key].second = destroy;
  return locals[key].first;
}

void destroy_fiber_locals(FiberControl* fiber) noexcept {
  FiberLocals* locals = fiber->locals;
  if (locals == nullptr) return;
  // A destructor may touch other fiber-locals; loop until every slot stays empty.
  for (bool again = true; again;) {
    again = false;
    for (std::size_t i = 0; i < locals->size(); ++i) {
      auto [value, destroy] = (*locals)[i];
      if (value != nullptr) {
        (*locals)[i].first = nullptr;
        destroy(value);
        again = true;
      }
    }
  }
  delete locals;
  fiber->locals = nullptr;
}

}  // namespace tern::detail
