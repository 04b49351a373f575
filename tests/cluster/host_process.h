#pragma once

// A program the cluster tests run inside one of their hosts (a test server, an etcd member): its
// standard output and error go to a log file, which the test reads to know when it is ready.
// Killed (SIGKILL) and reaped when the object goes away. Every call blocks the calling thread:
// from a worker fiber, run them through tern::io::offload.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace cluster_test {

class HostProcess {
 public:
  // Starts argv (Network::in_host's) with its output appended to `log_path`; running() says
  // whether it started.
  HostProcess(std::vector<std::string> argv, std::string log_path);
  HostProcess(const HostProcess&) = delete;
  HostProcess& operator=(const HostProcess&) = delete;
  ~HostProcess();

  // Whether the process has started and not been reaped.
  bool running() const noexcept { return pid_ > 0; }
  pid_t pid() const noexcept { return pid_; }
  // Waits until the log holds `text` past the log's first `from` bytes; false at the timeout or
  // when the process exits first.
  bool wait_for_output(std::string_view text, std::chrono::milliseconds timeout,
                       std::size_t from = 0) const;
  // The whole log so far (for failure messages and to find printed values).
  std::string log() const;
  // Sends `signal` (SIGSTOP, SIGCONT, ...) without waiting.
  void signal(int signal) const noexcept;
  // SIGKILL, then reaps. Idempotent.
  void kill() noexcept;
  // SIGTERM, then waits up to `grace` for the exit (SIGKILL after it); returns the exit status,
  // or -1 when it had to be killed.
  int terminate(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
  std::string log_path_;
};

}  // namespace cluster_test
