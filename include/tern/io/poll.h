#pragma once

#include <poll.h>

#include <span>

#include "tern/base/clock.h"
#include "tern/base/result.h"

// A fiber-native poll(2): waits for readiness on many descriptors at once, parking only the
// calling fiber. The hooked poll, ppoll, select and epoll_wait of tern::hook are built on it.

namespace tern::io {

// poll(2) on `fds` for the calling fiber: fills each revents as poll(2) does (POLLNVAL for a
// descriptor that is not open, negative fds ignored) and returns how many entries have events,
// 0 when the deadline passes first, std::errc::operation_canceled when the fiber is interrupted.
// The descriptors may be blocking or not, sockets, pipes, eventfds or anything poll(2) takes.
// A socket waited on this way must be closed with tern::io::close (or the hooked close).
// Worker fibers of a runtime with reactors only.
[[nodiscard]] Result<int> poll(std::span<pollfd> fds, Deadline deadline = kNoDeadline);

// Whether the calling thread is a worker of a runtime with reactors, where the fiber-blocking
// calls of tern::io may be used. Any thread.
bool on_reactor_worker() noexcept;

}  // namespace tern::io
