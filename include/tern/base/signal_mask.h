#pragma once

#include <signal.h>

namespace tern {

// While it lives, blocks in the calling thread the asynchronous signals a program handles itself
// (SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH, SIGTSTP), so a
// thread started meanwhile begins with them blocked and a signal sent to the process reaches one
// of the program's threads, never one of tern's (the log writer, runtime workers, the offload
// pool). The synchronous signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: crash and stack
// overflow handlers need them), SIGPIPE, SIGPROF and the real-time signals keep the caller's mask.
// Any thread; destroy (or restore()) on the thread that created it.
class ProcessSignalsBlocked {
 public:
  ProcessSignalsBlocked() noexcept;
  ~ProcessSignalsBlocked() { restore(); }
  ProcessSignalsBlocked(const ProcessSignalsBlocked&) = delete;
  ProcessSignalsBlocked& operator=(const ProcessSignalsBlocked&) = delete;

  // Puts the caller's mask back (once; the destructor then does nothing).
  void restore() noexcept;

 private:
  sigset_t previous_;
  bool restored_ = false;
};

}  // namespace tern
