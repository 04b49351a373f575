#pragma once

// Child processes for the tern-bench end-to-end tests: a server that prints its port on its first
// line (tern-echo), and a tool run to completion with its output captured. Used from the test's
// main thread only.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// A server process that prints "...listening on 127.0.0.1:PORT..." on its first line; SIGTERM
// and reaped on destruction.
class ServerProcess {
 public:
  explicit ServerProcess(std::vector<std::string> args) {
    int out_fd = -1;
    pid_ = spawn_with_pipe(std::move(args), &out_fd);
    if (pid_ < 0) return;
    output_ = ::fdopen(out_fd, "r");
    char line[512] = {};
    if (std::fgets(line, sizeof line, output_) != nullptr) {
      first_line_ = line;
      const std::size_t at = first_line_.find("127.0.0.1:");
      if (at != std::string::npos) port_ = std::atoi(first_line_.c_str() + at + 10);
    }
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::kill(pid_, SIGCONT);  // in case a test left it stopped
      reap(pid_);
    }
    if (output_ != nullptr) std::fclose(output_);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // Kills the server with SIGKILL (no chance to close anything itself) and reaps it; its exit
  // status.
  int kill_now() {
    ::kill(pid_, SIGKILL);
    const int status = reap(pid_);
    pid_ = -1;
    return status;
  }
  // Sends sig to the server (SIGSTOP freezes it, SIGCONT resumes it).
  void signal(int sig) { ::kill(pid_, sig); }

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  const std::string& first_line() const { return first_line_; }

 private:
  pid_t pid_ = -1;
  FILE* output_ = nullptr;
  int port_ = 0;
  std::string first_line_;
};

}  // namespace tern::test
