#pragma once

namespace tern::detail {

// While on, the fibers the calling worker starts go to the front of its run queue instead of
// the back: each runs as soon as the caller parks or yields, ahead of the fibers that were ready
// before it (for a fiber that carries on the caller's work while that work's memory is still in
// cache). Turn it off right after the spawn it was meant for. Worker fibers only.
void start_spawned_first(bool on) noexcept;

}  // namespace tern::detail
