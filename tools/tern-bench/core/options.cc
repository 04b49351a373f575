#include "core/options.h"

#include <sched.h>

#include <CLI/CLI.hpp>
#include <cctype>

#include <fmt/format.h>

#include "../../common/idle_poll_option.h"
#include "core/cpu.h"
#include "core/run_support.h"

namespace tern::bench {

namespace {

constexpr std::size_t kMaxWorkers = 1024;

void add_output_options(CLI::App& command, OutputOptions& output) {
  command.add_flag("--json", output.json, "print one JSON object on one line, nothing else");
  command.add_flag("--quiet", output.quiet, "no progress lines on stderr");
}

// The options of every network mode; `workers_help` says what --workers defaults to.
void add_network_options(CLI::App& command, NetworkOptions& net, const std::string& workers_names,
                         const std::string& workers_help, const std::string& duration_help) {
  command
      .add_option("target,--target", net.target_text,
                  "the server: tcp://host:port, host:port or [v6]:port")
      ->capture_default_str();
  command
      .add_option("--name", net.name,
                  "the server's name in the report: tern, asio, go, tokio, otechod, mtserver...")
      ->capture_default_str();
  command.add_option("--server-pid", net.server_pid,
                     "measure this process's CPU use over the run (/proc/PID/stat)");
  command.add_option("--io", net.io, "the client's I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  command.add_option(workers_names, net.workers, workers_help);
  command.add_option("--duration", net.duration_s, duration_help);
  command.add_option("--idle-poll", net.idle_poll_text, tools::kIdlePollOptionHelp);
  add_output_options(command, net.output);
}

// Runs check() once the subcommand is parsed; a complaint is a ValidationError (exit 2).
template <typename Options>
void check_after_parse(CLI::App* command, Options& options) {
  command->parse_complete_callback([&options] {
    if (std::string why = check_options(options); !why.empty()) throw CLI::ValidationError(why);
  });
}

std::string check_network(NetworkOptions& net, double default_duration) {
  if (std::string why = check_target_and_server(net); !why.empty()) return why;
  if (net.duration_s < 0) net.duration_s = default_duration;
  return {};
}

std::string at_least_one(const char* option, std::uint64_t value, const char* unit) {
  if (value >= 1) return {};
  return fmt::format("{} must be at least 1{}{} (got {})", option, *unit != 0 ? " " : "", unit,
                     value);
}

std::string payload_in_range(const char* option, std::size_t bytes) {
  if (bytes >= 1 && bytes <= kMaxPayloadBytes) return {};
  return fmt::format("{} {}: payload bytes must be from 1 to {}", option, bytes, kMaxPayloadBytes);
}

std::string positive_seconds(const char* option, double seconds) {
  if (seconds > 0) return {};
  return fmt::format("{} {}: must be more than 0 seconds", option, seconds);
}

}  // namespace

std::string check_target_and_server(NetworkOptions& net) {
  std::string why;
  Result<Target> target = parse_target(net.target_text, &why);
  if (!target) return "target " + why;
  net.target = *target;
  if (net.name.empty()) return "--name must not be empty";
  for (char c : net.name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_' && c != '.')
      return fmt::format("--name '{}': use letters, digits, '-', '_' and '.' only", net.name);
  }
  if (net.server_pid < 0) return fmt::format("--server-pid {}: not a process id", net.server_pid);
  if (net.server_pid > 0 && !read_cpu_ticks(net.server_pid))
    return fmt::format("--server-pid {}: no such process (cannot read /proc/{}/stat)",
                       net.server_pid, net.server_pid);
  if (net.workers > kMaxWorkers)
    return fmt::format("--workers {}: at most {}", net.workers, kMaxWorkers);
  return tools::check_idle_poll_option(net.idle_poll_text, net.idle_poll);
}

std::size_t usable_cpu_count() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  const int count = CPU_COUNT(&set);
  return count > 0 ? static_cast<std::size_t>(count) : 1;
}

CLI::App* add_traffic_options(CLI::App& app, TrafficOptions& o) {
  CLI::App* command = app.add_subcommand(
      "traffic",
      "report 000's testBenchmark (docs/benchmark-methods.md): 16-byte-header requests over -t "
      "connections, -S (write one, read its reply) or -A (pipelined); every reply is checked");
  add_network_options(*command, o.net, "--workers",
                      "client worker threads (default: min(-t, CPUs))",
                      "seconds of load (default 10; with --count and no --duration: no limit)");
  CLI::Option* sync =
      command->add_flag("-S,--sync", o.sync, "one request in flight per connection");
  CLI::Option* async =
      command->add_flag("-A,--async", o.async, "pipelined: a writer and a reader per connection");
  sync->excludes(async);
  command->add_option("-t,--threads", o.connections, "connections, a fiber (-A: two) each")
      ->capture_default_str();
  command->add_option("-s,--size", o.payload_bytes, "payload bytes per request (header excluded)")
      ->capture_default_str();
  command->add_option("-c,--cmd", o.cmd, "1 echo (the server replies), 2 discard (no reply)")
      ->capture_default_str();
  command->add_option("--window", o.window, "-A: requests in flight per connection (0: no cap)")
      ->capture_default_str();
  command->add_option("--count", o.count, "requests over all connections (0: no count bound)");
  command->add_option("--interval", o.interval_s, "seconds between progress lines")
      ->capture_default_str();
  command->add_option("--timeout", o.timeout_s, "seconds an I/O may wait before it fails the run")
      ->capture_default_str();
  check_after_parse(command, o);
  return command;
}

std::string check_options(TrafficOptions& o) {
  if (std::string why = at_least_one("-t/--threads", o.connections, "connection"); !why.empty())
    return why;
  if (std::string why = payload_in_range("-s/--size", o.payload_bytes); !why.empty()) return why;
  if (o.cmd != 1 && o.cmd != 2)
    return fmt::format("-c/--cmd {}: expected 1 (echo) or 2 (discard)", o.cmd);
  if (o.sync && o.async) return "-S and -A exclude each other";
  if (!o.async) o.sync = true;
  if (o.window > 0 && o.sync) return "--window applies to -A (pipelined) runs only";
  if (o.window > 0 && o.cmd == 2) return "--window needs replies: use it with -c 1";
  if (std::string why = positive_seconds("--interval", o.interval_s); !why.empty()) return why;
  if (std::string why = positive_seconds("--timeout", o.timeout_s); !why.empty()) return why;
  const bool duration_given = o.net.duration_s >= 0;
  if (std::string why = check_network(o.net, o.count > 0 ? 0 : 10); !why.empty()) return why;
  if (duration_given && o.net.duration_s == 0 && o.count == 0)
    return "--duration 0 needs --count: a run needs a time or a count bound";
  if (o.net.workers == 0) o.net.workers = std::min(o.connections, usable_cpu_count());
  return {};
}

CLI::App* add_pingpong_options(CLI::App& app, PingpongOptions& o) {
  CLI::App* command = app.add_subcommand(
      "pingpong",
      "report 003's asio pingpong (docs/benchmark-methods.md): each session sends one block, "
      "then writes back whatever it reads; MB/s of bytes read, every byte checked at the end");
  add_network_options(*command, o.net, "--threads,--workers", "client worker threads (default 1)",
                      "seconds of load (default 10)");
  command->add_option("--block", o.block_bytes, "bytes of the block each session sends")
      ->capture_default_str();
  command->add_option("--sessions", o.sessions, "connections, a fiber each")->capture_default_str();
  command->add_option("--timeout", o.timeout_s, "seconds an I/O may wait before it fails the run")
      ->capture_default_str();
  command->add_flag("--tls", o.tls, "every session over TLS (e.g. against tern-echo --tls-cert)");
  command->add_option("--tls-ca", o.tls_ca,
                      "with --tls: verify the server's certificate and name against this CA "
                      "bundle (PEM file); without it the certificate is not checked");
  check_after_parse(command, o);
  return command;
}

std::string check_options(PingpongOptions& o) {
  if (!o.tls_ca.empty() && !o.tls) return "--tls-ca needs --tls";
  if (std::string why = payload_in_range("--block", o.block_bytes); !why.empty()) return why;
  if (std::string why = at_least_one("--sessions", o.sessions, "session"); !why.empty()) return why;
  if (std::string why = positive_seconds("--timeout", o.timeout_s); !why.empty()) return why;
  if (std::string why = check_network(o.net, 10); !why.empty()) return why;
  if (o.net.duration_s == 0) return "--duration must be more than 0 seconds for pingpong";
  if (o.net.workers == 0) o.net.workers = 1;
  return {};
}

CLI::App* add_sessions_options(CLI::App& app, SessionsOptions& o) {
  CLI::App* command = app.add_subcommand(
      "sessions",
      "report 004's NeTest (docs/benchmark-methods.md): sessions of connect, --messages "
      "request/reply of --size bytes, close; --in-flight at once; sessions/s and session latency");
  add_network_options(*command, o.net, "--workers", "client worker threads (default 1, as NeTest)",
                      "cap in seconds on the whole run (default 60)");
  command->add_option("--total", o.total, "sessions to run")->capture_default_str();
  command->add_option("--in-flight", o.in_flight, "sessions open at once")->capture_default_str();
  command->add_option("--messages", o.messages, "request/reply exchanges per session")
      ->capture_default_str();
  command->add_option("--size", o.size_bytes, "bytes per request (and per reply)")
      ->capture_default_str();
  command->add_option("--timeout", o.timeout_s, "seconds a session may take, connect included")
      ->capture_default_str();
  command
      ->add_option("--sources", o.sources,
                   "connect from this many source addresses in turn, 127.0.0.1, 127.0.0.2, "
                   "... (an IPv4 loopback target only): each has the ephemeral port range to "
                   "itself, so connects need not recycle TIME_WAIT ports")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{254}));
  command->add_flag("--tls", o.tls,
                    "a TLS handshake after each connect (full handshakes; connect latency "
                    "includes it)");
  command->add_flag("--tls-resume", o.tls_resume,
                    "with --tls: resume the last session (resumed handshakes)");
  command->add_option("--tls-ca", o.tls_ca,
                      "with --tls: verify the server's certificate and name against this CA "
                      "bundle (PEM file); without it the certificate is not checked");
  check_after_parse(command, o);
  return command;
}

std::string check_options(SessionsOptions& o) {
  if ((o.tls_resume || !o.tls_ca.empty()) && !o.tls) return "--tls-resume and --tls-ca need --tls";
  if (std::string why = at_least_one("--total", o.total, "session"); !why.empty()) return why;
  if (std::string why = at_least_one("--in-flight", o.in_flight, "session"); !why.empty())
    return why;
  if (std::string why = at_least_one("--messages", o.messages, "message"); !why.empty()) return why;
  if (std::string why = payload_in_range("--size", o.size_bytes); !why.empty()) return why;
  if (std::string why = positive_seconds("--timeout", o.timeout_s); !why.empty()) return why;
  if (std::string why = check_network(o.net, 60); !why.empty()) return why;
  if (o.net.duration_s == 0) return "--duration must be more than 0 seconds for sessions (a cap)";
  if (o.net.workers == 0) o.net.workers = 1;
  return {};
}

CLI::App* add_ttcp_options(CLI::App& app, TtcpOptions& o) {
  CLI::App* command = app.add_subcommand(
      "ttcp",
      "report 002's ttcp (docs/benchmark-methods.md): --count messages of a 4-byte big-endian "
      "length + --size bytes, each acknowledged (4-byte length) before the next; MiB/s of payload");
  add_network_options(*command, o.net, "--workers",
                      "fiber client: 1 (default; with --in-process the server fiber shares the "
                      "worker) or 2 (--in-process: server on worker 0, client on worker 1)",
                      "cap in seconds on each run (default: none, --count bounds it)");
  command->add_option("--count", o.count, "messages per run")->capture_default_str();
  command->add_option("--size", o.size_bytes, "payload bytes per message")->capture_default_str();
  command->add_option("--client", o.client, "fiber (tern) or blocking (a std::thread, syscalls)")
      ->check(CLI::IsMember({"fiber", "blocking"}))
      ->capture_default_str();
  command->add_flag("--in-process", o.in_process,
                    "serve in this process (a tern fiber, or a thread for --client blocking) "
                    "instead of connecting to the target");
  command->add_option("--repeat", o.repeat, "runs; the median MiB/s is reported")
      ->capture_default_str();
  command
      ->add_option("--placement", o.placement,
                   "--in-process: none, same (server and client on the first CPU) or split "
                   "(server on the first, client on the second)")
      ->check(CLI::IsMember({"none", "same", "split"}))
      ->capture_default_str();
  command->add_option("--timeout", o.timeout_s, "seconds an I/O may wait before it fails the run")
      ->capture_default_str();
  check_after_parse(command, o);
  return command;
}

std::string check_options(TtcpOptions& o) {
  if (std::string why = at_least_one("--count", o.count, "message"); !why.empty()) return why;
  if (std::string why = payload_in_range("--size", o.size_bytes); !why.empty()) return why;
  if (std::string why = at_least_one("--repeat", o.repeat, "run"); !why.empty()) return why;
  if (o.client != "fiber" && o.client != "blocking")
    return fmt::format("--client {}: expected fiber or blocking", o.client);
  if (o.placement != "none" && !o.in_process)
    return "--placement applies to --in-process runs only";
  if (std::string why = positive_seconds("--timeout", o.timeout_s); !why.empty()) return why;
  if (std::string why = check_network(o.net, 0); !why.empty()) return why;
  if (o.net.workers == 0) o.net.workers = 1;
  if (o.client == "blocking" && o.net.workers != 1)
    return "--workers applies to --client fiber (the blocking client is one thread)";
  if (o.net.workers > 2 || (o.net.workers == 2 && !o.in_process))
    return fmt::format("--workers {}: ttcp uses 1, or 2 with --in-process", o.net.workers);
  if (o.placement == "split" && usable_cpu_count() < 2)
    return "--placement split needs two usable CPUs";
  return {};
}

CLI::App* add_switch_options(CLI::App& app, SwitchOptions& o) {
  CLI::App* command = app.add_subcommand(
      "switch",
      "report 004's switch test (docs/benchmark-methods.md): ns per switch of two tern fibers "
      "yielding to each other on one worker, and of a raw make_context/switch_context ping-pong; "
      "every switch counted");
  command->add_option("--switches", o.switches, "switches per variant (both sides together)")
      ->capture_default_str();
  command->add_option("--variant", o.variant, "fiber, context or all (one report each)")
      ->check(CLI::IsMember({"fiber", "context", "all"}))
      ->capture_default_str();
  add_output_options(*command, o.output);
  check_after_parse(command, o);
  return command;
}

std::string check_options(SwitchOptions& o) {
  if (o.switches < 2) return fmt::format("--switches {}: at least 2 (one each way)", o.switches);
  if (o.variant != "fiber" && o.variant != "context" && o.variant != "all")
    return fmt::format("--variant {}: expected fiber, context or all", o.variant);
  return {};
}

CLI::App* add_rpc_options(CLI::App& app, RpcOptions& o) {
  CLI::App* command = app.add_subcommand(
      "rpc",
      "report 001's RPC benchmark (docs/benchmark-methods.md): -c clients, each with its own "
      "connection (or sharing --shared K), make -n calls in all to "
      "tern.bench.BenchmarkService/Say, "
      "each client one after another; every reply is checked, every call timed");
  add_network_options(*command, o.net, "--workers",
                      "client worker threads, each opening the channels of its clients "
                      "(default: min(channels, CPUs))",
                      "cap in seconds on the calls (default 0: -n bounds the run)");
  command->add_option("-c,--concurrency", o.concurrency, "clients, a fiber each")
      ->capture_default_str();
  command->add_option("-n,--calls", o.calls, "calls over all clients (N/C each, one at a time)")
      ->capture_default_str();
  command
      ->add_option("--shared", o.shared,
                   "the clients multiplex over this many channels (a connection each) instead "
                   "of one channel each (0: off)")
      ->capture_default_str();
  command
      ->add_option("--timeout", o.timeout_s,
                   "seconds a call may take (its deadline; with --stream, a whole stream's); "
                   "also bounds the wait for connections")
      ->capture_default_str();
  command->add_flag("--tls", o.tls,
                    "every connection over TLS (e.g. against tern-rpc-server --tls-cert)");
  command->add_option("--tls-ca", o.tls_ca,
                      "with --tls: verify the server's certificate and name against this CA "
                      "bundle (PEM file); without it the certificate is not checked");
  command->add_flag("--stream", o.stream,
                    "each client opens one stream to tern.bench.BenchmarkService/Pump and sends "
                    "its N/C messages on it without waiting (the stream's window bounds what is "
                    "in flight), reading and checking every answer; the rate is messages/s");
  command
      ->add_option("--stall", o.stall_s,
                   "with --stream: a peer that reads nothing. Each client opens its stream and "
                   "writes as fast as flow control lets it, never reading an answer; once every "
                   "stream is full (the server's writer and the client's both parked) the "
                   "streams are held this many seconds more. Reported: the bytes each stream "
                   "buffered (its peak, against --stream-window), the answers the server wrote "
                   "before its writer parked, what the server holds unanswered, the server's RSS "
                   "growth (--server-pid) up to full and after it (0: off; -n is ignored)")
      ->capture_default_str();
  command
      ->add_option("--stream-window", o.stream_window,
                   "bytes of answers the server may send ahead of a stream's reads (the client "
                   "channel's stream_window; at least 65536)")
      ->capture_default_str();
  check_after_parse(command, o);
  return command;
}

std::string check_options(RpcOptions& o) {
  if (!o.tls_ca.empty() && !o.tls) return "--tls-ca needs --tls";
  if (std::string why = at_least_one("-c/--concurrency", o.concurrency, "client"); !why.empty())
    return why;
  if (std::string why = at_least_one("-n/--calls", o.calls, "call"); !why.empty()) return why;
  if (o.calls < o.concurrency)
    return fmt::format("-n {} is less than -c {}: every client makes at least one call", o.calls,
                       o.concurrency);
  if (o.shared > o.concurrency)
    return fmt::format("--shared {}: at most -c ({}) channels", o.shared, o.concurrency);
  if (std::string why = positive_seconds("--timeout", o.timeout_s); !why.empty()) return why;
  if (o.stall_s < 0) return "--stall: expected 0 or more seconds";
  if (o.stall_s > 0 && !o.stream) return "--stall needs --stream";
  if (o.stall_s > 0 && o.stall_s >= o.timeout_s)
    return fmt::format("--stall {} s: shorter than --timeout ({} s), the streams' deadline",
                       o.stall_s, o.timeout_s);
  if (o.stream_window < (64u << 10)) return "--stream-window: at least 65536 bytes";
  if (std::string why = check_network(o.net, 0); !why.empty()) return why;
  const std::size_t channels = o.shared > 0 ? o.shared : o.concurrency;
  if (const std::size_t limit = raise_file_limit(); limit > 0 && channels + 64 > limit)
    return fmt::format("{} connections need more descriptors than RLIMIT_NOFILE allows ({})",
                       channels, limit);
  if (o.net.workers == 0) o.net.workers = std::min(channels, usable_cpu_count());
  if (o.shared > 0 && o.net.workers > o.shared)
    return fmt::format("--workers {} with --shared {}: each worker needs a channel of its own",
                       o.net.workers, o.shared);
  return {};
}

}  // namespace tern::bench
