// tern::Runtime: workers, post, run's result, and clean shutdown with work still pending.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fiber/spare_cpu.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "thread_cpu_time.h"

namespace {

using namespace std::chrono_literals;

TEST(Runtime, RunReturnsTheFirstFibersResult) {
  tern::Runtime runtime({.workers = 2});
  EXPECT_EQ(runtime.workers(), 2u);
  EXPECT_EQ(runtime.run([] { return 41 + 1; }), 42);
  EXPECT_EQ(runtime.run([] { return std::string("again"); }), "again") << "run is reusable";
}

TEST(Runtime, DefaultsToOneWorkerPerCpu) {
  tern::Runtime runtime;
  EXPECT_GE(runtime.workers(), 1u);
  EXPECT_EQ(runtime.run([] { return tern::this_worker::count(); }), runtime.workers());
}

TEST(Runtime, RunRethrowsTheFirstFibersException) {
  tern::Runtime runtime({.workers = 1});
  EXPECT_THROW(runtime.run([] { throw std::logic_error("first fiber failed"); }), std::logic_error);
}

TEST(Runtime, PostRunsOnTheChosenWorkerThread) {
  tern::Runtime runtime({.workers = 2});
  runtime.run([] {
    EXPECT_EQ(tern::this_worker::index(), 0u);
    const std::thread::id here = std::this_thread::get_id();
    std::thread::id there;
    std::size_t there_index = 99;
    tern::Event done;
    ASSERT_TRUE(tern::post(1, [&] {
      there = std::this_thread::get_id();
      there_index = tern::this_worker::index();
      done.set();
    }));
    ASSERT_TRUE(done.wait_for(30s));
    EXPECT_NE(there, here);
    EXPECT_EQ(there_index, 1u);
  });
}

TEST(Runtime, PostFromAnOutsideThreadWhileRunning) {
  tern::Runtime runtime({.workers = 2});
  std::atomic<int> ran{0};
  runtime.run([&] {
    tern::WaitGroup group;
    group.add(100);
    std::thread outside([&] {
      for (int i = 0; i < 100; ++i) {
        ASSERT_TRUE(runtime.post(i % 2, [&] {
          ran++;
          group.done();
        }));
      }
    });
    ASSERT_TRUE(group.wait_for(30s));
    outside.join();
  });
  EXPECT_EQ(ran.load(), 100);
}

TEST(IdlePoll, ParsesDurationsUpToTheLimit) {
  EXPECT_EQ(tern::parse_idle_poll("200us").value(), 200us);
  EXPECT_EQ(tern::parse_idle_poll("1.5ms").value(), 1500us);
  EXPECT_EQ(tern::parse_idle_poll("1s").value(), tern::kMaxIdlePoll);
  EXPECT_EQ(tern::parse_idle_poll("0").value(), 0us);
  EXPECT_EQ(tern::parse_idle_poll("off").value(), 0us);
  for (const char* bad : {"1001ms", "2s", "200", "", "fast", "-1us"})
    EXPECT_EQ(tern::parse_idle_poll(bad).error(), std::errc::invalid_argument) << bad;
}

// With idle_poll, an idle worker polls instead of sleeping, and wakers do not wake it: what
// arrives meanwhile (a due timer, a post from a worker or another thread) must be found by the
// polling itself. A 1 s poll makes a miss cost about a second a round, so 20 rounds well under
// 10 s show every kind is found while polling (each takes microseconds when it is).
TEST(IdlePoll, TimersAndPostsArrivingWhileWorkersPollAreTakenAtOnce) {
  // Polling even on busy CPUs: other tests running beside this one must not turn it off.
  tern::Runtime runtime(
      {.workers = 2, .idle_poll = std::chrono::seconds(1), .idle_poll_on_busy_cpus = true});
  constexpr int kRounds = 20;
  const auto started = std::chrono::steady_clock::now();
  runtime.run([&] {
    for (int i = 0; i < kRounds; ++i) ASSERT_TRUE(tern::this_fiber::sleep_for(1ms));
    for (int i = 0; i < kRounds; ++i) {
      tern::Event done;
      ASSERT_TRUE(tern::post(1, [&] { done.set(); }));
      ASSERT_TRUE(done.wait_for(30s));
    }
    for (int i = 0; i < kRounds; ++i) {
      tern::Event done;
      std::thread outside([&] { ASSERT_TRUE(runtime.post(1, [&] { done.set(); })); });
      ASSERT_TRUE(done.wait_for(30s));
      outside.join();
    }
  });
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, 10s) << "work that arrived while a worker polled waited for the poll to end";
}

TEST(IdlePoll, ReadsTheRunnableThreadsOfLoadavg) {
  EXPECT_EQ(tern::detail::runnable_threads_in_loadavg("0.61 0.63 0.80 3/187 31493\n"), 3);
  EXPECT_EQ(tern::detail::runnable_threads_in_loadavg("12.00 9.50 4.25 117/2048 7"), 117);
  for (const char* bad : {"", "0.61 0.63 0.80", "0.61 0.63 0.80 /187 1", "0.61 0.63 0.80 x/187 1",
                          "0.61 0.63 0.80 -3/187 1", "3/187"})
    EXPECT_EQ(tern::detail::runnable_threads_in_loadavg(bad), std::nullopt) << bad;
}

// Threads that spin until it goes out of scope, one more than the machine has CPUs, so that
// runnable threads want every CPU.
class BusyMachine {
 public:
  BusyMachine() {
    const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
    for (long i = 0; i <= cpus; ++i)
      spinners_.emplace_back([this] {
        while (!stop_.load(std::memory_order_relaxed)) {
        }
      });
  }
  ~BusyMachine() {
    stop_.store(true, std::memory_order_relaxed);
    for (std::thread& spinner : spinners_) spinner.join();
  }
  BusyMachine(const BusyMachine&) = delete;
  BusyMachine& operator=(const BusyMachine&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> spinners_;
};

// A worker told to poll for a second when idle sleeps at once instead while other threads want
// every CPU, so a fiber's 300 ms sleep blocks its worker in the kernel and costs it next to no
// CPU. Told to poll on busy CPUs too, the worker spends that sleep polling and never blocks: the
// control that shows the measure tells the two apart. Blocking is counted (voluntary context
// switches) rather than CPU time for the control, since a polling worker's share of a CPU
// depends on how many other threads the machine runs.
TEST(IdlePoll, AWorkerSleepsInsteadOfPollingWhileOtherThreadsWantEveryCpu) {
  BusyMachine busy;
  struct DuringSleep {
    std::chrono::nanoseconds cpu;
    long blocked;  // voluntary context switches
  };
  const auto worker_during_sleep = [](bool on_busy_cpus) {
    tern::Runtime runtime({.workers = 1,
                           .idle_poll = std::chrono::seconds(1),
                           .idle_poll_on_busy_cpus = on_busy_cpus});
    return runtime.run([] {
      const std::chrono::nanoseconds cpu_before = tern_test::thread_cpu_time();
      const long blocked_before = tern_test::voluntary_switches();
      EXPECT_TRUE(tern::this_fiber::sleep_for(300ms));
      return DuringSleep{tern_test::thread_cpu_time() - cpu_before,
                         tern_test::voluntary_switches() - blocked_before};
    });
  };
  const DuringSleep sleeping = worker_during_sleep(false);
  const DuringSleep polling = worker_during_sleep(true);
  EXPECT_LT(sleeping.cpu, 30ms) << "the worker polled although every CPU was wanted";
  EXPECT_GE(sleeping.blocked, 1) << "the worker never blocked although every CPU was wanted";
  EXPECT_EQ(polling.blocked, 0) << "the worker blocked when told to poll on busy CPUs";
  EXPECT_GT(polling.cpu, 0ms) << "the worker used no CPU while told to poll";
}

TEST(Runtime, PostWhenNotRunningFailsWithStopped) {
  tern::Runtime runtime({.workers = 1});
  tern::Result<void> posted = runtime.post(0, [] {});
  ASSERT_FALSE(posted);
  EXPECT_EQ(posted.error(), tern::Errc::stopped);
}

TEST(Runtime, FibersOnEveryWorkerRunOnDistinctThreads) {
  tern::Runtime runtime({.workers = 2});
  std::set<std::thread::id> threads;
  runtime.run([&] {
    tern::WaitGroup group;
    std::atomic<int> seen{0};
    std::thread::id ids[2];
    for (std::size_t w = 0; w < 2; ++w) {
      group.add();
      ASSERT_TRUE(tern::post(w, [&, w] {
        ids[w] = std::this_thread::get_id();
        seen++;
        group.done();
      }));
    }
    ASSERT_TRUE(group.wait_for(30s));
    threads.insert(ids[0]);
    threads.insert(ids[1]);
  });
  EXPECT_EQ(threads.size(), 2u);
}

TEST(Shutdown, WaitsForDetachedFibersAndCancelsTheirWaits) {
  tern::Runtime runtime({.workers = 2});
  std::atomic<int> canceled{0};
  std::atomic<int> finished{0};
  runtime.run([&] {
    for (std::size_t w = 0; w < 2; ++w) {
      for (int i = 0; i < 50; ++i) {
        ASSERT_TRUE(tern::post(w, [&] {
          tern::Result<void> slept = tern::this_fiber::sleep_for(1h);
          if (!slept && slept.error() == std::errc::operation_canceled) canceled++;
          finished++;
        }));
      }
    }
  });
  EXPECT_EQ(finished.load(), 100) << "run() returns only after every fiber ended";
  EXPECT_EQ(canceled.load(), 100);
}

TEST(Shutdown, PostedWorkIsNeverLost) {
  tern::Runtime runtime({.workers = 2});
  std::atomic<int> ran{0};
  std::atomic<int> accepted{0};
  runtime.run([&] {
    // A fiber on worker 1 keeps posting to worker 0 while the runtime shuts down: the first
    // fiber returns (starting the shutdown) once the first 100 posts were accepted.
    tern::Event started;
    ASSERT_TRUE(tern::post(1, [&] {
      for (int i = 0; i < 2000; ++i) {
        if (tern::post(0, [&] { ran++; })) accepted++;
        if (i == 100) started.set();
        if (i % 100 == 0) tern::this_fiber::yield();
      }
    }));
    ASSERT_TRUE(started.wait_for(30s));
  });
  EXPECT_GT(accepted.load(), 100);
  EXPECT_EQ(ran.load(), accepted.load()) << "every accepted post ran";
}

// Whether anything was written to stderr since testing::internal::CaptureStderr() pointed it at
// an empty file.
bool stderr_written() {
  struct stat written = {};
  return ::fstat(STDERR_FILENO, &written) == 0 && written.st_size > 0;
}

TEST(Shutdown, AFiberThatIgnoresCancellationIsReportedNotLost) {
  tern::Runtime runtime({.workers = 1, .shutdown_report_interval = 10ms});
  testing::internal::CaptureStderr();
  std::atomic<bool> done{false};
  runtime.run([&] {
    tern::spawn(
        [&] {
          // Ignores the cancellation (but yields) until the worker's report is out, then
          // finishes. The report is the first thing written to the captured stderr; waiting for
          // it rather than for a fixed time keeps a worker descheduled for that long from
          // finding the fiber finished before it looked at the clock for its report.
          const auto give_up = tern::Clock::now() + 30s;
          while (!stderr_written() && tern::Clock::now() < give_up) tern::this_fiber::yield();
          done = true;
        },
        {.name = "obstinate"})
        .detach();
  });
  const std::string output = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(done.load());
  EXPECT_NE(output.find("waits for 1 fiber(s): 'obstinate'"), std::string::npos) << output;
}

// A bad value of a TERN_ environment variable ends the program when the first runtime starts,
// naming the variable, its value and what it accepts (docs/guide.md, "Environment variables").
TEST(EnvironmentDeathTest, ABadTernProfIsFatalAndSaysWhatItAccepts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ::setenv("TERN_PROF", "soon", 1);
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {});
      },
      "tern: TERN_PROF='soon' is not valid: expected an interval of at least 1ms such as 10s, "
      "500ms or 1m, or 0 or off \\(unset means off\\)");
}

TEST(EnvironmentDeathTest, ABadTernIdlePollIsFatalAndSaysWhatItAccepts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        ::setenv("TERN_IDLE_POLL", "2s", 1);  // past the 1 s cap
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {});
      },
      "tern: TERN_IDLE_POLL='2s' is not valid: expected a duration of at most 1s such as 200us "
      "or 1ms, or 0 or off \\(unset means off\\)");
}

TEST(Environment, AnOptionSetInCodeWinsOverABadVariable) {
  // The variables are read only when the option is not set: a runtime that sets both runs.
  ::setenv("TERN_PROF", "soon", 1);
  ::setenv("TERN_IDLE_POLL", "forever", 1);
  tern::Runtime runtime(
      {.workers = 1, .prof_interval = std::chrono::milliseconds(0), .idle_poll = 0us});
  EXPECT_EQ(runtime.run([] { return 7; }), 7);
  ::unsetenv("TERN_PROF");
  ::unsetenv("TERN_IDLE_POLL");
}

TEST(RuntimeDeathTest, NestedRunAbortsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime outer({.workers = 1});
        outer.run([] {
          tern::Runtime inner({.workers = 1});
          inner.run([] {});
        });
      },
      "Runtime::run called from a worker thread");
}

}  // namespace
