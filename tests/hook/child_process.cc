// ChildProcess: fork/exec with the child's standard output on a pipe, read until the ready line.
#include "child_process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <set>

namespace hook_test {

namespace {

// Every child still running, for the environment that kills them at the end of the program.
std::mutex children_lock;
std::set<pid_t>& children() {
  static std::set<pid_t> running;
  return running;
}

class KillChildren final : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::lock_guard lock(children_lock);
    for (const pid_t pid : children()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    children().clear();
  }
};

[[maybe_unused]] ::testing::Environment* const kill_children =
    ::testing::AddGlobalTestEnvironment(new KillChildren);

}  // namespace

ChildProcess::ChildProcess(std::vector<std::string> argv, const std::string& ready_text,
                           std::chrono::milliseconds timeout) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return;
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before the prctl took effect
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  out_ = pipe_fds[0];
  if (pid_ < 0) return;
  {
    const std::lock_guard lock(children_lock);
    children().insert(pid_);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string pending;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return;
    pollfd readable = {.fd = out_, .events = POLLIN, .revents = 0};
    if (::poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(out_, buf, sizeof buf);
    if (n <= 0) return;  // the process ended (a port already taken, a bad argument)
    pending.append(buf, static_cast<std::size_t>(n));
    for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
      std::string line = pending.substr(0, end);
      pending.erase(0, end + 1);
      output_ += line + "\n";
      if (line.find(ready_text) != std::string::npos) {
        ready_line_ = line;
        started_ = true;
        return;
      }
    }
  }
}

ChildProcess::~ChildProcess() {
  kill();
  if (out_ >= 0) ::close(out_);
}

void ChildProcess::kill() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  {
    const std::lock_guard lock(children_lock);
    children().erase(pid_);
  }
  pid_ = -1;
}

}  // namespace hook_test
