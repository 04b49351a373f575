// failover: what callers see when one server of a channel dies or stops (docs/benchmark-methods.md,
// the failover table). -c client fibers call tern.bench.BenchmarkService/Say one after another
// through one tern::rpc::Channel over every target ("host:port,host:port,..."), at the channel's
// defaults, each call with a deadline (--timeout) and, except for the last --non-idempotent
// clients, marked idempotent. Once every endpoint has answered, the load runs --fault-after
// seconds, then this tool sends SIGKILL (--fault kill) or SIGTERM (--fault term: the server's
// goaway and graceful stop) to --fault-pid itself, so the moment of the fault is on the same
// clock as every call; the load goes on until --duration. Every call is recorded (start, end,
// attempts, status) and every reply checked. The figures: time from the fault to the first call
// that succeeded on another server after an attempt on the stopped one, idempotent calls lost
// (target 0), non-idempotent calls that returned a status, calls that outlived their deadline
// (target 0), and the p99 and rate in the --window after the fault against the window before it.
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "../../common/idle_poll_option.h"
#include "benchmark_message.tern.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "rpc_message.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/rpc/channel.h"

namespace tern::bench {

namespace {

// A call returning later than its deadline plus this has hung (none should).
constexpr auto kLateMargin = std::chrono::milliseconds(100);

struct FailoverOptions {
  NetworkOptions net;              // --io, --idle-poll, --json, --quiet, --name (one worker)
  std::string targets;             // "host:port,host:port,...": the channel's endpoints
  std::size_t concurrency = 48;    // -c: client fibers
  std::size_t non_idempotent = 0;  // the last this many clients' calls are not idempotent
  double timeout_s = 1;            // each call's deadline
  double fault_after_s = 1;        // seconds of load before the fault
  double window_s = 1;             // the windows compared, before and after the fault
  pid_t fault_pid = 0;             // the server process to stop
  std::string fault = "kill";      // kill (SIGKILL) or term (SIGTERM)
};

// One finished call; times in nanoseconds since the load started.
struct CallRecord {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t attempts = 0;
  bool ok = false;
  bool idempotent = true;
  rpc::StatusCode code = rpc::StatusCode::ok;
};

struct Run {
  explicit Run(const FailoverOptions& options) : o(options), meter(1) {}
  const FailoverOptions& o;
  Meter meter;
  Clock::time_point start{};
  bool stop = false;
  WaitGroup clients;
  std::vector<CallRecord> calls;
  std::string first_bad_reply;
};

std::int64_t since(Clock::time_point start, Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - start).count();
}

// Client i: calls Say until the run stops, recording each call.
void run_client(Run& run, rpc::Channel& channel, std::size_t i) {
  BenchmarkServiceClient client(channel);
  BenchmarkMessage request;
  fill_rpc_request(request);
  BenchmarkMessage reply;
  const bool idempotent = i < run.o.concurrency - run.o.non_idempotent;
  const auto timeout = seconds(run.o.timeout_s);
  while (!run.stop) {
    rpc::ClientContext context;
    context.set_timeout(timeout);
    context.set_idempotent(idempotent);
    const Clock::time_point begin = Clock::now();
    rpc::Status status = client.Say(context, request, reply);
    const Clock::time_point end = Clock::now();
    if (status.ok()) {
      if (std::string why = check_rpc_reply(reply); !why.empty()) {
        if (run.first_bad_reply.empty()) run.first_bad_reply = why;
        status = rpc::Status(rpc::StatusCode::internal, "bad reply: " + why);
      }
    }
    run.calls.push_back({.start_ns = since(run.start, begin),
                         .end_ns = since(run.start, end),
                         .attempts = context.attempts(),
                         .ok = status.ok(),
                         .idempotent = idempotent,
                         .code = status.code()});
    if (status.ok()) {
      run.meter.add_done(0, 1, 0);
    } else {
      run.meter.add_error(0);
      // A client that pauses after a failure, as real ones do, rather than spinning.
      (void)this_fiber::sleep_for(std::chrono::milliseconds(1));
    }
  }
  run.clients.done();
}

// The p99 of the durations of `calls` in milliseconds (0 when there are none).
double p99_ms(std::vector<std::int64_t> durations) {
  if (durations.empty()) return 0;
  const std::size_t k = (durations.size() * 99) / 100;
  std::nth_element(durations.begin(), durations.begin() + k, durations.end());
  return static_cast<double>(durations[k]) / 1e6;
}

// The figures of the calls that ended in [from, to) (ns since the start).
struct WindowFigures {
  std::size_t calls = 0;
  double p99_ms = 0;
  double max_ms = 0;
};

WindowFigures window_figures(const std::vector<CallRecord>& calls, std::int64_t from,
                             std::int64_t to) {
  std::vector<std::int64_t> durations;
  WindowFigures figures;
  for (const CallRecord& call : calls) {
    if (call.end_ns < from || call.end_ns >= to) continue;
    durations.push_back(call.end_ns - call.start_ns);
    figures.max_ms =
        std::max(figures.max_ms, static_cast<double>(call.end_ns - call.start_ns) / 1e6);
  }
  figures.calls = durations.size();
  figures.p99_ms = p99_ms(std::move(durations));
  return figures;
}

int run_failover(const FailoverOptions& o) {
  const int signal_number = o.fault == "term" ? SIGTERM : SIGKILL;
  Run run(o);
  Report report;
  report.mode = "failover";
  CpuWindow cpu(0);
  Progress progress(run.meter, std::chrono::seconds(1), Progress::rate_line("calls"),
                    o.net.output.quiet);
  std::string backend;
  std::string open_error;
  std::int64_t fault_ns = -1;
  int fault_errno = 0;
  rpc::ChannelStats stats;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    rpc::ChannelOptions defaults;  // named: GCC 12 warns on a defaulted temporary here
    rpc::Result<rpc::Channel> channel = rpc::Channel::open(o.targets, std::move(defaults));
    if (!channel) {
      open_error = "opening the channel to " + o.targets + ": " + channel.error().to_string();
      return;
    }
    // Every endpoint connected before the load starts, so the fault hits a balanced load.
    const Deadline ready_by = deadline_after(seconds(o.timeout_s + 5));
    for (;;) {
      const std::vector<rpc::EndpointStatus> endpoints = channel->endpoint_status();
      if (std::all_of(endpoints.begin(), endpoints.end(),
                      [](const rpc::EndpointStatus& e) { return e.connected > 0; }))
        break;
      if (Clock::now() >= ready_by) {
        open_error = "not every endpoint of " + o.targets + " connected within " +
                     fmt::format("{:.0f} s", o.timeout_s + 5);
        channel->close();
        return;
      }
      (void)this_fiber::sleep_for(std::chrono::milliseconds(5));
    }
    run.start = Clock::now();
    cpu.start();
    progress.start();
    run.clients.add(o.concurrency);
    for (std::size_t i = 0; i < o.concurrency; ++i)
      spawn([&run, &channel, i] { run_client(run, *channel, i); }, {.name = "failover-client"})
          .detach();
    (void)this_fiber::sleep_until(run.start + seconds(o.fault_after_s));
    const Clock::time_point fault = Clock::now();
    fault_ns = since(run.start, fault);
    if (::kill(o.fault_pid, signal_number) != 0) fault_errno = errno;
    if (!o.net.output.quiet)
      std::fprintf(
          stderr, "[%5.1f s] %s sent to pid %d%s\n", static_cast<double>(fault_ns) / 1e9,
          signal_number == SIGKILL ? "SIGKILL" : "SIGTERM", static_cast<int>(o.fault_pid),
          fault_errno != 0 ? (std::string(": ") + std::strerror(fault_errno)).c_str() : "");
    (void)this_fiber::sleep_until(run.start + seconds(o.net.duration_s));
    run.stop = true;
    (void)run.clients.wait();
    progress.stop();
    cpu.stop(report);
    stats = channel->stats();
    channel->close();
  });
  if (!open_error.empty()) {
    report.add_error(open_error);
    return conclude(report, o.net.output, false);
  }

  std::size_t idempotent = 0;
  std::size_t lost = 0;
  std::size_t plain = 0;
  std::size_t plain_failed = 0;
  std::size_t late = 0;
  std::optional<std::int64_t> first_retry_ns;
  std::map<std::string, std::size_t> statuses;
  const auto deadline_ns =
      static_cast<std::int64_t>(o.timeout_s * 1e9) + std::chrono::nanoseconds(kLateMargin).count();
  for (const CallRecord& call : run.calls) {
    (call.idempotent ? idempotent : plain) += 1;
    if (!call.ok) {
      (call.idempotent ? lost : plain_failed) += 1;
      ++statuses[fmt::format("{} ({})", rpc::status_code_name(call.code),
                             call.idempotent ? "idempotent" : "not idempotent")];
    }
    if (call.end_ns - call.start_ns > deadline_ns) ++late;
    if (call.ok && call.attempts >= 2 && call.end_ns >= fault_ns &&
        (!first_retry_ns || call.end_ns < *first_retry_ns))
      first_retry_ns = call.end_ns;
  }
  const auto window_ns = static_cast<std::int64_t>(o.window_s * 1e9);
  const WindowFigures before = window_figures(run.calls, fault_ns - window_ns, fault_ns);
  const WindowFigures after = window_figures(run.calls, fault_ns, fault_ns + window_ns);

  report.params["targets"] = o.targets;
  report.params["concurrency"] = o.concurrency;
  report.params["non_idempotent"] = o.non_idempotent;
  report.params["timeout_s"] = o.timeout_s;
  report.params["fault"] = o.fault;
  report.params["fault_after_s"] = o.fault_after_s;
  report.params["window_s"] = o.window_s;
  report.params["io"] = backend;
  report.params["duration_s"] = o.net.duration_s;
  report.target = o.net.name;
  report.figures["calls"] = run.calls.size();
  report.figures["idempotent_calls"] = idempotent;
  report.figures["idempotent_lost"] = lost;
  report.figures["non_idempotent_calls"] = plain;
  report.figures["non_idempotent_status"] = plain_failed;
  report.figures["late_calls"] = late;
  report.figures["first_retry_ms"] =
      first_retry_ns ? Json(round_to(static_cast<double>(*first_retry_ns - fault_ns) / 1e6, 3))
                     : Json(nullptr);
  report.figures["p99_before_ms"] = round_to(before.p99_ms, 3);
  report.figures["p99_window_ms"] = round_to(after.p99_ms, 3);
  report.figures["max_window_ms"] = round_to(after.max_ms, 3);
  report.figures["calls_per_s_before"] =
      round_to(static_cast<double>(before.calls) / o.window_s, 1);
  report.figures["calls_per_s_window"] = round_to(static_cast<double>(after.calls) / o.window_s, 1);
  report.figures["retries"] = stats.retries;
  report.figures["retries_throttled"] = stats.retries_throttled;
  report.figures["connection_losses"] = stats.connection_losses;
  for (const auto& [what, count] : statuses)
    report.notes.push_back(fmt::format("{} calls ended {}", count, what));

  report.summary.push_back(
      fmt::format("{} clients over one channel to {}: {} calls; {} sent to pid {} after {:.1f} s",
                  o.concurrency, o.targets, run.calls.size(),
                  signal_number == SIGKILL ? "SIGKILL" : "SIGTERM", o.fault_pid, o.fault_after_s));
  report.summary.push_back(fmt::format(
      "first successful retry elsewhere: {}; idempotent calls lost: {} of {}; non-idempotent "
      "calls that returned a status: {} of {}; calls past their deadline: {}",
      first_retry_ns ? fmt::format("{:.1f} ms after the fault",
                                   static_cast<double>(*first_retry_ns - fault_ns) / 1e6)
                     : std::string("none (no call needed one)"),
      lost, idempotent, plain_failed, plain, late));
  report.summary.push_back(fmt::format(
      "p99 {:.2f} ms ({:.0f} calls/s) in the {:.1f} s before the fault, {:.2f} ms ({:.0f} "
      "calls/s, longest {:.1f} ms) in the {:.1f} s after it",
      before.p99_ms, static_cast<double>(before.calls) / o.window_s, o.window_s, after.p99_ms,
      static_cast<double>(after.calls) / o.window_s, after.max_ms, o.window_s));

  if (fault_errno != 0)
    report.add_error(
        fmt::format("--fault-pid {}: kill failed: {}", o.fault_pid, std::strerror(fault_errno)));
  if (!run.first_bad_reply.empty())
    report.add_error("a reply failed its check: " + run.first_bad_reply);
  if (lost > 0) report.add_error(fmt::format("{} idempotent calls lost", lost));
  if (late > 0) report.add_error(fmt::format("{} calls returned past their deadline", late));
  return conclude(report, o.net.output, !run.calls.empty());
}

std::string check_options(FailoverOptions& o) {
  std::string why;
  std::size_t endpoints = 0;
  for (std::size_t from = 0; from <= o.targets.size();) {
    std::size_t comma = o.targets.find(',', from);
    if (comma == std::string::npos) comma = o.targets.size();
    const std::string one = o.targets.substr(from, comma - from);
    if (!parse_target(one, &why)) return fmt::format("targets '{}': {}", one, why);
    ++endpoints;
    from = comma + 1;
  }
  if (endpoints < 2) return "targets: give at least two servers (host:port,host:port)";
  if (o.concurrency < 1) return "-c/--concurrency must be at least 1";
  if (o.non_idempotent > o.concurrency)
    return fmt::format("--non-idempotent {}: at most -c ({})", o.non_idempotent, o.concurrency);
  if (o.fault_pid <= 0) return "--fault-pid: the process id of the server to stop is required";
  if (o.timeout_s <= 0 || o.window_s <= 0 || o.fault_after_s <= 0)
    return "--timeout, --window and --fault-after must be more than 0 seconds";
  if (o.net.duration_s < 0) o.net.duration_s = o.fault_after_s + 2 * o.window_s;
  if (o.net.duration_s <= o.fault_after_s)
    return fmt::format("--duration {}: must be longer than --fault-after ({})", o.net.duration_s,
                       o.fault_after_s);
  o.net.workers = 1;
  return tools::check_idle_poll_option(o.net.idle_poll_text, o.net.idle_poll);
}

CLI::App* add_failover_options(CLI::App& app, FailoverOptions& o) {
  CLI::App* command = app.add_subcommand(
      "failover",
      "the failover table (docs/benchmark-methods.md): -c clients call "
      "tern.bench.BenchmarkService/Say through one channel over every target, idempotent calls "
      "with a deadline; after --fault-after seconds this tool sends SIGKILL (or SIGTERM) to "
      "--fault-pid and measures the time to the first successful retry elsewhere, the calls "
      "lost, and the p99 after the fault");
  command->add_option("targets", o.targets, "the servers: host:port,host:port,...")->required();
  command->add_option("--name", o.net.name, "the servers' name in the report")
      ->capture_default_str();
  command->add_option("--io", o.net.io, "the client's I/O backend: epoll, uring or auto")
      ->check(CLI::IsMember({"epoll", "uring", "auto"}))
      ->capture_default_str();
  command->add_option("-c,--concurrency", o.concurrency, "client fibers, one call at a time each")
      ->capture_default_str();
  command
      ->add_option("--non-idempotent", o.non_idempotent,
                   "the last this many clients make calls that are not idempotent (never "
                   "retried once sent; one in flight on a killed server returns a status)")
      ->capture_default_str();
  command->add_option("--timeout", o.timeout_s, "seconds: every call's deadline")
      ->capture_default_str();
  command->add_option("--fault-pid", o.fault_pid, "the server process this tool stops")->required();
  command
      ->add_option("--fault", o.fault,
                   "kill: SIGKILL (the server dies with its calls); term: SIGTERM (the server "
                   "sends its goaway and stops gracefully)")
      ->check(CLI::IsMember({"kill", "term"}))
      ->capture_default_str();
  command->add_option("--fault-after", o.fault_after_s, "seconds of load before the fault")
      ->capture_default_str();
  command
      ->add_option("--window", o.window_s,
                   "seconds: the p99 and rate after the fault are compared with the same span "
                   "before it")
      ->capture_default_str();
  command->add_option("--duration", o.net.duration_s,
                      "seconds of load in all (default: --fault-after + 2 x --window)");
  command->add_option("--idle-poll", o.net.idle_poll_text, tools::kIdlePollOptionHelp);
  command->add_flag("--json", o.net.output.json, "print one JSON object on one line, nothing else");
  command->add_flag("--quiet", o.net.output.quiet, "no progress lines on stderr");
  command->parse_complete_callback([&o] {
    if (std::string why = check_options(o); !why.empty()) throw CLI::ValidationError(why);
  });
  return command;
}

}  // namespace

void add_failover_command(CLI::App& app) { add_mode(app, &add_failover_options, &run_failover); }

}  // namespace tern::bench
