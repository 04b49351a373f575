// tern::WaitGroup: add/done/pending, waking every waiter at zero, reuse, deadlines,
// interruption, done() from other threads and workers, misuse, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <tern/fiber/fiber.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

std::error_code error_of(const tern::Result<void>& result) {
  return result ? std::error_code{} : result.error();
}

TEST(WaitGroup, CountsOutsideAnyRuntime) {
  tern::WaitGroup group;
  EXPECT_EQ(group.pending(), 0u);
  group.add();
  group.add(3);
  EXPECT_EQ(group.pending(), 4u);
  group.done();
  EXPECT_EQ(group.pending(), 3u);
  group.done();
  group.done();
  group.done();
  EXPECT_EQ(group.pending(), 0u);
}

TEST(WaitGroupDeathTest, DoneMoreOftenThanAddAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::WaitGroup group;
        group.add();
        group.done();
        group.done();
      },
      "WaitGroup::done called more often than add");
}

TEST(WaitGroup, WaitWithNothingPendingPassesAtOnce) {
  tern::WaitGroup group;
  run(1, [&] {
    EXPECT_TRUE(group.wait());
    EXPECT_TRUE(group.wait_until(tern::Clock::now() - 1s));
    group.add(2);
    group.done();
    group.done();
    EXPECT_TRUE(group.wait_until(tern::Clock::now() - 1s));
  });
}

TEST(WaitGroup, WaitsForTasksOnBothWorkers) {
  constexpr int kTasks = 10;
  tern::WaitGroup group;
  std::atomic<int> finished{0};
  std::error_code result{std::make_error_code(std::errc::io_error)};
  run(2, [&] {
    group.add(kTasks);
    for (int i = 0; i < kTasks; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        tern::this_fiber::yield();
        ++finished;
        group.done();
      }));
    }
    result = error_of(group.wait_for(kLong));
    EXPECT_EQ(finished.load(), kTasks);
    EXPECT_EQ(group.pending(), 0u);
  });
  EXPECT_EQ(result, std::error_code{});
}

TEST(WaitGroup, TheLastDoneWakesEveryWaiter) {
  constexpr int kWaiters = 6;
  tern::WaitGroup group;
  tern::WaitGroup waiters;
  tern::WaitGroup started;
  std::atomic<int> woken{0};
  run(2, [&] {
    group.add(2);
    started.add(kWaiters);
    for (int i = 0; i < kWaiters; ++i) {
      post_counted(i % 2, waiters, [&] {
        started.done();
        if (group.wait_for(kLong)) ++woken;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    group.done();
    tern::this_fiber::yield();
    EXPECT_EQ(woken.load(), 0);  // one task still pending
    group.done();
    wait_all(waiters);
  });
  EXPECT_EQ(woken.load(), kWaiters);
}

TEST(WaitGroup, WaitForTimesOutAfterTheTimeout) {
  tern::WaitGroup group;
  run(1, [&] {
    group.add();
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(group.wait_for(kShort));
    const auto elapsed = since(start);
    EXPECT_EQ(result, std::errc::timed_out);
    EXPECT_TRUE(is_deadline(result));
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(group.wait_until(tern::Clock::now() - 1s))));
    EXPECT_EQ(group.pending(), 1u);
    // The timed-out waits left nothing behind: a later waiter is woken by the last done.
    tern::Fiber waiter = tern::spawn([&] { EXPECT_TRUE(group.wait_for(kLong)); });
    tern::this_fiber::yield();
    group.done();
    waiter.join();
  });
}

TEST(WaitGroup, InterruptCancelsAWait) {
  tern::WaitGroup group;
  std::error_code result;
  std::error_code after;
  run(1, [&] {
    group.add();
    tern::Fiber waiter = tern::spawn([&] {
      result = error_of(group.wait());
      after = error_of(group.wait_for(kShort));
    });
    tern::this_fiber::yield();
    waiter.interrupt();
    waiter.join();
    EXPECT_EQ(group.pending(), 1u);
    group.done();
  });
  EXPECT_EQ(result, std::errc::operation_canceled);
  EXPECT_EQ(after, std::errc::timed_out);
}

TEST(WaitGroup, DoneFromThreadsOutsideTheRuntime) {
  constexpr int kThreads = 4;
  tern::WaitGroup group;
  std::error_code result{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    group.add(kThreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) threads.emplace_back([&] { group.done(); });
    result = error_of(group.wait_for(kLong));
    for (std::thread& thread : threads) thread.join();
  });
  EXPECT_EQ(result, std::error_code{});
  EXPECT_EQ(group.pending(), 0u);
}

TEST(WaitGroup, ReusedForManyRoundsAcrossTwoWorkers) {
  constexpr int kRounds = 300;
  constexpr int kTasks = 8;
  tern::WaitGroup group;
  std::atomic<long> done{0};
  long checked = 0;
  run(2, [&] {
    for (int r = 0; r < kRounds; ++r) {
      group.add(kTasks);
      for (int t = 0; t < kTasks; ++t) {
        ASSERT_TRUE(tern::post(t % 2, [&] {
          ++done;
          group.done();
        }));
      }
      ASSERT_TRUE(group.wait_for(kLong)) << "round " << r;
      // Every task of this round has counted itself before the group reached zero.
      EXPECT_EQ(done.load(), long{r + 1} * kTasks);
      ++checked;
    }
  });
  EXPECT_EQ(checked, kRounds);
  EXPECT_EQ(done.load(), long{kRounds} * kTasks);
}

TEST(WaitGroup, ManyAddsAndDonesAcrossTwoWorkers) {
  constexpr int kFibers = 8;
  tern::WaitGroup group;
  tern::WaitGroup fibers;
  run(2, [&] {
    group.add();  // holds the count above zero until every fiber is done
    for (int f = 0; f < kFibers; ++f) {
      post_counted(f % 2, fibers, [&] {
        for (int i = 0; i < kStressOps; ++i) {
          group.add(2);
          group.done();
          if (i % 71 == 0) tern::this_fiber::yield();
          group.done();
        }
      });
    }
    wait_all(fibers);
    EXPECT_EQ(group.pending(), 1u);
    EXPECT_EQ(error_of(group.wait_until(tern::Clock::now() - 1s)), std::errc::timed_out);
    group.done();
    EXPECT_TRUE(group.wait_for(kLong));
  });
  EXPECT_EQ(group.pending(), 0u);
}

TEST(WaitGroup, ShutdownCancelsParkedWaitersOnBothWorkers) {
  constexpr int kWaiters = 6;
  tern::WaitGroup group;
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    group.add();  // never done
    started.add(kWaiters);
    for (int i = 0; i < kWaiters; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        started.done();
        if (error_of(group.wait()) == std::errc::operation_canceled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), kWaiters);
  EXPECT_EQ(group.pending(), 1u);
}

}  // namespace
