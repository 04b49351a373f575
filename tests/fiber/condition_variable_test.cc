// tern::ConditionVariable: notify_one/notify_all, predicates, deadlines, interruption (the lock
// is held again either way), notifies from other threads and workers, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <tern/fiber/condition_variable.h>
#include <tern/fiber/fiber.h>
#include <tern/fiber/mutex.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

TEST(ConditionVariable, NotifyOneWakesAWaiterThatSeesTheChange) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  bool ready = false;
  bool seen = false;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] {
      std::unique_lock lock(mutex);
      EXPECT_TRUE(cv.wait(lock, [&] { return ready; }));
      EXPECT_TRUE(lock.owns_lock());
      seen = ready;
    });
    tern::this_fiber::yield();  // the waiter parks
    {
      std::lock_guard hold(mutex);
      ready = true;
    }
    cv.notify_one();
    waiter.join();
  });
  EXPECT_TRUE(seen);
}

TEST(ConditionVariable, NotifyOneWakesExactlyOneWaiterInArrivalOrder) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  std::vector<int> woken;
  run(1, [&] {
    std::vector<tern::Fiber> fibers;
    for (int i = 0; i < 3; ++i) {
      fibers.push_back(tern::spawn([&, i] {
        std::unique_lock lock(mutex);
        EXPECT_TRUE(cv.wait_for(lock, kLong));
        woken.push_back(i);
      }));
      tern::this_fiber::yield();
    }
    EXPECT_TRUE(woken.empty());
    cv.notify_one();
    for (int i = 0; i < 5; ++i) tern::this_fiber::yield();
    EXPECT_EQ(woken, std::vector<int>{0});
    cv.notify_one();
    for (int i = 0; i < 5; ++i) tern::this_fiber::yield();
    EXPECT_EQ(woken, (std::vector<int>{0, 1}));
    cv.notify_one();
    for (tern::Fiber& fiber : fibers) fiber.join();
  });
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
}

TEST(ConditionVariable, NotifyAllWakesEveryWaiterOnBothWorkers) {
  constexpr int kWaiters = 8;
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  bool go = false;
  int woken = 0;
  int waiting = 0;
  tern::ConditionVariable all_waiting;
  tern::WaitGroup group;
  run(2, [&] {
    for (int i = 0; i < kWaiters; ++i) {
      post_counted(i % 2, group, [&] {
        std::unique_lock lock(mutex);
        ++waiting;
        all_waiting.notify_one();
        EXPECT_TRUE(cv.wait_until(lock, tern::deadline_after(kLong), [&] { return go; }));
        ++woken;
      });
    }
    {
      std::unique_lock lock(mutex);
      EXPECT_TRUE(all_waiting.wait_until(lock, tern::deadline_after(kLong),
                                         [&] { return waiting == kWaiters; }));
      EXPECT_EQ(woken, 0);
      go = true;
    }
    cv.notify_all();
    wait_all(group);
  });
  EXPECT_EQ(woken, kWaiters);
}

TEST(ConditionVariable, NotifyWithoutWaitersIsNotRemembered) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  run(1, [&] {
    cv.notify_one();
    cv.notify_all();
    std::unique_lock lock(mutex);
    tern::Result<void> waited = cv.wait_for(lock, kShort);
    ASSERT_FALSE(waited);
    EXPECT_EQ(waited.error(), std::errc::timed_out);
    EXPECT_TRUE(is_deadline(waited.error()));
  });
}

TEST(ConditionVariable, WaitForWithAPredicate) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  int value = 0;
  run(1, [&] {
    tern::Fiber setter = tern::spawn([&] {
      for (int i = 1; i <= 3; ++i) {
        {
          std::lock_guard hold(mutex);
          value = i;
        }
        cv.notify_all();
        tern::this_fiber::yield();
      }
    });
    std::unique_lock lock(mutex);
    EXPECT_TRUE(cv.wait_for(lock, kLong, [&] { return value == 3; }));
    EXPECT_EQ(value, 3);
    const auto start = tern::Clock::now();
    tern::Result<void> never = cv.wait_for(lock, kShort, [&] { return value == 4; });
    ASSERT_FALSE(never);
    EXPECT_EQ(never.error(), std::errc::timed_out);
    EXPECT_GE(tern::Clock::now() - start, kShort);
    EXPECT_TRUE(lock.owns_lock());
    lock.unlock();
    setter.join();
  });
}

TEST(ConditionVariable, WaitForTimesOutWithTheLockHeldAgain) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  run(1, [&] {
    std::unique_lock lock(mutex);
    const auto start = tern::Clock::now();
    tern::Result<void> waited = cv.wait_for(lock, kShort);
    const auto elapsed = since(start);
    ASSERT_FALSE(waited);
    EXPECT_EQ(waited.error(), std::errc::timed_out);
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(lock.owns_lock());
    EXPECT_FALSE(mutex.try_lock());

    // A deadline already passed: fails at once, lock still held.
    waited = cv.wait_until(lock, tern::Clock::now() - 1s);
    ASSERT_FALSE(waited);
    EXPECT_EQ(waited.error(), std::errc::timed_out);
    EXPECT_TRUE(lock.owns_lock());

    // With a predicate: false all along times out after the timeout...
    int checks = 0;
    const auto pred_start = tern::Clock::now();
    waited = cv.wait_until(lock, tern::deadline_after(kShort), [&] {
      ++checks;
      return false;
    });
    ASSERT_FALSE(waited);
    EXPECT_EQ(waited.error(), std::errc::timed_out);
    EXPECT_GE(since(pred_start), kShort);
    EXPECT_GE(checks, 2);  // before waiting and after the timeout
    // ...and true at once passes even with a deadline already passed.
    EXPECT_TRUE(cv.wait_until(lock, tern::Clock::now() - 1s, [] { return true; }));
    EXPECT_TRUE(lock.owns_lock());
  });
}

TEST(ConditionVariable, TimedOutWaiterDoesNotSwallowALaterNotify) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  bool woken = false;
  run(1, [&] {
    {
      std::unique_lock lock(mutex);
      EXPECT_FALSE(cv.wait_for(lock, kShort));
    }
    tern::Fiber waiter = tern::spawn([&] {
      std::unique_lock lock(mutex);
      woken = static_cast<bool>(cv.wait_for(lock, kLong));
    });
    tern::this_fiber::yield();
    cv.notify_one();  // must reach the live waiter, not the timed-out one
    waiter.join();
  });
  EXPECT_TRUE(woken);
}

TEST(ConditionVariable, InterruptCancelsAWaitAndRetakesTheLock) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  std::error_code result;
  bool held_after = false;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] {
      std::unique_lock lock(mutex);
      tern::Result<void> waited = cv.wait(lock);
      result = waited ? std::error_code{} : waited.error();
      held_after = lock.owns_lock();
    });
    tern::this_fiber::yield();  // the waiter parks
    // Hold the lock while interrupting: the cancelled wait has to wait for it.
    mutex.lock();
    waiter.interrupt();
    tern::this_fiber::yield();
    EXPECT_EQ(result, std::error_code{}) << "the waiter returned without the lock";
    mutex.unlock();
    waiter.join();
  });
  EXPECT_EQ(result, std::errc::operation_canceled);
  EXPECT_TRUE(held_after);
}

TEST(ConditionVariable, InterruptBeforeTheWaitCancelsItOnce) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  std::error_code first;
  std::error_code second;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] {
      std::unique_lock lock(mutex);
      tern::Result<void> waited = cv.wait_for(lock, kLong);
      first = waited ? std::error_code{} : waited.error();
      waited = cv.wait_for(lock, kShort);
      second = waited ? std::error_code{} : waited.error();
    });
    waiter.interrupt();  // before the fiber has even run
    waiter.join();
  });
  EXPECT_EQ(first, std::errc::operation_canceled);
  EXPECT_EQ(second, std::errc::timed_out);
}

TEST(ConditionVariable, NotifyFromAThreadOutsideTheRuntime) {
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  std::atomic<bool> flag{false};
  std::atomic<bool> done{false};
  bool woken = false;
  run(1, [&] {
    std::thread notifier([&] {
      flag = true;
      while (!done.load()) {
        cv.notify_all();
        std::this_thread::yield();
      }
    });
    {
      std::unique_lock lock(mutex);
      woken = static_cast<bool>(
          cv.wait_until(lock, tern::deadline_after(kLong), [&] { return flag.load(); }));
    }
    done = true;
    notifier.join();
  });
  EXPECT_TRUE(woken);
}

// A bounded queue built from a Mutex and two condition variables, used across two workers.
TEST(ConditionVariable, ProducersAndConsumersAcrossTwoWorkers) {
  constexpr int kProducers = 4;
  constexpr int kConsumers = 4;
  constexpr std::size_t kCapacity = 8;
  tern::Mutex mutex;
  tern::ConditionVariable not_full;
  tern::ConditionVariable not_empty;
  std::deque<long> queue;
  int producers_left = kProducers;
  long consumed_sum = 0;
  long consumed_count = 0;
  bool overflow = false;
  tern::WaitGroup group;
  run(2, [&] {
    for (int p = 0; p < kProducers; ++p) {
      post_counted(p % 2, group, [&, p] {
        for (int i = 0; i < kStressOps; ++i) {
          std::unique_lock lock(mutex);
          EXPECT_TRUE(not_full.wait_until(lock, tern::deadline_after(kLong),
                                          [&] { return queue.size() < kCapacity; }));
          queue.push_back(long{p} * kStressOps + i);
          if (queue.size() > kCapacity) overflow = true;
          not_empty.notify_one();
        }
        std::lock_guard hold(mutex);
        if (--producers_left == 0) not_empty.notify_all();
      });
    }
    for (int c = 0; c < kConsumers; ++c) {
      post_counted(c % 2, group, [&] {
        std::unique_lock lock(mutex);
        for (;;) {
          EXPECT_TRUE(not_empty.wait_until(lock, tern::deadline_after(kLong),
                                           [&] { return !queue.empty() || producers_left == 0; }));
          if (queue.empty()) break;
          consumed_sum += queue.front();
          ++consumed_count;
          queue.pop_front();
          not_full.notify_one();
        }
      });
    }
    wait_all(group);
  });
  const long total = long{kProducers} * kStressOps;
  EXPECT_FALSE(overflow);
  EXPECT_EQ(consumed_count, total);
  EXPECT_EQ(consumed_sum, total * (total - 1) / 2);
  EXPECT_TRUE(queue.empty());
}

TEST(ConditionVariable, ShutdownCancelsParkedWaitersOnBothWorkers) {
  constexpr int kWaiters = 6;
  tern::Mutex mutex;
  tern::ConditionVariable cv;
  tern::ConditionVariable parked_cv;
  int parked = 0;
  std::atomic<int> cancelled{0};
  std::atomic<int> held_after{0};
  run(2, [&] {
    for (int i = 0; i < kWaiters; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&, i] {
        std::unique_lock lock(mutex);
        ++parked;
        parked_cv.notify_one();
        tern::Result<void> waited =
            i % 2 == 0 ? cv.wait(lock) : cv.wait(lock, [] { return false; });
        if (!waited && waited.error() == std::errc::operation_canceled) ++cancelled;
        if (lock.owns_lock()) ++held_after;
      }));
    }
    std::unique_lock lock(mutex);
    EXPECT_TRUE(parked_cv.wait_until(lock, tern::deadline_after(kLong),
                                     [&] { return parked == kWaiters; }));
    // Returning with every waiter parked (worker 1's may still be on their way into cv.wait).
  });
  EXPECT_EQ(cancelled.load(), kWaiters);
  EXPECT_EQ(held_after.load(), kWaiters);
}

}  // namespace
