#include "tern/base/wait_limit.h"

#include "tern/base/coarse_clock.h"

namespace tern {

Deadline WaitLimit::idle_deadline() const noexcept { return coarse_deadline_after(idle_); }

}  // namespace tern
