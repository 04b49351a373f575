// Compiled with TERN_LOG_MIN_LEVEL=TERN_LOG_LEVEL_INFO (tests/CMakeLists.txt): TRACE and DEBUG
// calls here compile to nothing.
#include "log_min_level.h"

#include "tern/log/log.h"

static_assert(TERN_LOG_MIN_LEVEL == TERN_LOG_LEVEL_INFO);

int log_around_min_level() {
  int evaluated = 0;
  TERN_LOG_TRACE("trace below the minimum {}", ++evaluated);
  TERN_LOG_DEBUG("debug below the minimum {}", ++evaluated);
  TERN_LOG_INFO("info at the minimum {}", ++evaluated);
  TERN_LOG_WARN("warn above the minimum {}", ++evaluated);
  const int only_traced = 5;  // used by a compiled-out call only: no unused-variable warning
  TERN_LOG_TRACE("only traced {}", only_traced);
  return evaluated;
}
