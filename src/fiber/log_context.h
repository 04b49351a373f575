#pragma once

namespace tern::detail {

// Makes tern::log prefix lines logged on a worker with "wN f'name'#id". Idempotent; called
// by every Runtime (so a program that links the fiber layer keeps this registration). Any thread.
void register_log_context() noexcept;

}  // namespace tern::detail
