#include "soak/soak_options.h"

#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include "core/cpu.h"
#include "core/run_support.h"

namespace tern::bench {

namespace {

constexpr double kDefaultSoakSeconds = 60;

bool positive(double seconds) { return seconds > 0; }

}  // namespace

std::size_t default_soak_connections(const std::string& scenario) {
  if (scenario == "rpc") return 1000;
  if (scenario == "flood") return 50;
  return 10000;
}

CLI::App* add_soak_options(CLI::App& app, SoakOptions& o) {
  CLI::App* command = app.add_subcommand(
      "soak",
      "reliability soak against one server over loopback, bounded in time. Scenarios: echo (C "
      "connections to tern-echo doing request/echo round trips, every reply checked), rpc (C "
      "callers of BenchmarkService/Say on tern-rpc-server, every call must succeed), idle (N "
      "connections that send nothing: the server's RSS per idle connection), flood (K clients "
      "ping-pong while a flood of connects hits the server's --max-connections: their latency "
      "before and during). With --server-pid: the server's RSS and open descriptors each second "
      "and their trend; with --admin: its fibers and timers before and after, which must return "
      "to the baseline");
  command->add_option("--scenario", o.scenario, "echo, rpc, idle or flood")
      ->check(CLI::IsMember({"echo", "rpc", "idle", "flood"}))
      ->capture_default_str();
  command
      ->add_option("target,--target", o.net.target_text,
                   "the server: tcp://host:port, host:port or [v6]:port")
      ->capture_default_str();
  command->add_option("--name", o.net.name, "the server's name in the report")
      ->capture_default_str();
  command->add_option("--server-pid", o.net.server_pid,
                      "sample this process's RSS (/proc/PID/status VmRSS), open descriptors "
                      "(/proc/PID/fd) and CPU each second");
  command->add_option("--io", o.net.io, "the client's I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  command->add_option("--workers", o.net.workers,
                      "client worker threads (default: echo min(C, CPUs); rpc min(channels, "
                      "CPUs); idle 1; flood 2, the clients on one, the flood on the other)");
  command->add_option("--duration", o.net.duration_s,
                      "echo, rpc: seconds of load after every connection is up (default 60)");
  command->add_option(
      "-c,--connections,--callers,--clients", o.connections,
      "echo, idle: connections (default 10000); rpc: callers, a fiber each (default 1000); "
      "flood: ping-pong clients (default 50)");
  command
      ->add_option("--shared", o.shared,
                   "rpc: the callers share this many channels (a connection each) instead of "
                   "one channel each (0: off)")
      ->capture_default_str();
  command
      ->add_option("--message-bytes", o.message_bytes,
                   "echo, idle, flood: bytes of each request (its echo has as many)")
      ->capture_default_str();
  command
      ->add_option("--think", o.think_ms,
                   "echo: milliseconds each connection pauses between round trips")
      ->capture_default_str();
  command
      ->add_option("--warmup", o.warmup_s,
                   "seconds from the start of the load whose samples the RSS and descriptor "
                   "trends leave out; flood: seconds of ping-pong before the 'before' window")
      ->capture_default_str();
  command->add_option("--hold", o.hold_s, "idle: seconds the connections stay open")
      ->capture_default_str();
  command
      ->add_option("--flood-connects", o.flood_connects,
                   "flood: connect attempts, spread evenly over --flood-seconds")
      ->capture_default_str();
  command
      ->add_option("--flood-seconds", o.flood_s,
                   "flood: seconds of the flood, and of the windows before and after it")
      ->capture_default_str();
  command->add_option("--admin", o.admin_text,
                      "the server's admin endpoint HOST:PORT: /metrics (tern_fibers_alive, "
                      "tern_timers_pending) is read before the load and after it, until both "
                      "are back to the baseline");
  command
      ->add_option("--settle", o.settle_s,
                   "seconds the server may take after the clients leave to get back to its "
                   "baseline of fibers and timers")
      ->capture_default_str();
  command
      ->add_option("--timeout", o.timeout_s,
                   "seconds a connect, a round trip or a call may take before it counts as "
                   "an error")
      ->capture_default_str();
  command
      ->add_option("--connect-in-flight", o.connect_in_flight,
                   "connects under way at once per client worker (the server's listen "
                   "backlog drops SYNs beyond its own limit)")
      ->capture_default_str();
  command
      ->add_option("--max-idle-bytes", o.max_idle_bytes,
                   "idle: fail the run if the server's RSS grew by more than this per idle "
                   "connection (0: report only; tern's target is 8192)")
      ->capture_default_str();
  command
      ->add_option("--abusers", o.abusers,
                   "rpc: beside the callers, this many abusive clients of each kind: zstd "
                   "bombs, ping floods that never read, calls that are never read, pipelines "
                   "reset mid-way (0: none). Their own failures are counted, not errors")
      ->capture_default_str();
  command
      ->add_option("--max-p99-ms", o.max_p99_ms,
                   "rpc: fail the run if the callers' p99 call latency is over this many "
                   "milliseconds (0: report only)")
      ->capture_default_str();
  command
      ->add_option("--abuse-interval", o.abuse_interval_ms,
                   "rpc: milliseconds each abusive client pauses between its bombs, batches and "
                   "connections (0: as fast as the server takes them)")
      ->capture_default_str();
  command
      ->add_option("--max-server-rss-mib", o.max_server_rss_mib,
                   "rpc: fail the run if the server's RSS (--server-pid, sampled every 100 ms) "
                   "goes over this many MiB during the load (0: report only)")
      ->capture_default_str();
  command->add_flag("--json", o.net.output.json, "print one JSON object on one line, nothing else");
  command->add_flag("--quiet", o.net.output.quiet, "no progress lines on stderr");
  command->parse_complete_callback([&o] {
    if (std::string why = check_options(o); !why.empty()) throw CLI::ValidationError(why);
  });
  return command;
}

std::string check_options(SoakOptions& o) {
  if (o.scenario != "echo" && o.scenario != "rpc" && o.scenario != "idle" && o.scenario != "flood")
    return fmt::format("--scenario {}: expected echo, rpc, idle or flood", o.scenario);
  if (std::string why = check_target_and_server(o.net); !why.empty()) return why;
  const bool timed = o.scenario == "echo" || o.scenario == "rpc";
  if (o.net.duration_s >= 0 && !timed)
    return fmt::format("--duration applies to the echo and rpc scenarios ({}: {})", o.scenario,
                       o.scenario == "idle" ? "--hold" : "--warmup and --flood-seconds");
  if (timed) {
    if (o.net.duration_s < 0) o.net.duration_s = kDefaultSoakSeconds;
    if (!positive(o.net.duration_s))
      return fmt::format("--duration {}: must be more than 0 seconds", o.net.duration_s);
  }
  if (o.connections == 0) o.connections = default_soak_connections(o.scenario);
  if (o.message_bytes < 1 || o.message_bytes > (1 << 20))
    return fmt::format("--message-bytes {}: from 1 to {}", o.message_bytes, 1 << 20);
  if (o.think_ms < 0) return fmt::format("--think {}: must not be negative", o.think_ms);
  if (o.think_ms > 0 && o.scenario != "echo") return "--think applies to the echo scenario";
  if (o.warmup_s < 0) return fmt::format("--warmup {}: must not be negative", o.warmup_s);
  if (!positive(o.hold_s)) return fmt::format("--hold {}: must be more than 0 seconds", o.hold_s);
  if (!positive(o.flood_s))
    return fmt::format("--flood-seconds {}: must be more than 0 seconds", o.flood_s);
  if (o.flood_connects < 1) return "--flood-connects must be at least 1";
  if (!positive(o.settle_s))
    return fmt::format("--settle {}: must be more than 0 seconds", o.settle_s);
  if (!positive(o.timeout_s))
    return fmt::format("--timeout {}: must be more than 0 seconds", o.timeout_s);
  if (o.connect_in_flight < 1) return "--connect-in-flight must be at least 1";
  if (o.shared > 0 && o.scenario != "rpc") return "--shared applies to the rpc scenario";
  if (o.shared > o.connections)
    return fmt::format("--shared {}: at most -c ({}) channels", o.shared, o.connections);
  if (o.abusers > 0 && o.scenario != "rpc") return "--abusers applies to the rpc scenario";
  if (o.abusers > 1000) return fmt::format("--abusers {}: at most 1000", o.abusers);
  if (o.max_p99_ms < 0) return fmt::format("--max-p99-ms {}: must not be negative", o.max_p99_ms);
  if (o.max_p99_ms > 0 && o.scenario != "rpc") return "--max-p99-ms applies to the rpc scenario";
  if (o.abuse_interval_ms < 0)
    return fmt::format("--abuse-interval {}: must not be negative", o.abuse_interval_ms);
  if (o.max_server_rss_mib < 0)
    return fmt::format("--max-server-rss-mib {}: must not be negative", o.max_server_rss_mib);
  if (o.max_server_rss_mib > 0 && (o.scenario != "rpc" || o.net.server_pid == 0))
    return "--max-server-rss-mib applies to the rpc scenario and needs --server-pid";
  if (o.max_idle_bytes > 0 && o.scenario != "idle")
    return "--max-idle-bytes applies to the idle scenario";
  if (o.max_idle_bytes > 0 && o.net.server_pid == 0)
    return "--max-idle-bytes needs --server-pid (the server's RSS)";
  if (!o.admin_text.empty()) {
    std::string why;
    Result<net::Address> admin = net::Address::parse(o.admin_text, &why);
    if (!admin)
      return fmt::format("--admin {}: {}", o.admin_text,
                         why.empty() ? admin.error().message() : why);
    o.admin = *admin;
  }

  const std::size_t channels =
      o.scenario == "rpc" ? (o.shared > 0 ? o.shared : o.connections) : o.connections;
  const std::size_t flood_fds =
      (o.scenario == "flood" ? 2 * o.connect_in_flight : 0) + 4 * std::size_t{o.abusers};
  if (const std::size_t limit = raise_file_limit(); limit > 0 && channels + flood_fds + 64 > limit)
    return fmt::format(
        "{} connections need more descriptors than RLIMIT_NOFILE allows ({}); run the server "
        "in another process",
        channels + flood_fds, limit);
  if (o.net.workers == 0) {
    if (o.scenario == "idle") {
      o.net.workers = 1;
    } else if (o.scenario == "flood") {
      o.net.workers = 2;
    } else {
      o.net.workers = std::min(channels, usable_cpu_count());
    }
  }
  if (o.shared > 0 && o.net.workers > o.shared)
    return fmt::format("--workers {} with --shared {}: each worker needs a channel of its own",
                       o.net.workers, o.shared);
  return {};
}

}  // namespace tern::bench
