#pragma once

#include "tern/base/clock.h"
#include "tern/base/result.h"

// Stopping on SIGINT (Ctrl-C) and SIGTERM (kill, systemd, docker stop): a fiber waits for one of
// them and the program then stops its servers and returns from main, which writes out the log.
//
//   tern::Runtime runtime;
//   runtime.run([] {
//     tern::net::TcpServer server(...);
//     server.start(...);
//     tern::io::wait_for_stop_signal();  // parks this fiber; the server keeps serving
//     server.stop(tern::deadline_after(std::chrono::seconds(5)));
//   });
//
// The rules (docs/guide.md, "Stopping on a signal"): once either function below has run, the two
// signals no longer end the process in any thread: a thread that blocks them leaves them pending
// for the signalfd a waiting fiber reads, and a thread that does not runs tern's handler, which
// hands them to the waiting fiber as well (unless the program set a handler of its own or ignores
// them). Every thread tern starts blocks them (and the other asynchronous process signals).

namespace tern::io {

// Blocks SIGINT and SIGTERM in the calling thread (threads it starts later inherit the mask) and
// catches them in every other thread, so that from now on they wait for wait_for_stop_signal
// instead of ending the process. Call it first thing in main to cover the time before the wait
// starts (signals that come earlier keep their default action). Idempotent. Any thread.
void block_stop_signals() noexcept;

// Parks the calling fiber until SIGINT or SIGTERM arrives and returns its number; a signal that
// came since block_stop_signals is returned at once. One signal ends one wait (as sigwaitinfo).
// Calls block_stop_signals first. Fails with timed_out at the deadline, operation_canceled when
// the fiber is interrupted or its runtime shuts down, or an errno if the signalfd cannot be made.
// Worker fibers of a runtime with reactors only (either backend).
[[nodiscard]] Result<int> wait_for_stop_signal(Deadline deadline = kNoDeadline);

}  // namespace tern::io
