#pragma once

// A count of the calls that reach tern::hook's replacements, for tests that check which code
// goes through them (tern's own I/O never does). Off by default; while off a replaced call pays
// one relaxed load of a flag no one writes.

#include <cstdint>

namespace tern::hook::detail {

// Starts (true) or stops (false) counting calls into the replacements. Any thread.
void count_hooked_calls(bool on) noexcept;

// How many times a replaced function reached libc (or a sanitizer's interceptor of it), or the
// worker's reactor in its place, while counting was on: at least once for each replaced call that
// did. Any thread.
std::uint64_t hooked_calls() noexcept;

}  // namespace tern::hook::detail
