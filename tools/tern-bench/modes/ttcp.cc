// ttcp: the stop-and-wait test of report 002 (docs/benchmark-methods.md). The client sends --count
// messages, each a 4-byte big-endian length followed by --size payload bytes in one write, and
// waits for the 4-byte ack (the length, big-endian) before sending the next. MiB/s = payload bytes
// / 2^20 / seconds, timed from the first write to the last ack (connecting excluded). Every ack is
// checked; the in-process server also checks every length and payload byte.
//
// The client is a tern fiber (--client fiber) or a std::thread making blocking system calls
// (--client blocking, report 002's baseline). It talks to --target (tern-echo --mode ttcp, or a
// peer such as mtserver --mode ttcp) or, with --in-process, to a server in this process: a
// tern fiber (with --workers 1 on the client's worker, as report 002's single-thread coroutine
// run; with --workers 2 on worker 0 while the client runs on worker 1) or, for the blocking
// client, a server thread. --placement pins the two sides (same CPU or two CPUs). --repeat runs
// it several times and reports the median.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/latency.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/buffer.h"
#include "tern/net/tcp_listener.h"
#include "tern/net/tcp_stream.h"

namespace tern::bench {

namespace {

// One timed run.
struct Outcome {
  double seconds = 0;
  std::uint64_t messages = 0;
  std::string error;  // empty: every check passed
};

// What every run of one invocation shares.
struct Shared {
  explicit Shared(const TtcpOptions& options) : o(options), meter(2) {
    message.resize(4 + options.size_bytes);
    net::store_big_endian(message.data(), 4, options.size_bytes);
    for (std::size_t i = 0; i < options.size_bytes; ++i)
      message[4 + i] = static_cast<std::byte>((i * 7 + 3) & 0xff);
  }
  const TtcpOptions& o;
  std::vector<std::byte> message;  // length + payload
  Meter meter;
  prof::Histogram rtt;  // written by the client of the current run only
  int server_cpu = -1;
  int client_cpu = -1;
};

// What read_exact says when the stream ends at a message boundary.
constexpr std::string_view kEndOfStream = "end of stream";

// A blocking socket with the two calls the protocol needs; errors as text.
struct BlockingStream {
  int fd = -1;
  std::string read_exact(std::span<std::byte> buf) {
    while (!buf.empty()) {
      const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN ? "timed out" : std::strerror(errno);
      if (n == 0) return std::string(kEndOfStream);
      buf = buf.subspan(static_cast<std::size_t>(n));
    }
    return {};
  }
  std::string write_all(std::span<const std::byte> buf) {
    while (!buf.empty()) {
      const ssize_t n = ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno == EAGAIN ? "timed out" : std::strerror(errno);
      buf = buf.subspan(static_cast<std::size_t>(n));
    }
    return {};
  }
  void shutdown_write() { ::shutdown(fd, SHUT_WR); }
};

// The same calls on a tern stream, each bounded by the timeout.
struct FiberStream {
  net::TcpStream* stream;
  double timeout_s;
  std::string read_exact(std::span<std::byte> buf) {
    Result<void> r = stream->read_exact(buf, deadline_after(seconds(timeout_s)));
    if (r) return {};
    return r.error() == Errc::eof ? std::string(kEndOfStream) : r.error().message();
  }
  std::string write_all(std::span<const std::byte> buf) {
    Result<void> r = stream->write_all(buf, deadline_after(seconds(timeout_s)));
    return r ? std::string() : r.error().message();
  }
  void shutdown_write() { (void)stream->shutdown(SHUT_WR); }
};

// The client: sends messages one at a time, each after the previous ack; times them.
template <typename Stream>
Outcome drive(Stream stream, Shared& shared, std::size_t slot) {
  const TtcpOptions& o = shared.o;
  std::array<std::byte, 4> ack;
  Outcome outcome;
  const Clock::time_point start = Clock::now();
  const Deadline cap = o.net.duration_s > 0 ? start + seconds(o.net.duration_s) : kNoDeadline;
  Clock::time_point now = start;
  for (std::uint64_t i = 0; i < o.count && now < cap; ++i) {
    const Clock::time_point sent_at = now;
    if (std::string e = stream.write_all(shared.message); !e.empty()) {
      outcome.error = fmt::format("client: message {} not sent: {}", i, e);
      break;
    }
    if (std::string e = stream.read_exact(ack); !e.empty()) {
      outcome.error = fmt::format("client: ack {} not read: {}", i, e);
      break;
    }
    if (std::memcmp(ack.data(), shared.message.data(), 4) != 0) {
      outcome.error = fmt::format("client: ack {} is {}, expected the length {}", i,
                                  net::load_big_endian(ack.data(), 4), o.size_bytes);
      break;
    }
    now = Clock::now();
    shared.rtt.record(static_cast<std::uint64_t>((now - sent_at).count()));
    shared.meter.add_done(slot, 1, o.size_bytes);
    ++outcome.messages;
  }
  outcome.seconds = seconds_between(start, now);
  if (!outcome.error.empty()) shared.meter.add_error(slot);
  stream.shutdown_write();
  return outcome;
}

// The in-process server: answers messages until the client's end of stream; returns an error
// or "".
template <typename Stream>
std::string serve(Stream stream, const Shared& shared) {
  std::array<std::byte, 4> header;
  std::vector<std::byte> payload(shared.o.size_bytes);
  for (std::uint64_t i = 0;; ++i) {
    if (std::string e = stream.read_exact(header); !e.empty())
      return e == kEndOfStream ? std::string() : fmt::format("server: header {}: {}", i, e);
    const std::uint64_t length = net::load_big_endian(header.data(), 4);
    if (length != shared.o.size_bytes)
      return fmt::format("server: message {} has length {}", i, length);
    if (std::string e = stream.read_exact(payload); !e.empty())
      return fmt::format("server: payload {}: {}", i, e);
    if (std::memcmp(payload.data(), shared.message.data() + 4, payload.size()) != 0)
      return fmt::format("server: payload {} is corrupt", i);
    if (std::string e = stream.write_all(header); !e.empty())
      return fmt::format("server: ack {}: {}", i, e);
  }
}

// Restores the calling thread's CPU mask when it goes out of scope.
class AffinityGuard {
 public:
  AffinityGuard() { ::pthread_getaffinity_np(::pthread_self(), sizeof saved_, &saved_); }
  ~AffinityGuard() { ::pthread_setaffinity_np(::pthread_self(), sizeof saved_, &saved_); }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;

 private:
  cpu_set_t saved_;
};

void set_blocking_options(int fd, double timeout_s) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval timeout = {};
  timeout.tv_sec = static_cast<time_t>(timeout_s);
  timeout.tv_usec =
      static_cast<suseconds_t>((timeout_s - static_cast<double>(timeout.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
}

// A blocking client thread against `address`, with a blocking server thread when `in_process`.
Outcome run_blocking(Shared& shared, const net::Address& target, bool in_process) {
  net::Address address = target;
  int listener = -1;
  std::string server_error;
  std::thread server;
  if (in_process) {
    address = net::Address::loopback(0);
    socklen_t length = address.capacity();
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || ::bind(listener, address.data(), address.length()) != 0 ||
        ::listen(listener, 1) != 0 || ::getsockname(listener, address.data(), &length) != 0) {
      const std::string error = fmt::format("server: listen: {}", std::strerror(errno));
      if (listener >= 0) ::close(listener);
      return {0, 0, error};
    }
    address.set_length(length);
    server = std::thread([&] {
      pin_this_thread(shared.server_cpu);
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        server_error = fmt::format("server: accept: {}", std::strerror(errno));
        return;
      }
      set_blocking_options(fd, shared.o.timeout_s);
      server_error = serve(BlockingStream{fd}, shared);
      ::close(fd);
    });
  }
  Outcome outcome;
  std::thread client([&] {
    pin_this_thread(shared.client_cpu);
    const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      outcome.error = fmt::format("client: socket: {}", std::strerror(errno));
      return;
    }
    set_blocking_options(fd, shared.o.timeout_s);
    if (::connect(fd, address.data(), address.length()) != 0) {
      outcome.error = fmt::format("client: connect: {}", std::strerror(errno));
    } else {
      outcome = drive(BlockingStream{fd}, shared, 0);
    }
    ::close(fd);
  });
  client.join();
  if (in_process) {
    ::shutdown(listener, SHUT_RDWR);  // an accept still waiting (the client never connected) ends
    server.join();
    ::close(listener);
    if (outcome.error.empty() && !server_error.empty()) outcome.error = server_error;
  }
  return outcome;
}

// A tern client fiber against `address`, with a tern server fiber when `in_process`. Returns
// the backend's name through `backend`.
Outcome run_fiber(Shared& shared, const net::Address& target, bool in_process,
                  std::string* backend) {
  const TtcpOptions& o = shared.o;
  Runtime runtime(client_runtime(o.net));
  AffinityGuard restore;  // worker 0 is this thread
  return runtime.run([&]() -> Outcome {
    *backend = std::string(io::to_string(io::current_backend()));
    const auto io_deadline = [&] { return deadline_after(seconds(o.timeout_s)); };
    net::Address address = target;
    net::TcpListener listener;
    std::string server_error;
    Fiber server;
    if (in_process) {
      pin_this_thread(shared.server_cpu);
      Result<net::TcpListener> bound = net::TcpListener::bind(net::Address::loopback(0));
      if (!bound) return {0, 0, "server: listen: " + bound.error().message()};
      listener = std::move(*bound);
      Result<net::Address> local = listener.local_address();
      if (!local) return {0, 0, "server: getsockname: " + local.error().message()};
      address = *local;
      server = spawn(
          [&] {
            Result<net::TcpStream> stream = listener.accept(io_deadline());
            if (!stream) {
              server_error = "server: accept: " + stream.error().message();
              return;
            }
            (void)stream->set_nodelay();
            server_error = serve(FiberStream{&*stream, o.timeout_s}, shared);
          },
          {.name = "ttcp-server"});
    }
    Outcome outcome;
    WaitGroup client_done;
    client_done.add();
    const std::size_t client_worker = this_worker::count() > 1 ? 1 : 0;
    Result<void> posted = post(client_worker, [&] {
      if (client_worker != 0) pin_this_thread(shared.client_cpu);
      Result<net::TcpStream> stream = net::TcpStream::connect(address, io_deadline());
      if (!stream) {
        outcome.error = "client: connect: " + stream.error().message();
      } else {
        (void)stream->set_nodelay();
        outcome = drive(FiberStream{&*stream, o.timeout_s}, shared, this_worker::index());
      }
      client_done.done();
    });
    if (!posted) {
      outcome.error = "cannot start the client fiber";
      client_done.done();
    }
    while (!client_done.wait()) this_fiber::yield();
    if (in_process) {
      if (!outcome.error.empty()) listener.close();  // an accept still waiting ends
      server.join();
      if (outcome.error.empty() && !server_error.empty()) outcome.error = server_error;
    }
    return outcome;
  });
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

int run_ttcp(const TtcpOptions& o) {
  net::Address target;
  if (!o.in_process) {
    Result<net::Address> address = resolve_target_or_say(o.net.target, "ttcp");
    if (!address) return 1;
    target = *address;
  }
  Shared shared(o);
  if (o.placement == "same") shared.server_cpu = shared.client_cpu = usable_cpu(0);
  if (o.placement == "split") {
    shared.server_cpu = usable_cpu(0);
    shared.client_cpu = usable_cpu(1);
  }
  Report report;
  report.mode = "ttcp";
  CpuWindow cpu(o.net.server_pid);
  Progress progress(shared.meter, std::chrono::seconds(1), Progress::rate_line("messages"),
                    o.net.output.quiet);
  const bool blocking = o.client == "blocking";
  std::string backend = blocking ? "blocking" : "";
  std::vector<double> runs;
  std::vector<double> runs_seconds;
  std::uint64_t messages = 0;
  cpu.start();
  progress.start();
  for (std::size_t r = 0; r < o.repeat; ++r) {
    const Outcome outcome = blocking ? run_blocking(shared, target, o.in_process)
                                     : run_fiber(shared, target, o.in_process, &backend);
    if (!outcome.error.empty()) {
      report.add_error(fmt::format("run {}: {}", r + 1, outcome.error));
      break;
    }
    if (outcome.messages < o.count)
      report.notes.push_back(
          fmt::format("run {}: the --duration cap stopped it after {} of {} "
                      "messages",
                      r + 1, outcome.messages, o.count));
    messages = outcome.messages;
    const double payload = static_cast<double>(outcome.messages * o.size_bytes);
    runs.push_back(outcome.seconds > 0 ? payload / (1024.0 * 1024.0) / outcome.seconds : 0);
    runs_seconds.push_back(outcome.seconds);
  }
  progress.stop();
  cpu.stop(report);

  const double mib = median(runs);
  const double mb = mib * 1024.0 * 1024.0 / 1e6;
  report.params["count"] = o.count;
  report.params["size_bytes"] = o.size_bytes;
  report.params["client"] = o.client;
  report.params["in_process"] = o.in_process;
  report.params["repeat"] = o.repeat;
  report.params["placement"] = o.placement;
  report.params["server_cpu"] = shared.server_cpu;
  report.params["client_cpu"] = shared.client_cpu;
  report.params["timeout_s"] = o.timeout_s;
  add_network_params(report, o.net, backend);
  if (o.in_process) {
    report.target = blocking ? "blocking" : "tern";
    report.params["target_address"] = "in-process";
  }
  report.figures["messages"] = messages;
  report.figures["mib_per_s"] = round_to(mib, 3);
  report.figures["mb_per_s"] = round_to(mb, 3);
  report.figures["us_per_message"] =
      mib > 0 ? Json(round_to(static_cast<double>(o.size_bytes) / (mib * 1024.0 * 1024.0) * 1e6, 3))
              : Json(nullptr);
  Json each = Json::array();
  for (double run : runs) each.push_back(round_to(run, 3));
  report.figures["runs_mib_per_s"] = each;
  add_latency_figures(report.figures, shared.rtt, "rtt_");
  report.summary.push_back(fmt::format(
      "{} x {} payload bytes, stop-and-wait: {:.3f} MiB/s (median of {} run(s)), {:.2f} MB/s",
      messages, o.size_bytes, mib, runs.size(), mb));
  report.summary.push_back(latency_line("round trip per message", shared.rtt));
  if (o.in_process)
    report.notes.push_back("in-process: client_cpu_pct covers the server too (one process)");
  if (runs.empty() && report.errors == 0) report.add_error("no run completed");
  return conclude(report, o.net.output, runs.size() == o.repeat);
}

}  // namespace

void add_ttcp_command(CLI::App& app) { add_mode(app, &add_ttcp_options, &run_ttcp); }

}  // namespace tern::bench
