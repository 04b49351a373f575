#include "tern/base/signal_mask.h"

#include <pthread.h>

#include <initializer_list>

namespace tern {

ProcessSignalsBlocked::ProcessSignalsBlocked() noexcept {
  sigset_t set;
  ::sigemptyset(&set);
  for (const int signal :
       {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGCHLD, SIGWINCH, SIGTSTP})
    ::sigaddset(&set, signal);
  ::pthread_sigmask(SIG_BLOCK, &set, &previous_);
}

void ProcessSignalsBlocked::restore() noexcept {
  if (restored_) return;
  restored_ = true;
  ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace tern
