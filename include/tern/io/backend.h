#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>

#include "tern/base/result.h"
#include "tern/fiber/park.h"

namespace tern::io {

// The kernel interface a worker's reactor uses.
enum class Backend {
  epoll,  // readiness: try the system call, wait for readiness on EAGAIN (edge-triggered)
  uring,  // completion: io_uring, submissions batched per loop turn
};

// Which backend to pick: auto probes io_uring and falls back to epoll with a logged reason.
enum class BackendChoice { automatic, epoll, uring };

// "epoll" or "uring". Any thread.
std::string_view to_string(Backend backend) noexcept;

// Parses "epoll", "uring", "io_uring" or "auto"; std::errc::invalid_argument otherwise. Any thread.
[[nodiscard]] Result<BackendChoice> parse_backend(std::string_view text) noexcept;

// The choice in the TERN_IO environment variable (automatic when unset). An unknown value
// aborts with a message naming the accepted ones. Any thread.
BackendChoice backend_from_environment();

// Whether io_uring can be used here; on failure, the reason (disabled by the kernel, refused by a
// seccomp policy, too old). Probed once per process. Any thread.
[[nodiscard]] Result<void> uring_available();

// A RuntimeOptions::make_parker that gives every worker a reactor of the chosen backend.
// Without it, a runtime in a program that links tern::io gets backend_from_environment().
std::function<std::unique_ptr<Parker>(std::size_t)> reactors(BackendChoice choice);

// The backend of the calling worker's reactor. Worker threads of a runtime with reactors only.
Backend current_backend();

}  // namespace tern::io
