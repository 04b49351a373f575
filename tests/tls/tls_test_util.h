// Helpers of the TLS tests (tests/tls): certificates made with the openssl command line in a
// temporary folder, child processes (openssl s_client and s_server, python3) that are always
// stopped, and loopback servers.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tern/net/address.h"
#include "tern/net/tcp_listener.h"

extern char** environ;

namespace tern_tls_test {

// Runs a command to its end (no shell), its output thrown away; returns its exit status, or -1.
// Any thread (blocks it).
inline int run(const std::vector<std::string>& argv, const std::string& log = "/dev/null") {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A child process with pipes to its stdin and from its stdout and stderr (merged), killed
// (SIGKILL) and reaped when this is destroyed, so a failing test never leaves it behind.
// Blocking calls: from an offload thread or before the runtime starts.
class Child {
 public:
  explicit Child(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, out[1], 2);
    if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    stdin_ = in[1];
    stdout_ = out[0];
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    close_stdin();
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      (void)wait();
    }
    if (stdout_ >= 0) ::close(stdout_);
  }

  bool started() const { return pid_ > 0; }
  void write(std::string_view text) {
    while (!text.empty() && stdin_ >= 0) {
      const ssize_t n = ::write(stdin_, text.data(), text.size());
      if (n <= 0) return;
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  // Reads output until it contains `marker`, the output ends or `timeout` passes; true if seen.
  bool read_until(std::string_view marker, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (output_.find(marker) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd ready = {stdout_, POLLIN, 0};
      if (::poll(&ready, 1, static_cast<int>(left.count())) <= 0) continue;
      char buffer[4096];
      const ssize_t n = ::read(stdout_, buffer, sizeof buffer);
      if (n <= 0) return output_.find(marker) != std::string::npos;
      output_.append(buffer, static_cast<std::size_t>(n));
    }
    return true;
  }
  // Reads all output until the child closes it (or `timeout`), then reaps it; its exit status.
  int finish(std::chrono::milliseconds timeout) {
    read_until(std::string_view("\x01\x02 never printed"), timeout);
    ::kill(pid_, SIGKILL);  // a no-op when it has exited
    return wait();
  }
  const std::string& output() const { return output_; }

 private:
  int wait() {
    int status = 0;
    const pid_t pid = std::exchange(pid_, -1);
    if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
    if (exited_ = WIFEXITED(status); exited_) return WEXITSTATUS(status);
    return -1;
  }
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  bool exited_ = false;
  std::string output_;
};

// A free loopback port, for peers that need one on their command line (a port the kernel just
// handed out and released).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0)
    port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

// Test certificates, made once per test binary in a temporary folder with the openssl command
// line (ECDSA P-256): a CA; "server" (localhost, 127.0.0.1, O=gen1) and "server2" (the same
// names, O=gen2, for reloads); "alt" (alt.example, for SNI); "client" (client.tern.test);
// "expired" (localhost, expired yesterday); "wronghost" (other.example); "selfsigned"
// (localhost, signed by itself); "otherca_client" (a client signed by an unknown CA);
// "intermediate" (a CA signed by the CA) and "chained" (localhost, signed by the intermediate),
// with "chained_full.crt" (the leaf, then the intermediate) and "ca_and_intermediate.crt".
class Certs {
 public:
  static const Certs& get() {
    static const Certs certs;
    return certs;
  }
  std::string dir;
  std::string ca() const { return dir + "/ca.crt"; }
  std::string crt(const std::string& name) const { return dir + "/" + name + ".crt"; }
  std::string key(const std::string& name) const { return dir + "/" + name + ".key"; }
  bool ok = false;

 private:
  Certs() {
    char pattern[] = "/tmp/tern-tls-XXXXXX";
    if (mkdtemp(pattern) == nullptr) return;
    dir = pattern;
    const std::string log = dir + "/openssl.log";
    ok =
        authority("ca", "/CN=tern test CA", log) && authority("otherca", "/CN=other CA", log) &&
        leaf("server", "/O=gen1/CN=localhost", "DNS:localhost,IP:127.0.0.1", "ca", "30", log) &&
        leaf("server2", "/O=gen2/CN=localhost", "DNS:localhost,IP:127.0.0.1", "ca", "30", log) &&
        leaf("alt", "/CN=alt.example", "DNS:alt.example", "ca", "30", log) &&
        leaf("client", "/O=tern/CN=client", "DNS:client.tern.test", "ca", "30", log) &&
        leaf("expired", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", "ca", "-1", log) &&
        leaf("wronghost", "/CN=other.example", "DNS:other.example", "ca", "30", log) &&
        leaf("otherca_client", "/CN=stranger", "DNS:stranger.example", "otherca", "30", log) &&
        intermediate("intermediate", "/CN=tern test intermediate", "ca", log) &&
        leaf("chained", "/CN=localhost", "DNS:localhost,IP:127.0.0.1", "intermediate", "30", log) &&
        concatenate({crt("chained"), crt("intermediate")}, dir + "/chained_full.crt") &&
        concatenate({ca(), crt("intermediate")}, dir + "/ca_and_intermediate.crt") &&
        run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key("selfsigned"), "-out", crt("selfsigned"), "-days", "30",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"},
            log) == 0;
    if (!ok) ADD_FAILURE() << "openssl could not make the test certificates: " << read_file(log);
  }
  ~Certs() {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
  bool authority(const std::string& name, const std::string& subject, const std::string& log) {
    return run({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", key(name), "-out", crt(name), "-days", "30", "-subj", subject},
               log) == 0;
  }
  // A CA certificate signed by `ca`.
  bool intermediate(const std::string& name, const std::string& subject, const std::string& ca,
                    const std::string& log) {
    const std::string csr = dir + "/" + name + ".csr";
    const std::string ext = dir + "/" + name + ".ext";
    std::ofstream(ext) << "basicConstraints=critical,CA:TRUE\n"
                       << "keyUsage=critical,keyCertSign,cRLSign\n";
    return run({"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", key(name), "-out", csr, "-subj", subject},
               log) == 0 &&
           run({"openssl", "x509", "-req", "-in", csr, "-CA", crt(ca), "-CAkey", key(ca),
                "-set_serial", "99", "-days", "30", "-extfile", ext, "-out", crt(name)},
               log) == 0;
  }
  // Writes the files' contents one after the other to `out`.
  static bool concatenate(const std::vector<std::string>& files, const std::string& out) {
    std::ofstream output(out);
    for (const std::string& file : files) output << read_file(file);
    return static_cast<bool>(output);
  }
  bool leaf(const std::string& name, const std::string& subject, const std::string& names,
            const std::string& ca, const std::string& days, const std::string& log) {
    const std::string csr = dir + "/" + name + ".csr";
    const std::string ext = dir + "/" + name + ".ext";
    std::ofstream(ext) << "subjectAltName=" << names << "\n";
    static int serial = 100;
    return run({"openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", key(name), "-out", csr, "-subj", subject},
               log) == 0 &&
           run({"openssl", "x509", "-req", "-in", csr, "-CA", crt(ca), "-CAkey", key(ca),
                "-set_serial", std::to_string(++serial), "-days", days, "-extfile", ext, "-out",
                crt(name)},
               log) == 0;
  }
};

}  // namespace tern_tls_test
