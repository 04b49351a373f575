// ttcp: the stop-and-wait benchmark of SEEDS.md 002, blocking threads against tern fibers.
//
//   ttcp [--messages 81920] [--length 1000] [--repeat 3] [--variants LIST] [--json PATH]
//
// A client sends --messages messages over loopback, each a 4-byte big-endian length followed
// by --length payload bytes, in one write, and waits for the server's 4-byte ack (the length,
// big-endian) before sending the next. The server reads the length, then the payload, checks
// both and acks. MiB/s = payload bytes / 2^20 / seconds, timed on the client from its first
// write to the last ack (connecting excluded). Every ack and every payload is checked; a
// mismatch fails the run (exit status 1).
//
// Variants (all in this process, run in turn --repeat times; the median is reported):
//   blocking       a server thread and a client thread on blocking sockets
//   tern-epoll-1   a tern Runtime with 1 worker running both the server and the client fiber
//   tern-epoll-2   2 workers: the server fiber on worker 0, the client fiber on worker 1
//   tern-uring-1, tern-uring-2   the same on the io_uring backend
// Placements (--placements): split pins the server's thread to the first usable CPU and the
// client's to the second; same pins both to the first; none leaves it to the kernel (whose
// choice, one CPU or two, changes the result several-fold on a VM). The one-thread variants
// run once, pinned to the first CPU, and are compared with blocking under "same".

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/address.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Every read and write gives up after this (0: never); no operation of a healthy run comes near
// it. Set by --timeout before any run starts.
std::chrono::seconds io_timeout = 60s;

tern::Deadline io_deadline() {
  return io_timeout.count() > 0 ? tern::deadline_after(io_timeout) : tern::kNoDeadline;
}

struct Config {
  std::size_t messages = 81920;
  std::size_t length = 1000;
  std::size_t repeat = 3;
  std::vector<std::string> variants = {"blocking", "tern-epoll-1", "tern-epoll-2", "tern-uring-1",
                                       "tern-uring-2"};
  std::vector<std::string> placements = {"split", "same"};
  std::string json;
};

// Which CPU the server's and the client's thread run on (-1: wherever the kernel puts them).
struct Placement {
  std::string name;
  int server_cpu = -1;
  int client_cpu = -1;
};

// Pins the calling thread to one CPU (cpu < 0: leaves it alone).
void pin_this_thread(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
    std::fprintf(stderr, "ttcp: cannot pin a thread to CPU %d\n", cpu);
}

// Restores the calling thread's CPU mask when it goes out of scope.
class AffinityGuard {
 public:
  AffinityGuard() { pthread_getaffinity_np(pthread_self(), sizeof saved_, &saved_); }
  ~AffinityGuard() { pthread_setaffinity_np(pthread_self(), sizeof saved_, &saved_); }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;

 private:
  cpu_set_t saved_;
};

// One timed run: seconds on success, or what went wrong.
struct Outcome {
  double seconds = 0;
  std::string error;
};

std::byte pattern_byte(std::size_t i) { return static_cast<std::byte>((i * 7 + 3) & 0xff); }

// The client's message: the length, big-endian, then the payload.
std::vector<std::byte> make_message(std::size_t length) {
  std::vector<std::byte> message(4 + length);
  tern::net::store_big_endian(message.data(), 4, length);
  for (std::size_t i = 0; i < length; ++i) message[4 + i] = pattern_byte(i);
  return message;
}

// A blocking socket with the two calls the protocol needs; false on error or end of stream.
struct BlockingStream {
  int fd = -1;
  bool read_exact(std::span<std::byte> buf) {
    while (!buf.empty()) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf = buf.subspan(static_cast<std::size_t>(n));
    }
    return true;
  }
  bool write_all(std::span<const std::byte> buf) {
    while (!buf.empty()) {
      const ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      buf = buf.subspan(static_cast<std::size_t>(n));
    }
    return true;
  }
};

// The same two calls on a tern stream, each bounded by io_timeout.
struct FiberStream {
  tern::net::TcpStream* stream;
  bool read_exact(std::span<std::byte> buf) {
    return static_cast<bool>(stream->read_exact(buf, io_deadline()));
  }
  bool write_all(std::span<const std::byte> buf) {
    return static_cast<bool>(stream->write_all(buf, io_deadline()));
  }
};

// The server side: answers `messages` messages; returns an error or "".
template <typename Stream>
std::string serve(Stream stream, const Config& config) {
  std::array<std::byte, 4> header;
  std::vector<std::byte> payload(config.length);
  const std::vector<std::byte> expected = make_message(config.length);
  for (std::size_t i = 0; i < config.messages; ++i) {
    if (!stream.read_exact(header)) return "server: header " + std::to_string(i) + " not read";
    const std::uint64_t length = tern::net::load_big_endian(header.data(), 4);
    if (length != config.length)
      return "server: message " + std::to_string(i) + " has length " + std::to_string(length);
    if (!stream.read_exact(payload)) return "server: payload " + std::to_string(i) + " not read";
    if (std::memcmp(payload.data(), expected.data() + 4, payload.size()) != 0)
      return "server: payload " + std::to_string(i) + " is corrupt";
    if (!stream.write_all(header)) return "server: ack " + std::to_string(i) + " not written";
  }
  return {};
}

// The client side: sends `messages` messages, each after the previous ack; times it.
template <typename Stream>
Outcome drive(Stream stream, const Config& config) {
  const std::vector<std::byte> message = make_message(config.length);
  std::array<std::byte, 4> ack;
  const Clock::time_point start = Clock::now();
  for (std::size_t i = 0; i < config.messages; ++i) {
    if (!stream.write_all(message))
      return {0, "client: message " + std::to_string(i) + " not sent"};
    if (!stream.read_exact(ack)) return {0, "client: ack " + std::to_string(i) + " not read"};
    if (std::memcmp(ack.data(), message.data(), 4) != 0)
      return {0, "client: ack " + std::to_string(i) + " does not match the length"};
  }
  return {std::chrono::duration<double>(Clock::now() - start).count(), {}};
}

void set_blocking_options(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (io_timeout.count() == 0) return;
  const timeval timeout = {static_cast<time_t>(io_timeout.count()), 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

// A server thread and a client thread on blocking loopback sockets.
Outcome run_blocking(const Config& config, const Placement& placement) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string error = std::string("blocking: listen: ") + std::strerror(errno);
    if (listener >= 0) ::close(listener);
    return {0, error};
  }
  std::string server_error;
  std::thread server([&] {
    pin_this_thread(placement.server_cpu);
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      server_error = std::string("server: accept: ") + std::strerror(errno);
      return;
    }
    set_blocking_options(fd);
    server_error = serve(BlockingStream{fd}, config);
    ::close(fd);
  });
  Outcome outcome;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
    outcome.error = std::string("client: connect: ") + std::strerror(errno);
    ::shutdown(listener, SHUT_RDWR);  // lets accept fail so the server thread ends
  } else {
    set_blocking_options(fd);
    std::thread client([&] {
      pin_this_thread(placement.client_cpu);
      outcome = drive(BlockingStream{fd}, config);
    });
    client.join();
  }
  if (fd >= 0) ::close(fd);
  server.join();
  ::close(listener);
  if (outcome.error.empty() && !server_error.empty()) outcome.error = server_error;
  return outcome;
}

// The server and client fibers in a tern Runtime with `workers` workers (1 or 2).
Outcome run_tern(const Config& config, tern::io::BackendChoice backend, std::size_t workers,
                 const Placement& placement) {
  tern::Runtime runtime({.workers = workers, .make_parker = tern::io::reactors(backend)});
  AffinityGuard restore;  // worker 0 is this thread
  return runtime.run([&]() -> Outcome {
    pin_this_thread(placement.server_cpu);
    tern::Result<tern::net::TcpListener> listener =
        tern::net::TcpListener::bind(tern::net::Address::loopback(0));
    if (!listener) return {0, "listen: " + listener.error().message()};
    tern::Result<tern::net::Address> bound = listener->local_address();
    if (!bound) return {0, "getsockname: " + bound.error().message()};
    std::string server_error;
    tern::Fiber server = tern::spawn(
        [&] {
          tern::Result<tern::net::TcpStream> stream = listener->accept(io_deadline());
          if (!stream) {
            server_error = "server: accept: " + stream.error().message();
            return;
          }
          (void)stream->set_nodelay();
          server_error = serve(FiberStream{&*stream}, config);
        },
        {.name = "ttcp-server"});
    Outcome outcome;
    tern::WaitGroup client_done;
    client_done.add();
    const std::size_t client_worker = workers > 1 ? 1 : 0;
    tern::Result<void> posted = tern::post(client_worker, [&] {
      if (client_worker != 0) pin_this_thread(placement.client_cpu);
      tern::Result<tern::net::TcpStream> stream =
          tern::net::TcpStream::connect(*bound, io_deadline());
      if (!stream) {
        outcome.error = "client: connect: " + stream.error().message();
      } else {
        (void)stream->set_nodelay();
        outcome = drive(FiberStream{&*stream}, config);
      }
      client_done.done();
    });
    if (!posted) {
      outcome.error = "cannot post the client fiber";
      client_done.done();
      listener->close();
    }
    while (!client_done.wait()) tern::this_fiber::yield();
    if (!outcome.error.empty()) listener->close();  // an accept still waiting ends
    server.join();
    if (outcome.error.empty() && !server_error.empty()) outcome.error = server_error;
    return outcome;
  });
}

Outcome run_variant(const std::string& name, const Placement& placement, const Config& config) {
  if (name == "blocking") return run_blocking(config, placement);
  const tern::io::BackendChoice backend = name.starts_with("tern-epoll")
                                              ? tern::io::BackendChoice::epoll
                                              : tern::io::BackendChoice::uring;
  return run_tern(config, backend, name.ends_with("-2") ? 2 : 1, placement);
}

// A variant in a placement: what one table row measures.
struct Row {
  std::string variant;
  Placement placement;
  std::vector<double> samples;  // MiB/s
};

// The rows to run: every variant in every placement, except that one-thread variants run once.
std::vector<Row> plan(const Config& config, const std::vector<int>& cpus) {
  std::vector<Placement> placements;
  for (const std::string& name : config.placements) {
    if (name == "split" && cpus.size() >= 2) placements.push_back({name, cpus[0], cpus[1]});
    if (name == "same" && !cpus.empty()) placements.push_back({name, cpus[0], cpus[0]});
    if (name == "none") placements.push_back({name, -1, -1});
  }
  std::vector<Row> rows;
  for (const std::string& variant : config.variants) {
    const bool one_thread = variant.ends_with("-1");
    bool ran_one_thread = false;
    for (const Placement& placement : placements) {
      if (one_thread && ran_one_thread) continue;
      Row row{variant, placement, {}};
      if (one_thread && placement.name != "none") row.placement.name = "same";
      rows.push_back(row);
      ran_one_thread = one_thread;
    }
  }
  return rows;
}

// The first usable CPUs of this process.
std::vector<int> usable_cpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  std::string variants;
  CLI::App app{
      "ttcp: SEEDS 002 stop-and-wait throughput over loopback, blocking threads vs tern fibers.\n"
      "Each message: 4-byte big-endian length + payload, in one write; the server acks each with\n"
      "the 4-byte length before the next is sent. MiB/s of payload; every ack is checked.\n"
      "Variants: blocking, tern-epoll-1, tern-epoll-2, tern-uring-1, tern-uring-2 (-1: client\n"
      "and server fibers on one worker; -2: on two workers)."};
  app.add_option("-n,--messages", config.messages, "messages per run")->capture_default_str();
  app.add_option("-l,--length", config.length, "payload bytes per message")->capture_default_str();
  app.add_option("-r,--repeat", config.repeat, "runs of each variant (median reported)")
      ->capture_default_str();
  app.add_option("--variants", variants, "comma-separated variants (default: all)");
  std::string placements;
  app.add_option("--placements", placements,
                 "comma-separated thread placements: split, same, none (default: split,same)");
  app.add_option("--json", config.json, "also write the results as JSON to this file");
  std::int64_t timeout_seconds = io_timeout.count();
  app.add_option("--timeout", timeout_seconds,
                 "seconds after which a read or write fails (0: none; blocking and tern alike)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!variants.empty()) {
    config.variants.clear();
    std::stringstream list(variants);
    for (std::string name; std::getline(list, name, ',');) {
      if (name != "blocking" && name != "tern-epoll-1" && name != "tern-epoll-2" &&
          name != "tern-uring-1" && name != "tern-uring-2") {
        std::fprintf(stderr, "ttcp: unknown variant '%s'\n", name.c_str());
        return 2;
      }
      config.variants.push_back(name);
    }
  }
  io_timeout = std::chrono::seconds(std::max<std::int64_t>(0, timeout_seconds));
  if (!placements.empty()) {
    config.placements.clear();
    std::stringstream list(placements);
    for (std::string name; std::getline(list, name, ',');) {
      if (name != "split" && name != "same" && name != "none") {
        std::fprintf(stderr, "ttcp: unknown placement '%s'\n", name.c_str());
        return 2;
      }
      config.placements.push_back(name);
    }
  }
  if (config.messages == 0 || config.length == 0 || config.length > 0xffffffffu ||
      config.repeat == 0) {
    std::fprintf(stderr, "ttcp: messages, length and repeat must be > 0 (length < 2^32)\n");
    return 2;
  }
  if (!tern::io::uring_available()) {
    std::erase_if(config.variants,
                  [](const std::string& v) { return v.starts_with("tern-uring"); });
    std::printf("ttcp: io_uring is not available here; uring variants skipped\n");
  }

  const double mib =
      static_cast<double>(config.messages) * static_cast<double>(config.length) / (1024.0 * 1024.0);
  const std::vector<int> cpus = usable_cpus();
  std::vector<Row> rows = plan(config, cpus);
  std::printf(
      "ttcp: %zu messages x %zu bytes (%.3f MiB of payload), stop-and-wait over "
      "127.0.0.1, %zu runs per row in turn; CPUs %d (server) and %d (client) when split\n",
      config.messages, config.length, mib, config.repeat, cpus.empty() ? -1 : cpus[0],
      cpus.size() < 2 ? -1 : cpus[1]);
  bool failed = false;
  for (std::size_t round = 0; round < config.repeat; ++round) {
    for (Row& row : rows) {
      const Outcome outcome = run_variant(row.variant, row.placement, config);
      if (!outcome.error.empty()) {
        std::fprintf(stderr, "ttcp: %s (%s) FAILED: %s\n", row.variant.c_str(),
                     row.placement.name.c_str(), outcome.error.c_str());
        failed = true;
        continue;
      }
      row.samples.push_back(mib / outcome.seconds);
    }
  }

  // Each row is compared with blocking in the same placement.
  auto blocking_in = [&rows](const std::string& placement) {
    for (const Row& row : rows)
      if (row.variant == "blocking" && row.placement.name == placement && !row.samples.empty())
        return median(row.samples);
    return 0.0;
  };
  std::ostringstream json;
  json << "{\"messages\": " << config.messages << ", \"length\": " << config.length
       << ", \"repeat\": " << config.repeat << ", \"variants\": [";
  std::printf("\n| variant | placement | MiB/s (median) | runs | us/message | vs blocking |\n");
  std::printf("|---|---|---:|---|---:|---:|\n");
  bool first = true;
  for (const Row& row : rows) {
    if (row.samples.empty()) continue;
    const double m = median(row.samples);
    const double blocking = blocking_in(row.placement.name);
    const double usec = static_cast<double>(config.length) / (m * 1024.0 * 1024.0) * 1e6;
    std::string runs;
    char text[32];
    for (double sample : row.samples) {
      std::snprintf(text, sizeof text, "%.2f", sample);
      runs += (runs.empty() ? "" : " ") + std::string(text);
    }
    char ratio[32] = "-";
    if (blocking > 0) std::snprintf(ratio, sizeof ratio, "%.3fx", m / blocking);
    std::printf("| %s | %s | %.2f | %s | %.2f | %s |\n", row.variant.c_str(),
                row.placement.name.c_str(), m, runs.c_str(), usec, ratio);
    json << (first ? "" : ", ") << "{\"name\": \"" << row.variant << "\", \"placement\": \""
         << row.placement.name << "\", \"server_cpu\": " << row.placement.server_cpu
         << ", \"client_cpu\": " << row.placement.client_cpu << ", \"median_mib_per_s\": " << m
         << ", \"usec_per_message\": " << usec
         << ", \"ratio_vs_blocking\": " << (blocking > 0 ? m / blocking : 0) << ", \"runs\": [";
    for (std::size_t i = 0; i < row.samples.size(); ++i) json << (i ? ", " : "") << row.samples[i];
    json << "]}";
    first = false;
  }
  json << "], \"verified\": " << (failed ? "false" : "true") << "}\n";
  if (!config.json.empty()) std::ofstream(config.json) << json.str();
  if (failed) std::printf("ttcp: FAILED (see the errors above)\n");
  return failed ? 1 : 0;
}
