#pragma once

#include "config.h"

// tern-echo's server run: the runtime, the listener, the optional admin endpoint, and the
// start and stop lines on stdout.
namespace tern::echo {

// Serves `config` until SIGINT/SIGTERM or --duration, then finishes open connections for 1 s.
// Prints "tern-echo: listening on ..." once listening and "tern-echo: stopped; ..." at the end.
// Returns the exit status: 0, or 1 when it could not listen or serve the admin endpoint (said on
// stderr). Main thread, once; blocks the stop signals in every thread it starts.
int serve(const EchoConfig& config);

}  // namespace tern::echo
