#pragma once

// How a fuzz target reports a broken invariant: a message on stderr and an abort, so libFuzzer
// saves the input and the corpus check fails. Any thread.

#include <cstdio>
#include <cstdlib>

namespace tern::fuzz {

// Aborts with "`parser`: `what`" when `condition` is false.
inline void require(bool condition, const char* parser, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "%s: %s\n", parser, what);
  std::abort();
}

}  // namespace tern::fuzz
