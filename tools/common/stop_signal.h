#pragma once

#include <signal.h>
#include <sys/signalfd.h>

#include <span>

#include "tern/io/io.h"

// SIGINT and SIGTERM for tool servers that stop cleanly: block them in every thread (before the
// runtime starts its workers), then let one fiber wait for them through a signalfd.
namespace tern::tools {

// The signals that stop a server.
inline sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// Blocks SIGINT and SIGTERM in the calling thread and the threads it starts later. From main,
// before the runtime starts.
inline void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

// Waits for SIGINT or SIGTERM without blocking the worker; returns early if the fiber is
// interrupted. From a worker fiber, after block_stop_signals().
inline void wait_for_stop_signal() {
  const sigset_t set = stop_signals();
  const int fd = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd < 0) return;
  signalfd_siginfo info;
  (void)io::read(fd, std::as_writable_bytes(std::span(&info, 1)));
  io::close(fd);
}

}  // namespace tern::tools
