// HostProcess: posix_spawnp with the output on a log file, waits through a pidfd.
#include "host_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "tools/tern_bench_process.h"

namespace cluster_test {

HostProcess::HostProcess(std::vector<std::string> argv, std::string log_path)
    : log_path_(std::move(log_path)) {
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  if (::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ) == 0) pid_ = pid;
  posix_spawn_file_actions_destroy(&actions);
}

HostProcess::~HostProcess() { kill(); }

std::string HostProcess::log() const {
  std::ifstream in(log_path_);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool HostProcess::wait_for_output(std::string_view text, std::chrono::milliseconds timeout,
                                  std::size_t from) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::string now = log();
    if (now.size() > from && now.find(text, from) != std::string::npos) return true;
    if (pid_ <= 0 || std::chrono::steady_clock::now() >= deadline) return false;
    // Exited (the pidfd is readable): one last look at what it wrote.
    if (tern::test::wait_exit(pid_, std::chrono::milliseconds(5))) {
      const std::string last = log();
      return last.size() > from && last.find(text, from) != std::string::npos;
    }
  }
}

void HostProcess::signal(int signal) const noexcept {
  if (pid_ > 0) ::kill(pid_, signal);
}

void HostProcess::kill() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  (void)tern::test::reap(pid_);
  pid_ = -1;
}

int HostProcess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  if (!tern::test::wait_exit(pid_, grace)) {
    kill();
    return -1;
  }
  const int status = tern::test::reap(pid_);
  pid_ = -1;
  return status;
}

}  // namespace cluster_test
