// log: the "log speed" test of report 002 (docs/benchmark-methods.md). --calls log calls
// (1,000,000) of a ~100-character message with the date/time, level, thread and file:line prefix go
// into a file on local disk, from each --threads count of threads (1 and 4), through:
//   tern:   tern::log, asynchronous, Policy::block (no line lost), its default 1 MiB per thread
//           and its file sink's default 8 MiB writeback window;
//   spdlog: spdlog's async_logger with one worker thread and a blocking queue of 8192 messages
//           (async_overflow_policy::block, its defaults), a basic_file_sink_mt and the same
//           prefix pattern (UTC, microseconds).
// The wall time runs from the first call to the end of the final flush (every line in the
// kernel); calls/s and MiB/s (file bytes) come from it. Each call is also timed on the caller
// with the TSC (rdtsc, calibrated against steady_clock over the run; clock_gettime off x86):
// nothing is subtracted, and the cost of the timer itself is reported next to the figures.
// A run counts as verified when the file holds exactly one line per call.
// Each logger runs --rounds times (3), the two alternating which goes first, and the round of
// median calls/s is reported with every round's calls/s beside it. A fresh file's page cache
// costs more on a VM whose memory was never touched than on pages a deleted file just freed;
// alternating gives both loggers both kinds of pages.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/async.h>
#include <spdlog/async_logger.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

#include "core/mode.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "tern/log/log.h"
#include "tern/prof/histogram.h"

namespace tern::bench {

namespace {

namespace fs = std::filesystem;

// The spdlog pattern that prints what tern::log's prefix holds: date, time with microseconds,
// level padded to 5, "t" and the thread id, file:line.
constexpr const char* kSpdlogPattern = "%Y-%m-%d %H:%M:%S.%f %-5l t%t %s:%# %v";
constexpr const char* kClientName = "alpha-client";
constexpr std::uint64_t kMeterEvery = 4096;

struct LogOptions {
  OutputOptions output;
  std::uint64_t calls = 1'000'000;
  std::vector<std::size_t> threads = {1, 4};
  std::string dir;  // empty: a new directory under $TMPDIR (or /tmp), removed afterwards
  std::string target = "both";
  std::size_t buffer_bytes = 1 << 20;  // tern: per thread
  std::size_t queue_items = 8192;      // spdlog: messages in the async queue
  // tern: the file sink's writeback window (0: the kernel manages the file's pages)
  std::size_t writeback_window = log::FileSinkOptions{}.writeback_window;
  bool time_calls = true;
  std::size_t rounds = 3;  // runs per target; the median one is reported
};

// Ticks of the cheapest clock that counts time (the TSC on x86).
std::uint64_t ticks() noexcept {
#if defined(__x86_64__)
  return __builtin_ia32_rdtsc();
#else
  timespec now;
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(now.tv_nsec);
#endif
}

// One thread's share of the calls: sequence numbers [first, first + count).
struct Share {
  std::uint64_t first = 0;
  std::uint64_t count = 0;
};

std::vector<Share> split(std::uint64_t calls, std::size_t threads) {
  std::vector<Share> shares;
  std::uint64_t first = 0;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::uint64_t count = calls / threads + (t < calls % threads ? 1 : 0);
    shares.push_back({first, count});
    first += count;
  }
  return shares;
}

// The calls of one thread through `log_one(seq)`, each timed into `histogram` (in ticks).
template <typename LogOne>
void make_calls(const Share& share, bool time_calls, prof::Histogram& histogram, Meter& meter,
                std::size_t slot, LogOne log_one) {
  const std::uint64_t end = share.first + share.count;
  for (std::uint64_t seq = share.first; seq < end; ++seq) {
    if (time_calls) {
      const std::uint64_t before = ticks();
      log_one(seq);
      const std::uint64_t after = ticks();
      histogram.record(after - before);
    } else {
      log_one(seq);
    }
    if ((seq - share.first + 1) % kMeterEvery == 0) meter.add_done(slot, kMeterEvery, 0);
  }
}

[[gnu::noinline]] void tern_call(std::uint64_t seq) {
  TERN_LOG_INFO(
      "request {} from client {} served in {} us with status {} and a payload of {} bytes", seq,
      kClientName, 100 + seq % 900, 200, 4096);
}

[[gnu::noinline]] void spdlog_call(spdlog::logger* logger, std::uint64_t seq) {
  SPDLOG_LOGGER_INFO(
      logger, "request {} from client {} served in {} us with status {} and a payload of {} bytes",
      seq, kClientName, 100 + seq % 900, 200, 4096);
}

// What reading the clock costs and how finely it counts, in ticks.
struct TimerCost {
  double p50_ticks = 0;
  double step_ticks = 1;
};

// What one run measured.
struct RunResult {
  double seconds = 0;
  double ns_per_tick = 1;
  prof::Histogram call_ticks;
  std::uint64_t file_bytes = 0;
  std::uint64_t lines = 0;
  std::string first_line;
  std::vector<std::string> errors;
};

// Counts the lines of a file and keeps its first one.
void scan_file(const fs::path& path, RunResult& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.errors.push_back(fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
    return;
  }
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n <= 0) break;
    if (out.first_line.empty() && out.file_bytes == 0) {
      const char* begin = buffer.data();
      const char* end = static_cast<const char*>(std::memchr(begin, '\n', n));
      out.first_line.assign(begin, end != nullptr ? end : begin + n);
    }
    out.file_bytes += static_cast<std::uint64_t>(n);
    out.lines += static_cast<std::uint64_t>(std::count(buffer.data(), buffer.data() + n, '\n'));
  }
  ::close(fd);
}

// Runs the threads' calls between the two clock reads; `finish` flushes everything.
template <typename LogOne, typename Finish>
void timed_run(const LogOptions& o, std::size_t threads, Meter& meter, RunResult& out,
               LogOne log_one, Finish finish) {
  const std::vector<Share> shares = split(o.calls, threads);
  std::vector<prof::Histogram> histograms(threads);
  const auto steady_start = std::chrono::steady_clock::now();
  const std::uint64_t tick_start = ticks();
  {
    std::vector<std::thread> workers;
    for (std::size_t t = 0; t < threads; ++t) {
      workers.emplace_back(
          [&, t] { make_calls(shares[t], o.time_calls, histograms[t], meter, t, log_one); });
    }
    for (std::thread& worker : workers) worker.join();
  }
  finish();
  const std::uint64_t tick_end = ticks();
  const auto steady_end = std::chrono::steady_clock::now();
  out.seconds = seconds_between(steady_start, steady_end);
  out.ns_per_tick =
      tick_end > tick_start ? out.seconds * 1e9 / static_cast<double>(tick_end - tick_start) : 1.0;
  for (const prof::Histogram& h : histograms) out.call_ticks.merge(h);
}

RunResult run_tern(const LogOptions& o, std::size_t threads, const fs::path& file, Meter& meter) {
  RunResult out;
  Result<void> started =
      log::init({.file = {.path = file.string(), .writeback_window = o.writeback_window},
                 .level = log::Level::info,
                 .policy = log::Policy::block,
                 .buffer_bytes = o.buffer_bytes});
  if (!started) {
    out.errors.push_back(fmt::format("tern::log::init: {}", started.error().message()));
    return out;
  }
  log::flush();  // the writer thread runs (and has calibrated its clock) before the clock starts
  const std::uint64_t dropped_before = log::dropped();
  timed_run(
      o, threads, meter, out, [](std::uint64_t seq) { tern_call(seq); }, [] { log::flush(); });
  log::shutdown();
  if (log::dropped() != dropped_before)
    out.errors.push_back(fmt::format("{} lines dropped", log::dropped() - dropped_before));
  return out;
}

RunResult run_spdlog(const LogOptions& o, std::size_t threads, const fs::path& file, Meter& meter) {
  RunResult out;
  auto pool = std::make_shared<spdlog::details::thread_pool>(o.queue_items, 1);
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), true);
  auto logger = std::make_shared<spdlog::async_logger>("tern-bench", sink, pool,
                                                       spdlog::async_overflow_policy::block);
  logger->set_pattern(kSpdlogPattern, spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::info);
  spdlog::logger* raw = logger.get();
  timed_run(
      o, threads, meter, out, [raw](std::uint64_t seq) { spdlog_call(raw, seq); },
      [&] {
        // An async flush only queues a request: the pool's destructor drains the queue
        // (flush included) and joins its thread. The pool goes first, so that the logger's last
        // reference is this thread's and it is destroyed here, after the join, not on the pool's
        // thread (whose synchronisation ThreadSanitizer cannot see in an uninstrumented spdlog).
        logger->flush();
        pool.reset();
        logger.reset();
        sink.reset();
      });
  return out;
}

Report make_report(const LogOptions& o, const std::string& target, std::size_t threads,
                   const RunResult& run, const TimerCost& timer) {
  Report report;
  report.mode = "log";
  report.target = target;
  report.params["calls"] = o.calls;
  report.params["threads"] = threads;
  if (target == "tern") {
    report.params["policy"] = "block";
    report.params["buffer_bytes_per_thread"] = o.buffer_bytes;
    report.params["writeback_window"] = o.writeback_window;
  } else {
    report.params["overflow_policy"] = "block";
    report.params["queue_items"] = o.queue_items;
    report.params["pattern"] = kSpdlogPattern;
  }
  report.params["timed_calls"] = o.time_calls;
  const double seconds = run.seconds;
  const double calls_per_s = seconds > 0 ? static_cast<double>(o.calls) / seconds : 0;
  const double mib_per_s =
      seconds > 0 ? static_cast<double>(run.file_bytes) / (1024.0 * 1024.0) / seconds : 0;
  report.figures["elapsed_s"] = round_to(seconds, 6);
  report.figures["calls_per_s"] = round_to(calls_per_s, 0);
  report.figures["mib_per_s"] = round_to(mib_per_s, 2);
  report.figures["file_bytes"] = run.file_bytes;
  report.figures["lines"] = run.lines;
  report.figures["line_bytes_mean"] =
      run.lines > 0 ? round_to(static_cast<double>(run.file_bytes) / run.lines, 1) : 0.0;
  const auto ns = [&](double p) -> Json {
    if (run.call_ticks.count() == 0) return nullptr;
    return round_to(static_cast<double>(run.call_ticks.percentile(p)) * run.ns_per_tick, 1);
  };
  report.figures["call_p50_ns"] = ns(50);
  report.figures["call_p90_ns"] = ns(90);
  report.figures["call_p99_ns"] = ns(99);
  report.figures["call_p999_ns"] = ns(99.9);
  report.figures["call_max_ns"] = ns(100);
  report.figures["call_mean_ns"] = run.call_ticks.count() == 0
                                       ? Json(nullptr)
                                       : Json(round_to(run.call_ticks.mean() * run.ns_per_tick, 1));
  report.figures["timer_p50_ns"] = round_to(timer.p50_ticks * run.ns_per_tick, 1);
  report.figures["clock_step_ns"] = round_to(timer.step_ticks * run.ns_per_tick, 1);
  report.summary.push_back(fmt::format(
      "{} calls from {} thread(s) in {:.3f} s: {:.0f} calls/s, {:.1f} MiB/s, {} lines of {:.1f} "
      "bytes",
      o.calls, threads, seconds, calls_per_s, mib_per_s, run.lines,
      run.lines > 0 ? static_cast<double>(run.file_bytes) / run.lines : 0.0));
  if (run.call_ticks.count() > 0) {
    report.summary.push_back(fmt::format(
        "caller ns per call: p50 {}, p90 {}, p99 {}, p99.9 {}, max {} (timer alone: p50 {:.1f}; "
        "the clock advances in steps of {:.1f})",
        ns(50).dump(), ns(90).dump(), ns(99).dump(), ns(99.9).dump(), ns(100).dump(),
        timer.p50_ticks * run.ns_per_tick, timer.step_ticks * run.ns_per_tick));
  }
  report.summary.push_back("first line: " + run.first_line);
  report.notes.push_back(
      "elapsed: first call to the end of the final flush; caller latency from rdtsc around each "
      "call (the timer's own cost is timer_p50_ns, not subtracted)");
  for (const std::string& error : run.errors) report.add_error(error);
  if (run.lines != o.calls)
    report.add_error(fmt::format("the file has {} lines for {} calls", run.lines, o.calls));
  return report;
}

// The value that occurs most often in `values` (not empty); sorts them.
std::uint64_t most_common(std::vector<std::uint64_t>& values) {
  std::sort(values.begin(), values.end());
  std::uint64_t best = values.front();
  std::size_t best_count = 0;
  for (std::size_t i = 0; i < values.size();) {
    std::size_t end = i;
    while (end < values.size() && values[end] == values[i]) ++end;
    if (end - i > best_count) {
      best_count = end - i;
      best = values[i];
    }
    i = end;
  }
  return best;
}

// What the timer alone costs (two tick reads around nothing, median) and the step by which the
// tick counter most often advances: under a hypervisor the TSC may move in steps of several
// nanoseconds, which then quantize every caller latency.
TimerCost measure_timer() {
  prof::Histogram cost;
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t before = ticks();
    const std::uint64_t after = ticks();
    cost.record(after - before);
  }
  std::vector<std::uint64_t> steps(10000);
  std::uint64_t previous = ticks();
  for (std::size_t changes = 0; changes < steps.size();) {
    const std::uint64_t now = ticks();
    if (now == previous) continue;
    steps[changes++] = now - previous;
    previous = now;
  }
  return {static_cast<double>(cost.percentile(50)), static_cast<double>(most_common(steps))};
}

// One timed run of target with `threads` threads into a new file of dir, removed afterwards.
Report run_target(const LogOptions& o, std::string_view target, std::size_t threads,
                  const fs::path& dir, const TimerCost& timer) {
  const fs::path file = dir / fmt::format("{}-{}t.log", target, threads);
  Meter meter(threads);
  Progress progress(meter, std::chrono::seconds(1), Progress::rate_line("calls"), o.output.quiet);
  CpuWindow cpu(0);
  cpu.start();
  progress.start();
  RunResult run =
      target == "tern" ? run_tern(o, threads, file, meter) : run_spdlog(o, threads, file, meter);
  progress.stop();
  scan_file(file, run);
  std::error_code ignored;
  fs::remove(file, ignored);
  Report report = make_report(o, std::string(target), threads, run, timer);
  cpu.stop(report);
  return report;
}

double calls_per_s(const Report& report) { return report.figures["calls_per_s"].get<double>(); }

// The run of median calls/s among a target's rounds, with every round's calls/s beside it.
Report median_round(std::vector<Report> rounds) {
  Json all = Json::array();
  for (const Report& round : rounds) all.push_back(round.figures["calls_per_s"]);
  std::sort(rounds.begin(), rounds.end(),
            [](const Report& a, const Report& b) { return calls_per_s(a) < calls_per_s(b); });
  const std::size_t middle = rounds.size() / 2;
  Report median = std::move(rounds[middle]);
  median.figures["calls_per_s_rounds"] = std::move(all);
  if (rounds.size() > 1) {
    median.summary.push_back(fmt::format("median of {} rounds (calls/s of each: {})", rounds.size(),
                                         median.figures["calls_per_s_rounds"].dump()));
  }
  // A failed check in any round fails the report, not only in the round it shows.
  for (std::size_t i = 0; i < rounds.size(); ++i) {
    if (i == middle) continue;
    for (const std::string& message : rounds[i].error_messages) {
      median.add_error("another round: " + message);
    }
  }
  return median;
}

int run_log(const LogOptions& o) {
  fs::path dir;
  bool remove_dir = false;
  if (o.dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tern-bench-log.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::fprintf(stderr, "tern-bench log: mkdtemp %s: %s\n", pattern.c_str(),
                   std::strerror(errno));
      return 1;
    }
    dir = pattern;
    remove_dir = true;
  } else {
    dir = o.dir;
  }
  const TimerCost timer = measure_timer();
  std::vector<std::string_view> targets;
  for (std::string_view target : {"tern", "spdlog"}) {
    if (o.target == "both" || o.target == target) targets.push_back(target);
  }
  int status = 0;
  for (std::size_t threads : o.threads) {
    // Each round runs every target; the order alternates, so no logger always finds the page
    // cache the other one has just freed (fresh pages cost more to write to on some VMs).
    std::vector<std::vector<Report>> rounds(targets.size());
    for (std::size_t round = 0; round < o.rounds; ++round) {
      for (std::size_t k = 0; k < targets.size(); ++k) {
        const std::size_t t = round % 2 == 0 ? k : targets.size() - 1 - k;
        rounds[t].push_back(run_target(o, targets[t], threads, dir, timer));
      }
    }
    std::vector<Report> reports;
    for (std::vector<Report>& target_rounds : rounds) {
      reports.push_back(median_round(std::move(target_rounds)));
    }
    if (reports.size() == 2 && calls_per_s(reports[1]) > 0) {
      const double ratio = calls_per_s(reports[0]) / calls_per_s(reports[1]);
      reports[0].figures["calls_per_s_vs_spdlog"] = round_to(ratio, 2);
      reports[0].summary.push_back(fmt::format("{:.2f}x spdlog's calls/s", ratio));
    }
    for (Report& report : reports) status = std::max(status, conclude(report, o.output));
  }
  if (remove_dir) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  return status;
}

// Adds the `log` subcommand with its options and checks to `app`; `o` must outlive the app.
CLI::App* add_log_options(CLI::App& app, LogOptions& o) {
  CLI::App* command = app.add_subcommand(
      "log",
      "report 002's log speed (docs/benchmark-methods.md): --calls log calls of a ~100-character "
      "message with a date/thread/level/file/line prefix into a file, tern::log against spdlog's "
      "async logger");
  command->add_option("--calls", o.calls, "log calls per run")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
  command->add_option("--threads", o.threads, "logging threads; a list runs each (1,4)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{256}));
  command->add_option("--dir", o.dir,
                      "directory of the log files (default: a new one in $TMPDIR or /tmp, "
                      "removed afterwards)");
  command->add_option("--target", o.target, "tern, spdlog or both")
      ->capture_default_str()
      ->check(CLI::IsMember({"tern", "spdlog", "both"}));
  command->add_option("--buffer-bytes", o.buffer_bytes, "tern: buffer per logging thread")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{16 * 1024}, std::size_t{1} << 30));
  command
      ->add_option("--writeback-window", o.writeback_window,
                   "tern: bytes the file sink writes between starting writeback and dropping "
                   "clean pages two windows back from the page cache (0: the kernel decides)")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{0}, std::size_t{1} << 30));
  command->add_option("--queue", o.queue_items, "spdlog: messages in its async queue")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 24));
  command
      ->add_option("--rounds", o.rounds,
                   "runs of each target, in alternating order; the median (by calls/s) is "
                   "reported")
      ->capture_default_str()
      ->check(CLI::Range(std::size_t{1}, std::size_t{99}));
  command->add_flag("!--no-call-times", o.time_calls,
                    "do not time each call (throughput without the timer's cost)");
  command->add_flag("--json", o.output.json, "print one JSON object per run, one per line");
  command->add_flag("--quiet", o.output.quiet, "no progress lines on stderr");
  return command;
}

}  // namespace

void add_log_command(CLI::App& app) { add_mode(app, &add_log_options, &run_log); }

}  // namespace tern::bench
