// tern::Event: set/reset, waking every waiter, deadlines, interruption, sets from other
// threads and workers, ping-pong across workers, shutdown.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <tern/fiber/event.h>
#include <tern/fiber/fiber.h>
#include <tern/fiber/runtime.h>
#include <tern/fiber/wait_group.h>

#include "sync_test_util.h"

namespace {

using namespace tern_test;

std::error_code error_of(const tern::Result<void>& result) {
  return result ? std::error_code{} : result.error();
}

TEST(Event, SetAndResetOutsideAnyRuntime) {
  tern::Event event;
  EXPECT_FALSE(event.is_set());
  event.set();
  EXPECT_TRUE(event.is_set());
  event.set();  // setting twice is harmless
  EXPECT_TRUE(event.is_set());
  event.reset();
  EXPECT_FALSE(event.is_set());
  event.reset();
  EXPECT_FALSE(event.is_set());
}

TEST(Event, WaitOnASetEventPassesAtOnce) {
  tern::Event event;
  run(1, [&] {
    event.set();
    EXPECT_TRUE(event.wait());
    EXPECT_TRUE(event.wait());  // manual reset: stays set
    EXPECT_TRUE(event.wait_until(tern::Clock::now() - 1s));
    EXPECT_TRUE(event.is_set());
  });
}

TEST(Event, SetWakesEveryWaiterOnBothWorkers) {
  constexpr int kWaiters = 8;
  tern::Event event;
  tern::WaitGroup started;
  tern::WaitGroup group;
  std::atomic<int> woken{0};
  run(2, [&] {
    started.add(kWaiters);
    for (int i = 0; i < kWaiters; ++i) {
      post_counted(i % 2, group, [&] {
        started.done();
        if (event.wait_for(kLong)) ++woken;
      });
    }
    ASSERT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
    EXPECT_EQ(woken.load(), 0);
    event.set();
    wait_all(group);
  });
  EXPECT_EQ(woken.load(), kWaiters);
}

TEST(Event, WaitersClaimedBySetReturnEvenIfResetFollowsAtOnce) {
  tern::Event event;
  std::vector<std::error_code> results(3, std::make_error_code(std::errc::io_error));
  run(1, [&] {
    std::vector<tern::Fiber> fibers;
    for (int i = 0; i < 3; ++i) {
      fibers.push_back(tern::spawn([&, i] { results[i] = error_of(event.wait_for(kLong)); }));
    }
    tern::this_fiber::yield();  // all three park
    event.set();
    event.reset();
    for (tern::Fiber& fiber : fibers) fiber.join();
    EXPECT_FALSE(event.is_set());
  });
  for (const std::error_code& result : results) EXPECT_EQ(result, std::error_code{});
}

TEST(Event, WaitForTimesOutAfterTheTimeout) {
  tern::Event event;
  run(1, [&] {
    const auto start = tern::Clock::now();
    const std::error_code result = error_of(event.wait_for(kShort));
    const auto elapsed = since(start);
    EXPECT_EQ(result, std::errc::timed_out);
    EXPECT_TRUE(is_deadline(result));
    EXPECT_GE(elapsed, kShort);
    EXPECT_TRUE(is_deadline(error_of(event.wait_until(tern::Clock::now() - 1s))));
    // After set and reset, waits block again.
    event.set();
    event.reset();
    const auto again = tern::Clock::now();
    EXPECT_EQ(error_of(event.wait_for(kShort)), std::errc::timed_out);
    EXPECT_GE(since(again), kShort);
  });
}

TEST(Event, TimedOutWaiterDoesNotHoldUpALaterSet) {
  tern::Event event;
  std::error_code short_result;
  std::error_code long_result;
  run(1, [&] {
    tern::Fiber short_waiter =
        tern::spawn([&] { short_result = error_of(event.wait_for(kShort)); });
    tern::Fiber long_waiter = tern::spawn([&] { long_result = error_of(event.wait_for(kLong)); });
    short_waiter.join();
    event.set();
    long_waiter.join();
  });
  EXPECT_EQ(short_result, std::errc::timed_out);
  EXPECT_EQ(long_result, std::error_code{});
}

TEST(Event, InterruptCancelsAWait) {
  tern::Event event;
  std::error_code result;
  std::error_code after;
  run(1, [&] {
    tern::Fiber waiter = tern::spawn([&] {
      result = error_of(event.wait());
      after = error_of(event.wait_for(kShort));  // the interrupt was used up
    });
    tern::this_fiber::yield();  // the waiter parks
    waiter.interrupt();
    waiter.join();
    EXPECT_FALSE(event.is_set());
  });
  EXPECT_EQ(result, std::errc::operation_canceled);
  EXPECT_EQ(after, std::errc::timed_out);
}

TEST(Event, InterruptDoesNotCancelAWaitThatPassesAtOnce) {
  tern::Event event;
  std::error_code result{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    event.set();
    tern::Fiber waiter = tern::spawn([&] { result = error_of(event.wait()); });
    waiter.interrupt();
    waiter.join();
  });
  EXPECT_EQ(result, std::error_code{});
}

TEST(Event, SetFromAThreadOutsideTheRuntime) {
  tern::Event event;
  std::error_code result{std::make_error_code(std::errc::io_error)};
  run(1, [&] {
    std::thread setter([&] { event.set(); });
    result = error_of(event.wait_for(kLong));
    setter.join();
  });
  EXPECT_EQ(result, std::error_code{});
}

TEST(Event, PingPongAcrossTwoWorkers) {
  tern::Event ping;
  tern::Event pong;
  int pongs = 0;
  long shared = 0;  // not atomic: each side touches it only after the other's set
  tern::WaitGroup group;
  run(2, [&] {
    post_counted(1, group, [&] {
      for (int i = 0; i < kStressOps; ++i) {
        if (!ping.wait_for(kLong)) {
          ADD_FAILURE() << "no ping " << i;
          return;
        }
        ping.reset();
        ++shared;
        ++pongs;
        pong.set();
      }
    });
    for (int i = 0; i < kStressOps; ++i) {
      ++shared;
      ping.set();
      if (!pong.wait_for(kLong)) {
        ADD_FAILURE() << "no pong " << i;
        break;
      }
      pong.reset();
    }
    wait_all(group);
  });
  EXPECT_EQ(pongs, kStressOps);
  EXPECT_EQ(shared, 2L * kStressOps);
}

TEST(Event, ManySettersAndWaitersAcrossTwoWorkers) {
  constexpr int kRounds = 200;
  constexpr int kWaiters = 6;
  std::vector<tern::Event> gates(kRounds);
  std::atomic<int> passed{0};
  tern::WaitGroup group;
  run(2, [&] {
    for (int w = 0; w < kWaiters; ++w) {
      post_counted(w % 2, group, [&] {
        for (tern::Event& gate : gates) {
          if (!gate.wait_for(kLong)) {
            ADD_FAILURE() << "a gate never opened";
            return;
          }
          ++passed;
        }
      });
    }
    // Open the gates from both workers, the odd ones from worker 1.
    post_counted(1, group, [&] {
      for (int r = 1; r < kRounds; r += 2) gates[r].set();
    });
    for (int r = 0; r < kRounds; r += 2) {
      gates[r].set();
      if (r % 8 == 0) tern::this_fiber::yield();
    }
    wait_all(group);
  });
  EXPECT_EQ(passed.load(), kRounds * kWaiters);
}

TEST(Event, ShutdownCancelsParkedWaitersOnBothWorkers) {
  constexpr int kWaiters = 6;
  tern::Event event;
  tern::WaitGroup started;
  std::atomic<int> cancelled{0};
  run(2, [&] {
    started.add(kWaiters);
    for (int i = 0; i < kWaiters; ++i) {
      ASSERT_TRUE(tern::post(i % 2, [&] {
        started.done();
        if (error_of(event.wait()) == std::errc::operation_canceled) ++cancelled;
      }));
    }
    EXPECT_TRUE(started.wait_for(kLong));
    tern::this_fiber::yield();
  });
  EXPECT_EQ(cancelled.load(), kWaiters);
  EXPECT_FALSE(event.is_set());
}

}  // namespace
