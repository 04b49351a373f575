// tern::Semaphore: permits, FIFO hand-over, release(n), deadlines, interruption, releases from
// other threads, bounded concurrency across workers, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <tern/fiber/fiber.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/semaphore.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

std::error_code error_of(const tern::Result<void>& result) {
  return result ? std::error_code{} : result.error();
}

TEST(Semaphore, CountsPermitsOutsideAnyRuntime) {
  tern::Semaphore semaphore(2);
  EXPECT_EQ(semaphore.available(), 2u);
  EXPECT_TRUE(semaphore.try_acquire());
  EXPECT_TRUE(semaphore.try_acquire());
  EXPECT_FALSE(semaphore.try_acquire());
  EXPECT_EQ(semaphore.available(), 0u);
  semaphore.release(3);
  EXPECT_EQ(semaphore.available(), 3u);
  semaphore.release();
  EXPECT_EQ(semaphore.available(), 4u);
  tern::Semaphore empty;
  EXPECT_EQ(empty.available(), 0u);
  EXPECT_FALSE(empty.try_acquire());
}

TEST(Semaphore, AcquireTakesAFreePermitWithoutWaiting) {
  tern::Semaphore semaphore(2);
  run(1, [&] {
    EXPECT_TRUE(semaphore.acquire());
    // Free permits are taken even when the deadline has passed.
    EXPECT_TRUE(semaphore.acquire_until(tern::Clock::now() - 1s));
    EXPECT_EQ(semaphore.available(), 0u);
  });
}

TEST(Semaphore, ReleaseHandsPermitsToWaitersInArrivalOrder) {
  tern::Semaphore semaphore(0);
  std::vector<int> order;
  run(1, [&] {
    std::vector<tern::Fiber> fibers;
    for (int i = 0; i < 4; ++i) {
      fibers.push_back(tern::spawn([&, i] {
        EXPECT_TRUE(semaphore.acquire_for(kLong));
        order.push_back(i);
      }));
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(order.empty());
    // The permit goes to the first waiter, not to a try_acquire that comes later.
    semaphore.release();
    EXPECT_FALSE(semaphore.try_acquire());
    for (int i = 0; i < 5; ++i) tern::this_fiber::yield();
    EXPECT_EQ(order, std::vector<int>{0});
    // release(2) wakes exactly two more.
    semaphore.release(2);
    EXPECT_EQ(semaphore.available(), 0u);
    for (int i = 0; i < 5; ++i) tern::this_fiber::yield();
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
    // More permits than waiters: the rest stay available.
    semaphore.release(3);
    for (tern::Fiber& fiber : fibers) fiber.join();
    EXPECT_EQ(semaphore.available(), 2u);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Semaphore, AcquireForTimesOutAfterTheTimeout) {
  tern::Semaphore semaphore(0);
  run(1, [&] {
    const auto start = tern::Clock::now();
    tern::Result<void> acquired = semaphore.acquire_for(kShort);
    const auto elapsed = since(start);
    EXPECT_EQ(error_of(acquired), std::errc::timed_out);
    EXPECT_TRUE(is_deadline(error_of(acquired)));
    EXPECT_GE(elapsed, kShort);

    EXPECT_TRUE(is_deadline(error_of(semaphore.acquire_until(tern::Clock::now() - 1s))));

    // The timed-out waiter left the queue: a release becomes a free permit.
    semaphore.release();
    EXPECT_EQ(semaphore.available(), 1u);
  });
}

TEST(Semaphore, TimedOutWaitersDoNotTakePermitsFromLaterOnes) {
  tern::Semaphore semaphore(0);
  std::error_code short_result;
  std::error_code long_result;
  run(1, [&] {
    tern::Fiber short_waiter =
        tern::spawn([&] { short_result = error_of(semaphore.acquire_for(kShort)); });
    tern::this_fiber::yield();
    tern::Fiber long_waiter =
        tern::spawn([&] { long_result = error_of(semaphore.acquire_for(kLong)); });
    tern::this_fiber::yield();
    short_waiter.join();
    semaphore.release();
    long_waiter.join();
    EXPECT_EQ(semaphore.available(), 0u);
  });
  EXPECT_EQ(short_result, std::errc::timed_out);
  EXPECT_EQ(long_result, std::error_code{});
}

TEST(Semaphore, InterruptCancelsAWaitWithoutConsumingAPermit) {
  tern::Semaphore semaphore(0);
  std::error_code result;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] { result = error_of(semaphore.acquire()); });
    tern::this_fiber::yield();  // the waiter parks
    waiter.interrupt();
    waiter.join();
    semaphore.release();
    EXPECT_EQ(semaphore.available(), 1u);
  });
  EXPECT_EQ(result, std::errc::operation_canceled);
}

TEST(Semaphore, InterruptIsSeenOnceByTheNextWait) {
  tern::Semaphore semaphore(0);
  std::error_code first;
  std::error_code second;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] {
      first = error_of(semaphore.acquire_for(kLong));
      second = error_of(semaphore.acquire_for(kShort));
    });
    waiter.interrupt();  // before the fiber runs
    waiter.join();
  });
  EXPECT_EQ(first, std::errc::operation_canceled);
  EXPECT_EQ(second, std::errc::timed_out);
}

TEST(Semaphore, ReleaseFromAThreadOutsideTheRuntimeWakesAWaiter) {
  tern::Semaphore semaphore(0);
  std::error_code result{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    std::thread releaser([&] { semaphore.release(); });
    result = error_of(semaphore.acquire_for(kLong));
    releaser.join();
  });
  EXPECT_EQ(result, std::error_code{});
  EXPECT_EQ(semaphore.available(), 0u);
}

TEST(Semaphore, LimitsConcurrencyAcrossTwoWorkers) {
  constexpr int kFibers = 8;
  constexpr int kPermits = 3;
  tern::Semaphore semaphore(kPermits);
  std::atomic<int> in_use{0};
  std::atomic<int> max_in_use{0};
  std::atomic<long> entries{0};
  tern::WaitGroup group;
  run(2, [&] {
    for (int f = 0; f < kFibers; ++f) {
      post_counted(f % 2, group, [&] {
        for (int i = 0; i < kStressOps; ++i) {
          if (!semaphore.acquire_for(kLong)) {
            ADD_FAILURE() << "acquire failed";
            return;
          }
          const int now = ++in_use;
          int seen = max_in_use.load();
          while (now > seen && !max_in_use.compare_exchange_weak(seen, now)) {
          }
          ++entries;
          if (i % 61 == 0) tern::this_fiber::yield();
          --in_use;
          semaphore.release();
        }
      });
    }
    wait_all(group);
  });
  EXPECT_EQ(entries.load(), long{kFibers} * kStressOps);
  EXPECT_LE(max_in_use.load(), kPermits);
  EXPECT_GE(max_in_use.load(), 1);
  EXPECT_EQ(semaphore.available(), std::size_t{kPermits});
}

TEST(Semaphore, EveryReleasedPermitIsAcquiredExactlyOnce) {
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;  // each consumer takes what one producer releases
  tern::Semaphore items(0);
  std::atomic<long> acquired{0};
  tern::WaitGroup group;
  run(2, [&] {
    for (int c = 0; c < kConsumers; ++c) {
      post_counted(c % 2, group, [&] {
        for (int i = 0; i < kStressOps; ++i) {
          if (items.try_acquire() || items.acquire_for(kLong)) {
            ++acquired;
          } else {
            ADD_FAILURE() << "a released permit never arrived";
            return;
          }
        }
      });
    }
    for (int p = 0; p < kProducers; ++p) {
      post_counted(p % 2, group, [&] {
        for (int i = 0; i < kStressOps;) {
          const int count = i % 3 == 0 && i + 1 < kStressOps ? 2 : 1;  // ones and twos
          items.release(count);
          i += count;
          if (i % 53 == 0) tern::this_fiber::yield();
        }
      });
    }
    wait_all(group);
  });
  EXPECT_EQ(acquired.load(), long{kProducers} * kStressOps);
  EXPECT_EQ(items.available(), 0u);
}

// Releases from worker 1 race with interrupts and very short deadlines on worker 0: an
// acquire either takes a permit or fails without one, so no permit is lost or made up.
TEST(Semaphore, InterruptsAndDeadlinesRacingWithReleasesNeverLoseAPermit) {
  constexpr int kWaiters = 4;
  tern::Semaphore semaphore(0);
  std::atomic<long> taken{0};
  std::atomic<long> cancelled{0};
  std::atomic<long> timed_out{0};
  std::atomic<bool> releasing{true};
  std::atomic<int> bad_errors{0};
  tern::WaitGroup released;
  run(2, [&] {
    std::vector<tern::Fiber> waiters;
    for (int w = 0; w < kWaiters; ++w) {
      waiters.push_back(tern::spawn([&, w] {
        while (releasing.load() || semaphore.available() > 0) {
          tern::Result<void> got = w % 2 == 0
                                       ? semaphore.acquire_for(kShort)
                                       : semaphore.acquire_for(std::chrono::microseconds(20));
          if (got) {
            ++taken;
          } else if (got.error() == std::errc::operation_canceled) {
            ++cancelled;
          } else if (got.error() == std::errc::timed_out) {
            ++timed_out;
          } else {
            ++bad_errors;
          }
        }
      }));
    }
    tern::this_fiber::yield();  // every waiter parks: no permits yet
    waiters[0].interrupt();
    tern::this_fiber::yield();
    EXPECT_EQ(cancelled.load(), 1);
    post_counted(1, released, [&] {
      for (int i = 0; i < kStressOps; ++i) {
        semaphore.release();
        if (i % 8 == 0) tern::this_fiber::yield();
      }
    });
    // Interrupt the waiters round-robin until the releases are done.
    for (int i = 0; released.pending() > 0; ++i) {
      waiters[i % kWaiters].interrupt();
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(released.wait_for(kLong));
    releasing = false;
    for (tern::Fiber& waiter : waiters) waiter.join();
  });
  EXPECT_EQ(bad_errors.load(), 0);
  EXPECT_EQ(taken.load() + static_cast<long>(semaphore.available()), long{kStressOps});
  EXPECT_GT(cancelled.load(), 0);
}

TEST(Semaphore, ShutdownCancelsParkedAcquirersOnBothWorkers) {
  constexpr int kWaiters = 6;
  tern::Semaphore semaphore(0);
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    started.add(kWaiters);
    for (int i = 0; i < kWaiters; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        started.done();
        if (error_of(semaphore.acquire()) == std::errc::operation_canceled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), kWaiters);
  EXPECT_EQ(semaphore.available(), 0u);
}

}  // namespace
