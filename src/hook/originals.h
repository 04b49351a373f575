#pragma once

// The libc functions tern::hook replaces, as libc (or a sanitizer's interceptor of them) defines
// them: what every hooked call falls back to and what the cooperative paths call underneath.

#include "tern/base/detail/sys_calls.h"

namespace tern::hook::detail {

// The same table as the one tern's own code calls through (tern::detail::sys), so the two lists
// of replaced functions cannot drift apart.
using Originals = tern::detail::SysCalls;

// The originals, looked up once (dlsym(RTLD_NEXT), or a sanitizer's interceptor when the
// program is built with one). Any thread.
const Originals& originals() noexcept;

// Counts a replaced call (count_hooked_calls) that reaches the kernel through the worker's
// reactor instead of originals(). Any thread.
void note_hooked_call() noexcept;

}  // namespace tern::hook::detail
