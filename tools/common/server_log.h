#pragma once

// How tern's servers (tern-echo, tern-rpc-server) log: the asynchronous writer to stderr with
// Policy::drop, so that no log call on a worker waits for the log, even with stderr on a pipe
// nobody drains; lines a peer causes are rate-limited as well (tern/log/peer_log.h).

#include <cstdio>

#include "tern/log/log.h"

namespace tern::tools {

// Starts the asynchronous logger (stderr, INFO, drop when behind). False after printing why it
// could not, naming `tool`. Main thread, before the runtime starts.
inline bool start_server_log(const char* tool) {
  Result<void> started = log::init({.policy = log::Policy::drop});
  if (started) return true;
  std::fprintf(stderr, "%s: cannot start the logger: %s\n", tool,
               started.error().message().c_str());
  return false;
}

}  // namespace tern::tools
