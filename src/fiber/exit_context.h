#pragma once

#include "tern/fiber/context.h"

// Resumes `to` (passing `arg`, which its switch_context returns) from a context that never runs
// again: nothing of the running context is saved, so its stack may go as soon as `to` runs.
// Not [[noreturn]], although it never returns, so that a call in tail position compiles to a
// jump: a fiber then ends with no call outstanding (arch/switch_x86_64.S says why that matters).
// Called from the ending context.
extern "C" void tern_exit_context(tern::ContextHandle to, void* arg) noexcept;
