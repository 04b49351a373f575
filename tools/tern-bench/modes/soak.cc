// soak: tern's reliability soak (docs/tern-bench.md, "soak"). One scenario per run
// (soak/soak_echo.cc: echo and idle; soak/soak_flood.cc: flood; soak/soak_rpc.cc: rpc) against one
// server over loopback. Around the scenario this file: checks the server answers (one exchange, the
// "primer"), reads the server's fibers and timers from its admin endpoint once it is quiet
// (--admin), samples the server's RSS and descriptors every second while the run lasts
// (--server-pid) and fits their trend over the steady load after --warmup, and, once the clients
// have left, waits until the server's fibers and timers are back to the baseline (--settle). The
// run fails on any error of the scenario or when the server does not get back to its baseline.
#include <memory>
#include <string>

#include <fmt/format.h>

#include "core/mode.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "soak/soak.h"
#include "soak/soak_admin.h"
#include "tern/fiber/runtime.h"
#include "tern/io/backend.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

Json optional_json(const std::optional<double>& value, int decimals = 3) {
  return value ? Json(round_to(*value, decimals)) : Json(nullptr);
}

Json count_json(const std::optional<double>& value) {
  return value ? Json(static_cast<std::int64_t>(*value)) : Json(nullptr);
}

std::string count_text(const std::optional<double>& value) {
  return value ? fmt::format("{}", static_cast<std::int64_t>(*value)) : "n/a";
}

// The server's fibers and timers before and after, and whether they came back.
void report_counts(Report& report, const std::optional<ServerCounts>& before,
                   const std::optional<SettleResult>& settle, double settle_limit_s) {
  Json& f = report.figures;
  const std::optional<ServerCounts> after = settle ? settle->last : std::nullopt;
  f["server_fibers_before"] = before ? count_json(before->fibers_alive) : Json(nullptr);
  f["server_fibers_after"] = after ? count_json(after->fibers_alive) : Json(nullptr);
  f["server_timers_before"] = before ? count_json(before->timers_pending) : Json(nullptr);
  f["server_timers_after"] = after ? count_json(after->timers_pending) : Json(nullptr);
  f["back_to_baseline"] = settle ? Json(settle->back) : Json(nullptr);
  f["settle_s"] = settle ? Json(round_to(settle->seconds, 3)) : Json(nullptr);
  if (before && after && before->connections_rejected && after->connections_rejected)
    f["server_rejected"] =
        static_cast<std::int64_t>(*after->connections_rejected - *before->connections_rejected);
  if (!before || !settle) return;
  report.summary.push_back(fmt::format(
      "server fibers alive {} before, {} after; timers pending {} before, {} after: {}",
      static_cast<std::int64_t>(before->fibers_alive),
      after ? count_text(after->fibers_alive) : "n/a", count_text(before->timers_pending),
      after ? count_text(after->timers_pending) : "n/a",
      settle->back ? fmt::format("back to the baseline in {:.2f} s", settle->seconds)
                   : "NOT back to the baseline"));
  if (!before->timers_pending)
    report.notes.push_back("the server exports no tern_timers_pending: its timers are not checked");
  if (!settle->back) {
    report.add_error(
        !after ? fmt::format("the admin endpoint did not answer after the load: {}", settle->error)
               : fmt::format("the server still has {} fibers alive and {} timers pending {} s "
                             "after the clients left (baseline {} and {})",
                             static_cast<std::int64_t>(after->fibers_alive),
                             count_text(after->timers_pending), settle_limit_s,
                             static_cast<std::int64_t>(before->fibers_alive),
                             count_text(before->timers_pending)));
  }
}

// RSS and descriptors of the server over the run, and their trend over the steady load.
void report_server_samples(Report& report, const SoakMonitor& monitor, const SoakOptions& o) {
  Json& f = report.figures;
  const SoakTrend trend = monitor.trend(o.warmup_s);
  std::optional<std::uint64_t> rss_max;
  std::optional<std::uint64_t> fds_max;
  const SoakSample* first = nullptr;
  const SoakSample* last = nullptr;
  for (const SoakSample& s : monitor.samples()) {
    if (s.rss_kib) rss_max = std::max(rss_max.value_or(0), *s.rss_kib);
    if (s.fds) fds_max = std::max(fds_max.value_or(0), *s.fds);
    if (s.rss_kib && first == nullptr) first = &s;
    if (s.rss_kib) last = &s;
  }
  const auto number = [](const std::optional<std::uint64_t>& v) {
    return v ? Json(*v) : Json(nullptr);
  };
  f["samples"] = monitor.samples().size();
  f["trend_samples"] = trend.samples;
  f["server_rss_start_kib"] = first != nullptr ? number(first->rss_kib) : Json(nullptr);
  f["server_rss_end_kib"] = last != nullptr ? number(last->rss_kib) : Json(nullptr);
  f["server_rss_max_kib"] = number(rss_max);
  f["server_fds_start"] = first != nullptr ? number(first->fds) : Json(nullptr);
  f["server_fds_end"] = last != nullptr ? number(last->fds) : Json(nullptr);
  f["server_fds_max"] = number(fds_max);
  f["rss_slope_kib_per_s"] = optional_json(trend.rss_kib_per_s);
  f["fds_slope_per_s"] = optional_json(trend.fds_per_s, 4);
  if (o.net.server_pid == 0) return;
  if (trend.rss_kib_per_s) {
    report.summary.push_back(
        fmt::format("server over the load after {} s of warm-up ({} samples): RSS {:+.2f} KiB/s, "
                    "descriptors {:+.4f}/s; RSS {} KiB at the start, {} max, {} at the end",
                    o.warmup_s, trend.samples, *trend.rss_kib_per_s, trend.fds_per_s.value_or(0),
                    first != nullptr ? *first->rss_kib : 0, rss_max.value_or(0),
                    last != nullptr ? *last->rss_kib : 0));
  } else {
    report.notes.push_back(fmt::format(
        "no RSS or descriptor trend: fewer than two samples after the {} s warm-up (the load "
        "lasted {:.1f} s)",
        o.warmup_s,
        monitor.load_start_s() && monitor.load_end_s()
            ? *monitor.load_end_s() - *monitor.load_start_s()
            : 0.0));
  }
}

void add_params(Report& report, const SoakOptions& o, std::string_view backend) {
  report.target = o.net.name;
  Json& p = report.params;
  p["scenario"] = o.scenario;
  p["connections"] = o.connections;
  if (o.scenario == "rpc") p["shared"] = o.shared;
  if (o.scenario != "rpc") p["message_bytes"] = o.message_bytes;
  if (o.scenario == "echo") p["think_ms"] = o.think_ms;
  if (o.scenario == "idle") p["hold_s"] = o.hold_s;
  if (o.scenario == "flood") {
    p["flood_connects"] = o.flood_connects;
    p["flood_seconds"] = o.flood_s;
  }
  p["warmup_s"] = o.warmup_s;
  p["timeout_s"] = o.timeout_s;
  p["connect_in_flight"] = o.connect_in_flight;
  p["settle_s"] = o.settle_s;
  p["admin"] = o.admin ? Json(o.admin->to_string()) : Json(nullptr);
  p["target_address"] = o.net.target.to_string();
  p["io"] = std::string(backend);
  p["workers"] = o.net.workers;
  p["duration_s"] = o.net.duration_s >= 0 ? Json(o.net.duration_s) : Json(nullptr);
  p["server_pid"] = o.net.server_pid > 0 ? Json(o.net.server_pid) : Json(nullptr);
}

int run_soak(const SoakOptions& o) {
  Result<net::Address> address = resolve_target_or_say(o.net.target, "soak");
  if (!address) return 1;
  Report report;
  report.mode = "soak";
  Meter meter(o.net.workers);
  SoakMonitor monitor(meter, o.net.server_pid, o.scenario == "rpc" ? "calls" : "round trips",
                      o.net.output.quiet);
  CpuWindow cpu(o.net.server_pid);
  SoakContext context(o, *address, monitor, meter, report);
  std::optional<ServerCounts> before;
  std::optional<SettleResult> settle;
  std::string backend;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    monitor.start();
    monitor.set_phase("primer");
    const std::string primer = o.scenario == "rpc" ? rpc_primer(context) : echo_primer(context);
    if (!primer.empty()) {
      report.add_error("the server did not answer the first exchange: " + primer);
      return;
    }
    if (o.admin) {
      monitor.set_phase("baseline");
      std::string why;
      Result<ServerCounts> counts = quiet_server_counts(*o.admin, 3s, &why);
      if (!counts) {
        report.add_error("reading the server's /metrics before the load: " + why);
        return;
      }
      before = *counts;
    }
    cpu.start();
    if (o.scenario == "echo") {
      run_echo_scenario(context);
    } else if (o.scenario == "idle") {
      run_idle_scenario(context);
    } else if (o.scenario == "flood") {
      run_flood_scenario(context);
    } else {
      run_rpc_scenario(context);
    }
    cpu.stop(report);
    if (before) {
      monitor.set_phase("settle");
      settle = wait_for_baseline(*o.admin, *before, seconds(o.settle_s));
    }
  });
  monitor.stop();

  add_params(report, o, backend);
  report.errors += context.failures.total();
  Json failures = Json::object();
  for (const auto& [kind, count] : context.failures.by_kind()) failures[kind] = count;
  report.figures["errors_by_kind"] = failures;
  for (std::string& message : context.failures.first_messages(Report::kMaxErrorMessages)) {
    if (report.error_messages.size() >= Report::kMaxErrorMessages) break;
    report.error_messages.push_back(std::move(message));
  }
  report_server_samples(report, monitor, o);
  report_counts(report, before, settle, o.settle_s);
  return conclude(report, o.net.output);
}

}  // namespace

void add_soak_command(CLI::App& app) { add_mode(app, &add_soak_options, &run_soak); }

}  // namespace tern::bench
