#pragma once

// A server process a test starts itself (redis-server, a Python HTTP server): started with
// fork/exec from a plain thread, ready once a line of its standard output contains the text the
// test waits for, killed (SIGKILL) and reaped when the object goes away, when the test process
// dies (PR_SET_PDEATHSIG) and, should a test forget, at the end of the test program.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace hook_test {

class ChildProcess {
 public:
  // Starts argv and waits (up to `timeout`) for a line of its standard output that contains
  // `ready_text`; that line is kept (ready_line()). started() says whether it came. Plain
  // threads only (not a worker: the wait blocks).
  ChildProcess(std::vector<std::string> argv, const std::string& ready_text,
               std::chrono::milliseconds timeout = std::chrono::seconds(20));
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  // Whether the process printed its ready line and was running then.
  bool started() const noexcept { return started_; }
  // The line that said it was ready, and what it printed before (for failure messages).
  const std::string& ready_line() const noexcept { return ready_line_; }
  const std::string& output() const noexcept { return output_; }
  // Kills the process with SIGKILL now and reaps it. Any thread; idempotent.
  void kill() noexcept;

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool started_ = false;
  std::string ready_line_;
  std::string output_;
};

}  // namespace hook_test
