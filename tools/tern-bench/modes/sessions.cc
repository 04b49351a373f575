// sessions: the concurrency test of report 004 (NeTest, docs/benchmark-methods.md). --total
// sessions, --in-flight of them open at once (a fiber each, spread over --workers; one worker by
// default, as NeTest's single-threaded client). A session connects, exchanges --messages requests
// of --size bytes with replies of the same size (each reply checked byte for byte), and closes.
// Reported: sessions per second, session latency (connect start to last reply) and connect latency
// in microseconds, and every failed session by cause. Many short connections from one client can
// run out of ephemeral ports (TIME_WAIT); the report says so when connects fail that way, and
// --sources spreads the connections over several loopback source addresses.
#include <sys/socket.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/latency.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "core/tcp_counters.h"
#include "modes/modes.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/net/tcp_stream.h"
#include "tern/tls/tls_stream.h"

namespace tern::bench {

namespace {

// Failures of one worker's sessions, by cause; each fiber writes its own worker's entry.
struct Failures {
  std::uint64_t connect = 0;
  std::uint64_t no_ports = 0;  // connect failed with EADDRNOTAVAIL
  std::uint64_t timeout = 0;
  std::uint64_t reply = 0;  // a wrong, short or missing reply, or a write that failed
  std::vector<std::string> messages;
};

struct Run {
  explicit Run(const SessionsOptions& options)
      : o(options),
        meter(options.net.workers),
        latency(options.net.workers),
        connect_latency(options.net.workers),
        failures(options.net.workers),
        resumed(options.net.workers),
        ends(options.net.workers) {}

  const SessionsOptions& o;
  net::Address address;
  std::vector<net::Address> sources;  // --sources > 1: session s connects from sources[s % n]
  Meter meter;
  LatencyRecorder latency;
  LatencyRecorder connect_latency;
  std::vector<Failures> failures;
  tls::TlsContext tls;                  // --tls: the client context
  std::vector<std::uint64_t> resumed;   // per worker: sessions whose handshake was resumed
  std::vector<Clock::time_point> ends;  // per worker: when its last session ended
  std::atomic<std::uint64_t> next{0};
  WaitGroup finished;
  Clock::time_point start{};
  Deadline cap{};
};

// Byte i of message m of session s.
std::byte message_byte(std::uint64_t session, std::size_t message, std::size_t i) {
  return static_cast<std::byte>((session * 31 + message * 7 + i) & 0xff);
}

void record_failure(Run& run, std::size_t slot, std::uint64_t Failures::* cause,
                    std::string message) {
  Failures& f = run.failures[slot];
  ++(f.*cause);
  if (f.messages.size() < Report::kMaxErrorMessages) f.messages.push_back(std::move(message));
  run.meter.add_error(slot);
}

// A session's requests and replies over `Stream` (net::TcpStream or tls::TlsStream, the same
// calls); returns whether every reply came back right (failures are recorded).
template <typename Stream>
bool exchange(Run& run, std::size_t slot, std::uint64_t session, Stream& stream,
              std::vector<std::byte>& request, std::vector<std::byte>& reply, Deadline deadline) {
  for (std::size_t m = 0; m < run.o.messages; ++m) {
    for (std::size_t i = 0; i < request.size(); ++i) request[i] = message_byte(session, m, i);
    if (Result<void> sent = stream.write_all(request, deadline); !sent) {
      if (sent.error() == std::errc::timed_out) {
        record_failure(run, slot, &Failures::timeout,
                       fmt::format("session {}: request {} timed out", session, m));
        return false;
      }
      record_failure(
          run, slot, &Failures::reply,
          fmt::format("session {}: writing request {}: {}", session, m, sent.error().message()));
      return false;
    }
    if (Result<void> got = stream.read_exact(reply, deadline); !got) {
      if (got.error() == std::errc::timed_out) {
        record_failure(run, slot, &Failures::timeout,
                       fmt::format("session {}: reply {} timed out", session, m));
        return false;
      }
      record_failure(
          run, slot, &Failures::reply,
          fmt::format("session {}: reading reply {}: {}", session, m, got.error().message()));
      return false;
    }
    if (std::memcmp(reply.data(), request.data(), request.size()) != 0) {
      record_failure(run, slot, &Failures::reply,
                     fmt::format("session {}: reply {} differs from its request", session, m));
      return false;
    }
  }
  return true;
}

// One session; returns when it ended, well or not.
void run_session(Run& run, std::uint64_t session, std::vector<std::byte>& request,
                 std::vector<std::byte>& reply) {
  const std::size_t slot = this_worker::index();
  const Clock::time_point begin = Clock::now();
  const Deadline deadline = begin + seconds(run.o.timeout_s);
  Result<net::TcpStream> stream =
      run.sources.empty() ? net::TcpStream::connect(run.address, deadline)
                          : net::TcpStream::connect_from(run.sources[session % run.sources.size()],
                                                         run.address, deadline);
  if (stream && run.o.tls) {
    (void)stream->set_nodelay();
    Result<tls::TlsStream> secured =
        tls::TlsStream::connect(std::move(*stream), run.tls, run.o.net.target.host, deadline);
    if (!secured) {
      if (secured.error() == std::errc::timed_out)
        return record_failure(run, slot, &Failures::timeout,
                              fmt::format("session {}: TLS handshake timed out", session));
      return record_failure(run, slot, &Failures::connect,
                            fmt::format("session {}: {}", session, secured.error().message()));
    }
    run.connect_latency.record(slot, Clock::now() - begin);
    if (secured->resumed()) ++run.resumed[slot];
    if (!exchange(run, slot, session, *secured, request, reply, deadline)) return;
    (void)secured->shutdown(SHUT_WR, deadline);  // close_notify, then the close
    const Clock::time_point end = Clock::now();
    run.latency.record(slot, end - begin);
    run.ends[slot] = std::max(run.ends[slot], end);
    run.meter.add_done(slot, 1, run.o.messages * run.o.size_bytes);
    return;
  }
  if (!stream) {
    const std::error_code error = stream.error();
    if (error == std::errc::timed_out)
      return record_failure(run, slot, &Failures::timeout,
                            fmt::format("session {}: connect timed out", session));
    if (error == std::errc::address_not_available)
      return record_failure(run, slot, &Failures::no_ports,
                            fmt::format("session {}: connect: {}", session, error.message()));
    return record_failure(run, slot, &Failures::connect,
                          fmt::format("session {}: connect: {}", session, error.message()));
  }
  run.connect_latency.record(slot, Clock::now() - begin);
  (void)stream->set_nodelay();
  if (!exchange(run, slot, session, *stream, request, reply, deadline)) return;
  const Clock::time_point end = Clock::now();
  run.latency.record(slot, end - begin);
  run.ends[slot] = std::max(run.ends[slot], end);
  run.meter.add_done(slot, 1, run.o.messages * run.o.size_bytes);
}

// One of the --in-flight fibers: runs sessions until none is left or the cap passes.
void run_lane(Run& run) {
  std::vector<std::byte> request(run.o.size_bytes);
  std::vector<std::byte> reply(run.o.size_bytes);
  for (;;) {
    if (Clock::now() >= run.cap) return;
    const std::uint64_t session = run.next.fetch_add(1, std::memory_order_relaxed);
    if (session >= run.o.total) return;
    run_session(run, session, request, reply);
  }
}

std::string read_sysctl(const char* path) {
  std::ifstream file(path);
  std::string value;
  std::getline(file, value);
  for (char& c : value)
    if (c == '\t') c = ' ';
  return value.empty() ? "unknown" : value;
}

int run_sessions(const SessionsOptions& o) {
  Result<net::Address> address = resolve_target_or_say(o.net.target, "sessions");
  if (!address) return 1;
  Run run(o);
  run.address = *address;
  if (o.sources > 1) {
    if (address->family() != AF_INET || !address->to_string().starts_with("127.")) {
      std::fprintf(stderr,
                   "tern-bench sessions: --sources %zu needs an IPv4 loopback target, not %s\n",
                   o.sources, address->to_string().c_str());
      return 2;
    }
    for (std::size_t i = 0; i < o.sources; ++i)
      run.sources.push_back(*net::Address::ipv4("127.0.0." + std::to_string(i + 1), 0));
  }
  if (o.tls) {
    Result<tls::TlsContext> context = tls::TlsContext::client({.ca_file = o.tls_ca,
                                                               .verify_peer = !o.tls_ca.empty(),
                                                               .session_resumption = o.tls_resume});
    if (!context) {
      std::fprintf(stderr, "tern-bench sessions: %s\n", context.error().message().c_str());
      return 1;
    }
    run.tls = *context;
  }
  Report report;
  report.mode = "sessions";
  CpuWindow cpu(o.net.server_pid);
  Progress progress(
      run.meter, std::chrono::seconds(1),
      [](const ProgressSample& s) {
        const double t = s.interval_s > 0 ? s.interval_s : 1;
        return fmt::format("[{:6.1f} s] {:.0f} sessions/s (total {}), failed {}", s.elapsed_s,
                           static_cast<double>(s.delta.done) / t, s.total.done, s.total.errors);
      },
      o.net.output.quiet);
  const std::size_t lanes = static_cast<std::size_t>(std::min<std::uint64_t>(o.in_flight, o.total));
  const TcpCounters tcp_before = TcpCounters::read();
  std::string backend;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    run.start = Clock::now();
    run.cap = run.start + seconds(o.net.duration_s);
    for (Clock::time_point& end : run.ends) end = run.start;
    cpu.start();
    progress.start();
    run.finished.add(lanes);
    spread_fibers(lanes, "session", [&run](std::size_t) {
      run_lane(run);
      run.finished.done();
    });
    (void)run.finished.wait();
    progress.stop();
    cpu.stop(report);
  });

  const TcpCounters tcp_after = TcpCounters::read();
  Failures failed;
  std::vector<std::string> messages;
  Clock::time_point end = run.start;
  for (std::size_t w = 0; w < run.failures.size(); ++w) {
    const Failures& f = run.failures[w];
    failed.connect += f.connect;
    failed.no_ports += f.no_ports;
    failed.timeout += f.timeout;
    failed.reply += f.reply;
    messages.insert(messages.end(), f.messages.begin(), f.messages.end());
    end = std::max(end, run.ends[w]);
  }
  const std::uint64_t failed_total =
      failed.connect + failed.no_ports + failed.timeout + failed.reply;
  const prof::Histogram latency = run.latency.merged();
  const prof::Histogram connect = run.connect_latency.merged();
  const std::uint64_t done = latency.count();
  const double elapsed = seconds_between(run.start, end);
  const double per_second = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  const std::string tw_reuse = read_sysctl("/proc/sys/net/ipv4/tcp_tw_reuse");
  const std::string port_range = read_sysctl("/proc/sys/net/ipv4/ip_local_port_range");

  report.params["total"] = o.total;
  report.params["in_flight"] = o.in_flight;
  report.params["messages"] = o.messages;
  report.params["size_bytes"] = o.size_bytes;
  report.params["timeout_s"] = o.timeout_s;
  report.params["sources"] = o.sources;
  report.params["tls"] = o.tls;
  report.params["tls_resume"] = o.tls_resume;
  add_network_params(report, o.net, backend);
  report.params["tcp_tw_reuse"] = tw_reuse;
  report.params["ip_local_port_range"] = port_range;
  report.figures["sessions"] = done;
  report.figures["failed"] = failed_total;
  report.figures["failed_connect"] = failed.connect;
  report.figures["failed_no_ports"] = failed.no_ports;
  report.figures["failed_timeout"] = failed.timeout;
  report.figures["failed_reply"] = failed.reply;
  // Machine-wide: a SYN that found the listen queue full waits a second for its retransmit.
  const std::uint64_t overflows = tcp_after.since(tcp_before, "ListenOverflows");
  const std::uint64_t syn_retransmits = tcp_after.since(tcp_before, "TCPSynRetrans");
  if (!tcp_after.values.empty()) {
    report.figures["listen_overflows"] = overflows;
    report.figures["syn_retransmits"] = syn_retransmits;
  }
  report.figures["elapsed_s"] = round_to(elapsed, 6);
  report.figures["sessions_per_s"] = round_to(per_second, 2);
  std::uint64_t resumed = 0;
  for (std::uint64_t r : run.resumed) resumed += r;
  if (o.tls) report.figures["tls_resumed"] = resumed;
  add_latency_figures(report.figures, latency);
  add_latency_figures(report.figures, connect, "connect_");
  report.summary.push_back(fmt::format("{} sessions in {:.3f} s: {:.2f} sessions/s, {} failed",
                                       done, elapsed, per_second, failed_total));
  report.summary.push_back(latency_line("session latency (connect start to last reply)", latency));
  report.summary.push_back(latency_line("connect latency", connect));
  for (std::string& message : messages) {
    if (report.error_messages.size() < Report::kMaxErrorMessages)
      report.error_messages.push_back(std::move(message));
  }
  report.errors = failed_total;
  if (failed.no_ports > 0)
    report.notes.push_back(fmt::format(
        "{} connects failed with EADDRNOTAVAIL: the client ran out of ephemeral ports (range {}, "
        "net.ipv4.tcp_tw_reuse = {}; closed connections hold their port in TIME_WAIT for 60 s "
        "unless tcp_tw_reuse lets connect reuse it: 1, or 2 = loopback only)",
        failed.no_ports, port_range, tw_reuse));
  if (overflows > 0 || syn_retransmits > 0)
    report.notes.push_back(fmt::format(
        "the machine's TCP counters grew during the run: {} SYNs found a listen queue full "
        "(ListenOverflows), {} SYNs were sent again (TCPSynRetrans), each a second or more after "
        "the first; counted for every process, so on an idle machine these are the run's",
        overflows, syn_retransmits));
  const std::uint64_t attempted = done + failed_total;
  if (attempted < o.total)
    report.notes.push_back(
        fmt::format("stopped by the --duration cap ({} s) after {} of {} sessions",
                    o.net.duration_s, attempted, o.total));
  if (done == 0 && failed_total == 0) report.add_error("no session completed");
  return conclude(report, o.net.output);
}

}  // namespace

void add_sessions_command(CLI::App& app) { add_mode(app, &add_sessions_options, &run_sessions); }

}  // namespace tern::bench
