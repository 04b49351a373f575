#pragma once

// The sanitizer annotations of fiber switches (ASan stack bounds, TSan fiber objects), under the
// names the fiber code uses. They are defined once, in the public tern/fiber/sanitizer.h, which
// code that switches raw contexts itself (tern-bench switch) uses directly.

#include "tern/fiber/sanitizer.h"

namespace tern::detail {

using tern::sanitizer_adopt_thread;
using tern::sanitizer_after_switch;
using tern::sanitizer_before_switch;
using tern::sanitizer_create;
using tern::sanitizer_destroy;
using tern::SanitizerContext;

}  // namespace tern::detail
