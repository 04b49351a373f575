// The worker-loop profiler: TERN_PROF's interval syntax, the table a worker reports (report 000's
// bprof layout plus max and p99), and that a real runtime counts every phase of its loop, under
// the I/O backend TERN_IO names.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/io.h"
#include "tern/prof/loop_profiler.h"
#include "tern/prof/metrics.h"

namespace {

using namespace std::chrono_literals;
using tern::prof::LoopPhase;
using tern::prof::LoopProfiler;

// One phase line of a report.
struct PhaseLine {
  std::uint64_t count = 0;
  std::uint64_t total_usec = 0;
  double avg = 0;
  double max_usec = 0;
  double p99_usec = 0;
};

// A report parsed line by line; fails the test on a line that does not have the layout.
struct Report {
  std::size_t worker = 0;
  std::map<std::string, PhaseLine> phases;
};

Report parse_report(const std::string& table) {
  static const std::regex header(
      R"(^tern prof: worker (\d+), (last )?\d+\.\d{3} s, busy \d+\.\d% \(times in usec\)$)");
  static const std::regex phase(
      R"(^ *(wait events|poll events|handle events|run fibers|timers|posts) cnt=(\d+) )"
      R"(total-usec=(\d+) avg=(\d+\.\d{3}) max-usec=(\d+\.\d{3}) p99-usec=(\d+\.\d{3})$)");
  Report report;
  std::istringstream lines(table);
  std::string line;
  std::smatch match;
  EXPECT_TRUE(std::getline(lines, line));
  EXPECT_TRUE(std::regex_match(line, match, header)) << line;
  if (!match.empty()) report.worker = std::stoul(match[1]);
  while (std::getline(lines, line)) {
    EXPECT_TRUE(std::regex_match(line, match, phase)) << line;
    if (match.empty()) continue;
    EXPECT_EQ(line.find(" cnt="), 20u) << "names are right-aligned in 20 columns: " << line;
    PhaseLine p{std::stoull(match[2]), std::stoull(match[3]), std::stod(match[4]),
                std::stod(match[5]), std::stod(match[6])};
    // avg is total/cnt, p99 never above max, max never above the total.
    if (p.count > 0) {
      EXPECT_NEAR(p.avg, static_cast<double>(p.total_usec) / static_cast<double>(p.count),
                  1.0 + p.avg * 0.01)
          << line;
    }
    EXPECT_LE(p.p99_usec, p.max_usec + 0.0005) << line;
    EXPECT_LE(p.max_usec, static_cast<double>(p.total_usec) + 1.0) << line;
    report.phases[match[1]] = p;
  }
  EXPECT_EQ(report.phases.size(), tern::prof::kLoopPhaseCount) << table;
  return report;
}

TEST(ParseInterval, UnitsAndErrors) {
  EXPECT_EQ(tern::prof::parse_interval("10s").value(), 10s);
  EXPECT_EQ(tern::prof::parse_interval("500ms").value(), 500ms);
  EXPECT_EQ(tern::prof::parse_interval("1m").value(), 60s);
  EXPECT_EQ(tern::prof::parse_interval("1.5s").value(), 1500ms);
  EXPECT_EQ(tern::prof::parse_interval("2h").value(), 7200s);
  EXPECT_EQ(tern::prof::parse_interval("0").value(), 0ms);
  EXPECT_EQ(tern::prof::parse_interval("off").value(), 0ms);
  for (const char* bad : {"", "10", "s", "10x", "-1s", "10 s", "0.1ms", "1e400s", "nan s"})
    EXPECT_FALSE(tern::prof::parse_interval(bad).has_value()) << bad;
}

TEST(LoopProfiler, TableLayoutAndNestedHandleTime) {
  LoopProfiler profiler(3, 10s);
  const std::uint64_t t0 = LoopProfiler::now();
  // A wait of 100 us that contains 30 us of event handling: wait counts 70 us.
  profiler.record(LoopPhase::handle, t0 + 10'000, t0 + 40'000);
  profiler.record(LoopPhase::wait, t0, t0 + 100'000);
  for (int i = 1; i <= 100; ++i) profiler.record(LoopPhase::run, t0, t0 + i * 1000);
  profiler.record(LoopPhase::posts, t0, t0 + 500);
  EXPECT_FALSE(profiler.interval_empty());

  const tern::prof::PhaseTotals wait = profiler.totals(LoopPhase::wait);
  EXPECT_EQ(wait.count, 1u);
  EXPECT_EQ(wait.total_ns, 70'000u);
  EXPECT_EQ(profiler.totals(LoopPhase::handle).total_ns, 30'000u);
  EXPECT_EQ(profiler.totals(LoopPhase::run).count, 100u);
  EXPECT_EQ(profiler.totals(LoopPhase::run).max_ns, 100'000u);

  const std::string table = profiler.take_report(t0 + 1'000'000'000);
  const Report report = parse_report(table);
  EXPECT_EQ(report.worker, 3u);
  EXPECT_EQ(report.phases.at("wait events").count, 1u);
  EXPECT_EQ(report.phases.at("wait events").total_usec, 70u);
  EXPECT_EQ(report.phases.at("handle events").total_usec, 30u);
  const PhaseLine& run = report.phases.at("run fibers");
  EXPECT_EQ(run.count, 100u);
  EXPECT_EQ(run.total_usec, 5050u);
  EXPECT_NEAR(run.avg, 50.5, 0.001);
  EXPECT_NEAR(run.max_usec, 100.0, 0.001);
  EXPECT_NEAR(run.p99_usec, 99.0, 99.0 * 0.032);
  EXPECT_EQ(report.phases.at("timers").count, 0u);
  EXPECT_NE(table.find("busy 0.5%"), std::string::npos) << table;  // (5050+30+0.5) us of 1 s

  // The interval starts over; the totals do not.
  EXPECT_TRUE(profiler.interval_empty());
  EXPECT_EQ(parse_report(profiler.take_report(t0 + 2'000'000'000)).phases.at("run fibers").count,
            0u);
  EXPECT_EQ(profiler.totals(LoopPhase::run).count, 100u);
}

TEST(LoopProfiler, TimedPhaseRecordsOnlyWhenOn) {
  LoopProfiler profiler(0, 10s);
  int runs = 0;
  tern::prof::timed_phase(nullptr, LoopPhase::timers, [&] { ++runs; });
  tern::prof::timed_phase(&profiler, LoopPhase::timers, [&] { ++runs; });
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(profiler.totals(LoopPhase::timers).count, TERN_PROF_ENABLED ? 1u : 0u);
}

#if TERN_PROF_ENABLED

// Reports of a running runtime, as its prof_report sink receives them.
struct Reports {
  std::mutex mutex;
  std::vector<std::pair<std::size_t, std::string>> tables;

  std::size_t count_for(std::size_t worker) {
    std::lock_guard lock(mutex);
    return static_cast<std::size_t>(std::count_if(
        tables.begin(), tables.end(), [worker](const auto& t) { return t.first == worker; }));
  }
};

// Echoes one byte back and forth over a socket pair between two fibers, `rounds` times.
void ping_pong(int rounds) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
  tern::Fiber echo = tern::spawn([fd = fds[1]] {
    std::byte b{};
    for (;;) {
      tern::Result<std::size_t> n = tern::io::read(fd, std::span(&b, 1));
      if (!n || *n == 0) return;
      if (!tern::io::write(fd, std::span(&b, 1))) return;
    }
  });
  std::byte b{7};
  for (int i = 0; i < rounds; ++i) {
    ASSERT_TRUE(tern::io::write(fds[0], std::span(&b, 1)));
    ASSERT_EQ(tern::io::read(fds[0], std::span(&b, 1)).value_or(0), 1u);
  }
  tern::io::close(fds[0]);
  echo.join();
  tern::io::close(fds[1]);
}

TEST(RuntimeProfiler, EveryWorkerReportsEveryPhase) {
  Reports reports;
  std::atomic<bool> running{true};
  std::atomic<std::uint64_t> seen_from_outside{0};
  tern::Runtime runtime({.workers = 2,
                         .prof_interval = 40ms,
                         .prof_report = [&reports](std::size_t worker, std::string_view table) {
                           std::lock_guard lock(reports.mutex);
                           reports.tables.emplace_back(worker, std::string(table));
                         }});
  // Another thread reads the totals while the workers write them (what /metrics does).
  std::thread reader([&] {
    while (running.load()) {
      LoopProfiler::for_each_totals([&](std::size_t, LoopPhase, const tern::prof::PhaseTotals& t) {
        seen_from_outside.fetch_add(t.count, std::memory_order_relaxed);
      });
      std::this_thread::yield();
    }
  });
  runtime.run([&] {
    const tern::Deadline give_up = tern::deadline_after(20s);
    while ((reports.count_for(0) < 2 || reports.count_for(1) < 2) && tern::Clock::now() < give_up) {
      ping_pong(50);                                  // I/O: wait, handle, run
      ASSERT_TRUE(tern::this_fiber::sleep_for(1ms));  // a timer
      tern::WaitGroup posted;                         // posts to and from worker 1
      posted.add();
      ASSERT_TRUE(tern::post(1, [&posted] {
        ping_pong(5);
        posted.done();
      }));
      ASSERT_TRUE(posted.wait());
      tern::Fiber yielder = tern::spawn([] {  // over 64 switches: the loop polls between runs
        for (int i = 0; i < 200; ++i) tern::this_fiber::yield();
      });
      for (int i = 0; i < 200; ++i) tern::this_fiber::yield();
      yielder.join();
    }
  });
  running = false;
  reader.join();
  EXPECT_GT(seen_from_outside.load(), 0u);

  std::map<std::string, std::uint64_t> counts[2];
  std::size_t final_reports = 0;
  {
    std::lock_guard lock(reports.mutex);
    ASSERT_GE(reports.tables.size(), 4u);
    for (const auto& [worker, table] : reports.tables) {
      const Report report = parse_report(table);
      EXPECT_EQ(report.worker, worker);
      if (table.find(", last ") != std::string::npos) ++final_reports;
      for (const auto& [name, line] : report.phases) counts[worker][name] += line.count;
    }
  }
  EXPECT_LE(final_reports, 2u);  // at most one final table per worker, at shutdown
  for (const char* phase :
       {"wait events", "poll events", "handle events", "run fibers", "timers", "posts"})
    EXPECT_GT(counts[0][phase], 0u) << "worker 0, " << phase;
  for (const char* phase : {"wait events", "handle events", "run fibers", "posts"})
    EXPECT_GT(counts[1][phase], 0u) << "worker 1, " << phase;

  // The profilers are gone with the workers: no phase metrics are left behind.
  std::size_t left = 0;
  LoopProfiler::for_each_totals([&](std::size_t, LoopPhase, const auto&) { ++left; });
  EXPECT_EQ(left, 0u);
}

TEST(RuntimeProfiler, PhaseMetricsWhileRunning) {
  tern::Runtime runtime({.workers = 1, .prof_interval = std::chrono::milliseconds(3'600'000)});
  runtime.run([] {
    ping_pong(20);
    const std::vector<tern::prof::Family> families =
        tern::prof::MetricsRegistry::global().collect();
    auto seconds = std::find_if(families.begin(), families.end(),
                                [](const auto& f) { return f.name == "tern_loop_phase_seconds"; });
    ASSERT_NE(seconds, families.end());
    EXPECT_EQ(seconds->kind, tern::prof::MetricKind::summary);
    EXPECT_EQ(seconds->series.size(), tern::prof::kLoopPhaseCount);
    std::uint64_t runs = 0;
    for (const tern::prof::Series& series : seconds->series)
      for (const tern::prof::Label& label : series.labels)
        if (label.name == "phase" && label.value == "run") runs += series.count;
    EXPECT_GT(runs, 0u);
  });
}

TEST(RuntimeProfiler, OffMeansNoReport) {
  std::atomic<int> reports{0};
  tern::Runtime runtime({.workers = 1,
                         .prof_interval = 0ms,
                         .prof_report = [&](std::size_t, std::string_view) { ++reports; }});
  runtime.run([] { ping_pong(20); });
  EXPECT_EQ(reports.load(), 0);
}

TEST(RuntimeProfiler, DefaultReportGoesToTheLog) {
  testing::internal::CaptureStderr();
  tern::Runtime runtime({.workers = 1, .prof_interval = 1h});
  runtime.run([] { ping_pong(10); });  // the final table at shutdown
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("tern prof: worker 0, last "), std::string::npos) << err;
  EXPECT_NE(err.find("          run fibers cnt="), std::string::npos) << err;
}

#endif  // TERN_PROF_ENABLED

}  // namespace
