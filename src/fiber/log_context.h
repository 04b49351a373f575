#pragma once

namespace tern::detail {

// Makes tern::log prefix lines logged on a worker with "wN f'name'#id", and TERN_FATAL name the
// fiber and worker it was called on. Idempotent; called
// by every Runtime (so a program that links the fiber layer keeps this registration). Any thread.
void register_log_context() noexcept;

}  // namespace tern::detail
