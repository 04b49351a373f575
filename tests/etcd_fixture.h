#pragma once

// A real etcd of the test's own: started on free ports of a loopback (or namespace) address with
// a fresh data directory, ready once GET /health says so, killed (SIGKILL) and its directory
// removed when the object goes away, and killed when the test process dies (PR_SET_PDEATHSIG).
// Its log goes to a file whose tail log_tail() returns for failure messages. Blocking: call it
// from a plain thread, or from a fiber through tern::io::offload.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace tern_test {

class EtcdServer {
 public:
  // Starts `binary` (the etcd found at configure time unless given) on `host` and waits up to
  // `timeout` for it to be healthy; started() says whether it is.
  explicit EtcdServer(std::string host = "127.0.0.1", std::string binary = default_binary(),
                      std::chrono::milliseconds timeout = std::chrono::seconds(20))
      : host_(std::move(host)), binary_(std::move(binary)) {
    char dir[] = "/tmp/tern-etcd-XXXXXX";
    if (::mkdtemp(dir) == nullptr) return;
    dir_ = dir;
    for (int attempt = 0; attempt < 3 && !started_; ++attempt) {
      client_port_ = free_port();
      peer_port_ = free_port();
      started_ = launch(timeout);
    }
  }
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;
  ~EtcdServer() {
    kill();
    if (!dir_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  bool started() const noexcept { return started_; }
  // "host:port" of its client URL, as tern's etcd:// targets and registry options take it.
  std::string endpoint() const { return host_ + ":" + std::to_string(client_port_); }
  std::uint16_t client_port() const noexcept { return client_port_; }

  // SIGKILL now and reap it; the data directory stays for restart(). Idempotent.
  void kill() noexcept {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Starts it again on the same ports and data; whether it became healthy.
  bool restart(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    kill();
    started_ = launch(timeout);
    return started_;
  }

  // The last lines it logged.
  std::string log_tail(std::size_t bytes = 4000) const {
    std::ifstream in(dir_ + "/etcd.log");
    std::stringstream all;
    all << in.rdbuf();
    const std::string text = all.str();
    return text.size() > bytes ? text.substr(text.size() - bytes) : text;
  }

  // Whether GET /health answers {"health":"true"} within `timeout`.
  bool healthy(std::chrono::milliseconds timeout = std::chrono::milliseconds(500)) const {
    const std::string answer = http_get("/health", timeout);
    return answer.find("\"health\":\"true\"") != std::string::npos;
  }

  static std::string default_binary() {
#ifdef TERN_ETCD
    return TERN_ETCD;
#else
    return "etcd";
#endif
  }

 private:
  std::uint16_t free_port() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    ::inet_pton(AF_INET, host_.c_str(), &address.sin_addr);
    socklen_t length = sizeof address;
    std::uint16_t port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
      port = ntohs(address.sin_port);
    }
    ::close(fd);
    return port;
  }

  bool launch(std::chrono::milliseconds timeout) {
    const std::string client = "http://" + endpoint();
    const std::string peer = "http://" + host_ + ":" + std::to_string(peer_port_);
    std::vector<std::string> argv = {binary_,
                                     "--name=tern-test",
                                     "--data-dir=" + dir_ + "/data",
                                     "--listen-client-urls=" + client,
                                     "--advertise-client-urls=" + client,
                                     "--listen-peer-urls=" + peer,
                                     "--initial-advertise-peer-urls=" + peer,
                                     "--initial-cluster=tern-test=" + peer,
                                     "--logger=zap",
                                     "--log-outputs=stderr"};
    std::vector<char*> args;
    for (std::string& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    const int log =
        ::open((dir_ + "/etcd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      if (log >= 0) {
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
      }
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (log >= 0) ::close(log);
    if (pid_ < 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {  // it exited (a port taken, ...)
        pid_ = -1;
        return false;
      }
      if (healthy()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill();
    return false;
  }

  // The body of GET path, or "" when there is no complete answer within timeout.
  std::string http_get(const std::string& path, std::chrono::milliseconds timeout) const {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(client_port_);
    ::inet_pton(AF_INET, host_.c_str(), &address.sin_addr);
    std::string answer;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) {
      const std::string request =
          "GET " + path + " HTTP/1.1\r\nHost: " + endpoint() + "\r\nConnection: close\r\n\r\n";
      if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
          const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - std::chrono::steady_clock::now());
          pollfd readable = {.fd = fd, .events = POLLIN, .revents = 0};
          if (left.count() <= 0 || ::poll(&readable, 1, static_cast<int>(left.count())) <= 0) {
            answer.clear();
            break;
          }
          char buf[4096];
          const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
          if (n <= 0) break;
          answer.append(buf, static_cast<std::size_t>(n));
        }
      }
    }
    ::close(fd);
    return answer;
  }

  std::string host_;
  std::string binary_;
  std::string dir_;
  std::uint16_t client_port_ = 0;
  std::uint16_t peer_port_ = 0;
  pid_t pid_ = -1;
  bool started_ = false;
};

}  // namespace tern_test
