#pragma once

// Child processes for the tern-bench end-to-end tests: a server that prints its port on its first
// line (tern-echo), and a tool run to completion with its output captured. Used from the test's
// main thread only.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern char** environ;

namespace tern::test {

// Starts `args` with stdout on a pipe (and stderr on `stderr_path` when given); returns the pid
// and the pipe's read end, or pid -1.
inline pid_t spawn_with_pipe(std::vector<std::string> args, int* out_fd,
                             const std::string& stderr_path = {}) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  if (!stderr_path.empty())
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  if (::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    return -1;
  }
  *out_fd = out[0];
  return pid;
}

// Waits for pid and returns its exit status (128 + signal if killed).
inline int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// What a finished tool printed and how it exited.
struct ToolRun {
  int status = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Runs a tool to completion, killing it after `limit`.
inline ToolRun run_tool(std::vector<std::string> args,
                        std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  char err_path[] = "/tmp/tern_bench_test_stderr_XXXXXX";
  const int err_fd = ::mkstemp(err_path);
  if (err_fd >= 0) ::close(err_fd);
  ToolRun run;
  int out_fd = -1;
  const pid_t pid = spawn_with_pipe(std::move(args), &out_fd, err_path);
  if (pid < 0) {
    run.err = "cannot start the tool";
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buf[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      run.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p = {out_fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t n = ::read(out_fd, buf, sizeof buf);
    if (n <= 0) break;
    run.out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out_fd);
  run.status = reap(pid);
  std::ifstream err(err_path);
  run.err.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
  ::unlink(err_path);
  return run;
}

// Waits up to `limit` for pid to exit (through a pidfd, no polling); true once it has. The
// child stays unreaped.
inline bool wait_exit(pid_t pid, std::chrono::milliseconds limit) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) return true;  // already reaped, or no pidfd: reap() decides
  pollfd p = {pidfd, POLLIN, 0};
  int ready = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (ready >= 0 || errno != EINTR) break;
  }
  ::close(pidfd);
  return ready > 0;
}

// Prints what every thread of pid is doing to stderr, for a process that hangs: each thread's
// state and kernel wait channel from /proc, then the user-space stacks (gdb in batch mode).
inline void dump_stacks(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string command =
      "for t in " + proc + "/task/*; do echo \"thread $(basename $t) $(cat $t/comm):" +
      " $(grep State: $t/status) wchan=$(cat $t/wchan)\"; cat $t/stack 2>/dev/null; done 1>&2;" +
      " gdb -p " + std::to_string(pid) + " -batch -nx -ex 'thread apply all bt' </dev/null 1>&2";
  std::fprintf(stderr, "what the hung process %d does:\n", static_cast<int>(pid));
  std::fflush(stderr);
  (void)std::system(command.c_str());
}

// A server process that prints "...listening on 127.0.0.1:PORT..." on its first line; SIGTERM
// and reaped on destruction. Every wait has a deadline: a server that does not print its line
// or does not exit on SIGTERM in time fails the test, has its stacks dumped, and is killed.
class ServerProcess {
 public:
  static constexpr std::chrono::seconds kPatience{60};

  explicit ServerProcess(std::vector<std::string> args) {
    pid_ = spawn_with_pipe(std::move(args), &output_);
    if (pid_ < 0) return;
    first_line_ = read_first_line();
    const std::size_t at = first_line_.find("127.0.0.1:");
    if (at != std::string::npos) port_ = std::atoi(first_line_.c_str() + at + 10);
  }
  ~ServerProcess() {
    (void)stop();
    if (output_ >= 0) ::close(output_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Sends SIGTERM, waits for the exit and returns the exit status (0: a clean shutdown).
  int stop() { return finish(true); }
  // Waits for the server to exit by itself and returns its exit status.
  int wait() { return finish(false); }
  // Kills the server with SIGKILL (no chance to close anything itself) and reaps it; its exit
  // status.
  int kill_now() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);  // never kill(-1): that signals every process
    return finish(false);
  }
  // Sends sig to the server (SIGSTOP freezes it, SIGCONT resumes it); nothing once it is gone.
  void signal(int sig) {
    if (pid_ <= 0) return;
    if (sig == SIGSTOP || sig == SIGCONT) stopped_ = sig == SIGSTOP;
    ::kill(pid_, sig);
  }

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }
  // The last line the server printed (known once it has exited).
  const std::string& last_line() const { return last_line_; }

 private:
  int finish(bool terminate) {
    if (pid_ <= 0) return exit_status_;
    if (terminate) {
      // Resume a server the test left stopped first, never after SIGTERM: a SIGCONT that lands
      // while the exiting server is being ptrace-attached (LeakSanitizer's exit-time check
      // stops every thread that way) discards the attach's SIGSTOP, and the check waits forever.
      if (stopped_) ::kill(pid_, SIGCONT);
      ::kill(pid_, SIGTERM);
    }
    if (!wait_exit(pid_, kPatience))
      give_up(terminate ? "did not exit within 60 s of SIGTERM" : "did not exit within 60 s");
    exit_status_ = reap(pid_);
    pid_ = -1;
    read_last_line();
    return exit_status_;
  }

  // Reads what the exited server left in the pipe, keeping its last line.
  void read_last_line() {
    std::string rest;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(output_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      rest.append(buf, static_cast<std::size_t>(n));
    }
    while (!rest.empty() && rest.back() == '\n') rest.pop_back();
    last_line_ = rest.substr(rest.rfind('\n') == std::string::npos ? 0 : rest.rfind('\n') + 1);
  }

  // The server's first line of output, read within kPatience ("" if it exits or stalls first).
  std::string read_first_line() {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p = {output_, POLLIN, 0};
      const int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        give_up("printed no first line within 60 s (so far: \"" + line + "\")");
        return line;
      }
      char c = 0;
      const ssize_t n = ::read(output_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0 || c == '\n') return line;
      line.push_back(c);
    }
  }

  // Fails the test naming the stalled wait, dumps the server's stacks and kills it.
  void give_up(const std::string& what) {
    ADD_FAILURE() << "server process " << pid_ << " " << what;
    dump_stacks(pid_);
    ::kill(pid_, SIGKILL);
  }

  pid_t pid_ = -1;
  int output_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  bool stopped_ = false;  // the test sent SIGSTOP and no SIGCONT yet
  std::string first_line_;
  std::string last_line_;
};

}  // namespace tern::test
