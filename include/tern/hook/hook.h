#pragma once

// tern::hook: a program that links this library gets libc's blocking socket, poll, sleep and
// name-lookup calls replaced, so that a blocking client library (hiredis, libcurl, a database
// driver) called from a fiber parks the fiber instead of its worker. See docs/hooks.md.
// Nothing needs to be called: linking tern::hook is what turns it on.

namespace tern::hook {

// Whether a blocking socket call made here would park the calling fiber rather than block the
// thread: true in a fiber of a worker with a reactor. Any thread.
bool parks_fibers() noexcept;

}  // namespace tern::hook
