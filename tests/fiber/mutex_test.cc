// tern::Mutex: try_lock, FIFO hand-over, deadlines, no interruption, mutual exclusion across
// workers, shutdown with fibers parked on the lock.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include <tern/fiber/event.h>
#include <tern/fiber/fiber.h>
#include <tern/fiber/mutex.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

TEST(Mutex, TryLockOutsideAnyRuntime) {
  tern::Mutex mutex;
  EXPECT_TRUE(mutex.try_lock());
  EXPECT_FALSE(mutex.try_lock());
  mutex.unlock();
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
  {
    std::unique_lock lock(mutex, std::try_to_lock);
    EXPECT_TRUE(lock.owns_lock());
    EXPECT_FALSE(mutex.try_lock());
  }
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(Mutex, LockUnlockInAFiberAndStdLockGuard) {
  tern::Mutex mutex;
  int value = 0;
  run(1, [&] {
    mutex.lock();
    EXPECT_FALSE(mutex.try_lock());
    ++value;
    mutex.unlock();
    {
      std::lock_guard hold(mutex);
      ++value;
    }
    EXPECT_TRUE(mutex.try_lock_for(kShort));
    mutex.unlock();
    // A free lock is taken even when the deadline has passed.
    EXPECT_TRUE(mutex.try_lock_until(tern::Clock::now() - 1s));
    mutex.unlock();
  });
  EXPECT_EQ(value, 2);
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(Mutex, TryLockFromAnotherThreadSeesAFiberHoldingIt) {
  tern::Mutex mutex;
  run(1, [&] {
    mutex.lock();
    bool taken_while_held = true;
    std::thread([&] { taken_while_held = mutex.try_lock(); }).join();
    EXPECT_FALSE(taken_while_held);
    mutex.unlock();
    bool taken_when_free = false;
    std::thread([&] {
      taken_when_free = mutex.try_lock();
      if (taken_when_free) mutex.unlock();
    }).join();
    EXPECT_TRUE(taken_when_free);
  });
}

TEST(Mutex, UnlockHandsTheLockToWaitersInArrivalOrder) {
  tern::Mutex mutex;
  std::vector<int> order;
  run(1, [&] {
    mutex.lock();
    std::vector<tern::Fiber> fibers;
    for (int i = 0; i < 5; ++i) {
      fibers.push_back(tern::spawn([&, i] {
        mutex.lock();
        order.push_back(i);
        mutex.unlock();
      }));
      tern::this_fiber::yield();  // fiber i runs and queues on the lock before fiber i + 1
    }
    EXPECT_TRUE(order.empty());
    // A try_lock does not jump the queue: the lock stays held while fibers wait for it.
    EXPECT_FALSE(mutex.try_lock());
    mutex.unlock();
    for (tern::Fiber& fiber : fibers) fiber.join();
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Mutex, TryLockForTimesOutAfterTheTimeout) {
  tern::Mutex mutex;
  run(1, [&] {
    mutex.lock();
    bool taken = true;
    tern::Clock::duration elapsed{};
    tern::Fiber waiter = tern::spawn([&] {
      const auto start = tern::Clock::now();
      taken = mutex.try_lock_for(kShort);
      elapsed = since(start);
    });
    waiter.join();
    EXPECT_FALSE(taken);
    EXPECT_GE(elapsed, kShort);
    // A deadline already passed fails at once while the lock is held.
    EXPECT_FALSE(mutex.try_lock_until(tern::Clock::now() - 1s));
    // The timed-out waiter left the queue: unlock frees the lock.
    mutex.unlock();
    EXPECT_TRUE(mutex.try_lock());
    mutex.unlock();
  });
}

TEST(Mutex, TryLockForGetsTheLockWhenReleasedInTime) {
  tern::Mutex mutex;
  run(1, [&] {
    mutex.lock();
    bool taken = false;
    tern::Fiber waiter = tern::spawn([&] {
      taken = mutex.try_lock_for(kLong);
      if (taken) mutex.unlock();
    });
    tern::this_fiber::yield();  // the waiter parks on the lock
    mutex.unlock();
    waiter.join();
    EXPECT_TRUE(taken);
    EXPECT_TRUE(mutex.try_lock());
    mutex.unlock();
  });
}

TEST(Mutex, TimedOutWaitersDoNotDisturbTheOnesStillWaiting) {
  tern::Mutex mutex;
  std::atomic<int> timed_out{0};
  std::atomic<int> acquired{0};
  tern::WaitGroup group;
  tern::WaitGroup gave_up;
  run(2, [&] {
    mutex.lock();
    gave_up.add(3);
    for (int i = 0; i < 6; ++i) {
      post_counted(i % 2, group, [&, i] {
        // Odd fibers give up early; even ones wait until the holder lets go.
        if (mutex.try_lock_for(i % 2 == 1 ? kShort : kLong)) {
          ++acquired;
          mutex.unlock();
        } else {
          ++timed_out;
          gave_up.done();
        }
      });
    }
    // Let the short waits expire while the lock is held.
    EXPECT_TRUE(gave_up.wait_for(kLong));
    EXPECT_EQ(acquired.load(), 0);
    mutex.unlock();
    wait_all(group);
  });
  EXPECT_EQ(timed_out.load(), 3);
  EXPECT_EQ(acquired.load(), 3);
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(Mutex, LockIsNotInterruptible) {
  tern::Mutex mutex;
  tern::Event never;
  bool acquired = false;
  std::error_code later_wait;
  run(1, [&] {
    mutex.lock();
    tern::Fiber waiter = tern::spawn([&] {
      mutex.lock();
      acquired = true;
      mutex.unlock();
      // The interrupt is still pending and hits the next interruptible wait.
      tern::Result<void> waited = never.wait_for(kLong);
      later_wait = waited ? std::error_code{} : waited.error();
    });
    tern::this_fiber::yield();  // the waiter parks on the lock
    waiter.interrupt();
    for (int i = 0; i < 10; ++i) tern::this_fiber::yield();
    EXPECT_FALSE(acquired) << "an interrupt woke a fiber waiting in Mutex::lock";
    mutex.unlock();
    waiter.join();
  });
  EXPECT_TRUE(acquired);
  EXPECT_EQ(later_wait, std::errc::operation_canceled);
}

TEST(Mutex, TryLockForIsNotInterruptible) {
  tern::Mutex mutex;
  bool taken = true;
  tern::Clock::duration elapsed{};
  run(1, [&] {
    mutex.lock();
    tern::Fiber waiter = tern::spawn([&] {
      const auto start = tern::Clock::now();
      taken = mutex.try_lock_for(kShort);
      elapsed = since(start);
    });
    tern::this_fiber::yield();
    waiter.interrupt();
    waiter.join();
    mutex.unlock();
  });
  EXPECT_FALSE(taken);
  EXPECT_GE(elapsed, kShort);
}

TEST(Mutex, MutualExclusionAcrossTwoWorkers) {
  constexpr int kFibers = 8;
  tern::Mutex mutex;
  long counter = 0;  // deliberately not atomic: the lock must order every access
  int inside = 0;
  int overlaps = 0;
  tern::WaitGroup group;
  run(2, [&] {
    for (int f = 0; f < kFibers; ++f) {
      post_counted(f % 2, group, [&] {
        for (int i = 0; i < kStressOps; ++i) {
          std::lock_guard hold(mutex);
          if (++inside != 1) ++overlaps;
          ++counter;
          // Now and then hold the lock across a switch so waiters pile up on both workers.
          if (i % 97 == 0) tern::this_fiber::yield();
          --inside;
        }
      });
    }
    wait_all(group);
  });
  EXPECT_EQ(overlaps, 0);
  EXPECT_EQ(counter, long{kFibers} * kStressOps);
}

TEST(Mutex, TimedAndPlainLockersAcrossTwoWorkers) {
  constexpr int kFibers = 6;
  tern::Mutex mutex;
  long counter = 0;
  std::atomic<long> successes{0};
  tern::WaitGroup group;
  run(2, [&] {
    for (int f = 0; f < kFibers; ++f) {
      post_counted(f % 2, group, [&, f] {
        for (int i = 0; i < kStressOps; ++i) {
          bool taken = false;
          switch ((f + i) % 3) {
            case 0:
              mutex.lock();
              taken = true;
              break;
            case 1:
              taken = mutex.try_lock();
              break;
            default:
              taken = mutex.try_lock_for(std::chrono::microseconds(50));
              break;
          }
          if (!taken) continue;
          ++counter;
          ++successes;
          if (i % 101 == 0) tern::this_fiber::yield();
          mutex.unlock();
        }
      });
    }
    wait_all(group);
  });
  EXPECT_EQ(counter, successes.load());
  EXPECT_GE(successes.load(), long{kFibers} * kStressOps / 3);  // every plain lock() counts
  EXPECT_TRUE(mutex.try_lock());
  mutex.unlock();
}

TEST(Mutex, ShutdownWithFibersParkedOnTheLock) {
  tern::Mutex mutex;
  tern::Event never;
  tern::WaitGroup holding;
  std::atomic<int> acquired{0};
  std::error_code holder_wait;
  int counter = 0;
  run(2, [&] {
    holding.add();
    // The holder waits (interruptibly) with the lock held until shutdown cancels its wait.
    tern::spawn([&] {
      std::lock_guard hold(mutex);
      holding.done();
      tern::Result<void> waited = never.wait();
      holder_wait = waited ? std::error_code{} : waited.error();
      ++counter;
    }).detach();
    ASSERT_TRUE(holding.wait_for(kLong));
    for (int i = 0; i < 6; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        std::lock_guard hold(mutex);
        ++counter;
        ++acquired;
      }));
    }
    tern::this_fiber::yield();  // the worker-0 lockers park on the lock before run() ends
  });
  EXPECT_EQ(holder_wait, std::errc::operation_canceled);
  EXPECT_EQ(acquired.load(), 6);
  EXPECT_EQ(counter, 7);
}

}  // namespace
