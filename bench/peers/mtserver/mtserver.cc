// mtserver: the thread-per-connection server of report 000 (its `mtServer`) and the blocking
// server of the ttcp table (report 002): a blocking accept loop that gives every connection a
// thread of its own doing blocking reads and writes.
//
//   mtserver [--host 127.0.0.1] [--port 0] [--mode echo|ttcp] [--buf 16384] [--duration 0]
//
// --mode echo writes back every byte it reads. --mode ttcp speaks the ttcp protocol: each
// message is a 4-byte big-endian length and that many payload bytes, answered by a 4-byte ack
// holding the length once the whole payload is read (stop-and-wait). Prints
// "mtserver: listening on HOST:PORT (...)" once it accepts; stops on SIGINT/SIGTERM or after
// --duration seconds (closing every connection and joining its thread), exit status 0.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

namespace {

// Small stacks let thousands of connection threads start quickly; echo needs only its buffer,
// which lives on the heap.
constexpr std::size_t kThreadStack = 256 * 1024;

struct Config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string mode = "echo";
  std::size_t buf = 16 * 1024;
  std::size_t max_message = 64 << 20;
  double duration = 0;
};

// The live connections, so a stop can shut them down and wait for their threads. Touched only
// when a connection starts or ends, never per message.
class Registry {
 public:
  // Records fd as live; false once stopping (the caller then closes fd). Any thread.
  bool add(int fd) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    fds_.insert(fd);
    return true;
  }

  // Forgets fd and closes it; called by the connection's thread as it ends.
  void remove_and_close(int fd) {
    std::lock_guard lock(mutex_);
    fds_.erase(fd);
    ::close(fd);
    if (fds_.empty()) drained_.notify_all();
  }

  // Shuts every live connection down (their blocking calls return) and waits for them to end.
  void stop_all() {
    std::unique_lock lock(mutex_);
    stopping_ = true;
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    drained_.wait(lock, [this] { return fds_.empty(); });
  }

 private:
  std::mutex mutex_;
  std::condition_variable drained_;
  std::unordered_set<int> fds_;
  bool stopping_ = false;
};

// Writes all of bytes; false on an error or a closed peer.
bool write_all(int fd, const std::byte* bytes, std::size_t len) {
  while (len > 0) {
    const ssize_t n = ::send(fd, bytes, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

// Reads exactly len bytes; false on an error or the end of the stream.
bool read_exact(int fd, std::byte* bytes, std::size_t len) {
  while (len > 0) {
    const ssize_t n = ::recv(fd, bytes, len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes += n;
    len -= static_cast<std::size_t>(n);
  }
  return true;
}

void serve_echo(int fd, std::size_t buf_size) {
  std::vector<std::byte> buf(buf_size);
  for (;;) {
    const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || !write_all(fd, buf.data(), static_cast<std::size_t>(n))) return;
  }
}

// ttcp: length, payload, ack with the length; until the client closes between messages.
void serve_ttcp(int fd, std::size_t max_message) {
  std::array<std::byte, 4> header;
  std::vector<std::byte> payload;
  while (read_exact(fd, header.data(), header.size())) {
    std::uint32_t length_be;
    std::memcpy(&length_be, header.data(), sizeof length_be);
    const std::size_t length = ntohl(length_be);
    if (length > max_message) return;
    if (payload.size() < length) payload.resize(length);
    if (!read_exact(fd, payload.data(), length)) return;
    if (!write_all(fd, header.data(), header.size())) return;
  }
}

struct Connection {
  int fd;
  const Config* config;
  Registry* registry;
};

void* run_connection(void* arg) {
  const Connection connection = *static_cast<Connection*>(arg);
  delete static_cast<Connection*>(arg);
  if (connection.config->mode == "ttcp") {
    serve_ttcp(connection.fd, connection.config->max_message);
  } else {
    serve_echo(connection.fd, connection.config->buf);
  }
  connection.registry->remove_and_close(connection.fd);
  return nullptr;
}

// Starts a detached thread for fd; closes fd if no thread can be had, and says so on stderr
// (the first time and every 1,000th), since the client then sees its connection reset.
void start_connection(int fd, const Config& config, Registry& registry, pthread_attr_t& attr) {
  if (!registry.add(fd)) {
    ::close(fd);
    return;
  }
  auto* connection = new Connection{fd, &config, &registry};
  pthread_t thread;
  if (const int error = ::pthread_create(&thread, &attr, run_connection, connection); error != 0) {
    delete connection;
    registry.remove_and_close(fd);
    static std::size_t refused = 0;
    if (refused++ % 1000 == 0) {
      std::fprintf(stderr, "mtserver: no thread for a connection (%s), closed it (%zu so far)\n",
                   std::strerror(error), refused);
    }
  }
}

// Waits for SIGINT/SIGTERM (blocked in every thread) or the duration, then wakes the blocked
// accept by shutting the listener down.
void wait_for_stop(int listener, double duration, std::atomic<bool>& stopping) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration);
  for (;;) {
    timespec timeout{1, 0};
    if (duration > 0) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) break;
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timeout = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    }
    const int received = ::sigtimedwait(&signals, nullptr, &timeout);
    if (received == SIGINT || received == SIGTERM) break;
  }
  stopping.store(true);
  ::shutdown(listener, SHUT_RDWR);
}

void raise_fd_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// A blocking listener on host:port; fills `bound` with the address it got.
int listen_on(const Config& config, sockaddr_storage& bound) {
  sockaddr_storage address{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, config.host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(config.port);
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, config.host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(config.port);
    length = sizeof *v6;
  } else {
    std::fprintf(stderr, "mtserver: --host %s: not an IP address\n", config.host.c_str());
    return -1;
  }
  const int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int on = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(fd, SOMAXCONN) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    std::fprintf(stderr, "mtserver: listen on %s:%u: %s\n", config.host.c_str(), config.port,
                 std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return -1;
  }
  return fd;
}

std::string describe(const sockaddr_storage& address) {
  char host[INET6_ADDRSTRLEN] = "?";
  unsigned port = 0;
  if (address.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  CLI::App app{
      "mtserver: a thread-per-connection server with blocking sockets (the mtServer of report\n"
      "000; with --mode ttcp the blocking server of report 002's ttcp). Prints\n"
      "'mtserver: listening on HOST:PORT' when ready; stops on SIGINT/SIGTERM or after\n"
      "--duration seconds."};
  app.add_option("--host", config.host, "IPv4/IPv6 address to listen on")->capture_default_str();
  app.add_option("-p,--port", config.port, "TCP port (0: the kernel picks; printed at start)")
      ->capture_default_str();
  app.add_option("--mode", config.mode,
                 "echo: write back every byte read; ttcp: ack each 4-byte-length-prefixed "
                 "message with its length")
      ->check(CLI::IsMember({"echo", "ttcp"}))
      ->capture_default_str();
  app.add_option("-b,--buf", config.buf, "echo: read buffer per connection, bytes")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-message", config.max_message,
                 "ttcp: longest payload accepted; a longer one closes the connection")
      ->capture_default_str();
  app.add_option("--duration", config.duration, "stop after this many seconds (0: on a signal)");
  CLI11_PARSE(app, argc, argv);

  raise_fd_limit();
  // Blocked here, before any thread starts, so every thread inherits the mask and only
  // sigtimedwait in the stop thread takes these signals.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  sockaddr_storage bound{};
  const int listener = listen_on(config, bound);
  if (listener < 0) return 1;
  std::atomic<bool> stopping{false};
  std::thread stopper(wait_for_stop, listener, config.duration, std::ref(stopping));

  pthread_attr_t attr;
  ::pthread_attr_init(&attr);
  ::pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  ::pthread_attr_setstacksize(&attr, kThreadStack);

  std::printf("mtserver: listening on %s (thread per connection, mode %s, buf %zu)\n",
              describe(bound).c_str(), config.mode.c_str(), config.buf);
  std::fflush(stdout);

  Registry registry;
  int status = 0;
  for (;;) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      if (!stopping.load()) {
        // Not the stop thread's doing: report it and let the stop thread end the run.
        std::fprintf(stderr, "mtserver: accept: %s\n", std::strerror(errno));
        status = 1;
        ::kill(::getpid(), SIGTERM);
      }
      break;
    }
    const int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    start_connection(fd, config, registry, attr);
  }
  stopper.join();
  registry.stop_all();
  ::pthread_attr_destroy(&attr);
  ::close(listener);
  std::printf("mtserver: stopped\n");
  return status;
}
