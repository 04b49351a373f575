#pragma once

// A redis-server of the test's own on a free loopback port. Redis cannot listen on port 0, so a
// port the kernel just handed out is tried, and the start retried on another one if it clashes.

#include <cstdint>
#include <memory>
#include <string>

#include "child_process.h"
#include "hook_test_util.h"

namespace hook_test {

class RedisServer {
 public:
  // Starts it and waits until it accepts connections. Plain threads only.
  RedisServer() {
    for (int attempt = 0; attempt < 5 && process_ == nullptr; ++attempt) {
      {
        const Listener probe;
        port_ = probe.port;
      }
      auto process = std::make_unique<ChildProcess>(
          std::vector<std::string>{TERN_REDIS_SERVER, "--port", std::to_string(port_), "--bind",
                                   "127.0.0.1", "--save", "", "--appendonly", "no",
                                   "--protected-mode", "no", "--maxclients", "4096"},
          "Ready to accept connections");
      if (process->started()) {
        process_ = std::move(process);
      } else {
        output_ = process->output();
      }
    }
  }

  // Whether it is up; if not, what it said.
  bool started() const noexcept { return process_ != nullptr; }
  const std::string& output() const noexcept { return output_; }
  std::uint16_t port() const noexcept { return port_; }
  // SIGKILL now. Any thread.
  void kill() noexcept {
    if (process_ != nullptr) process_->kill();
  }

 private:
  std::uint16_t port_ = 0;
  std::unique_ptr<ChildProcess> process_;
  std::string output_;
};

}  // namespace hook_test
