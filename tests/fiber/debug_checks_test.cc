// Debug-build checks: a fiber that waits while holding a std::mutex, and a Fiber handle used
// from another worker, abort with a message naming the fiber.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>

#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/mutex.h"
#include "tern/fiber/runtime.h"

namespace {

using namespace std::chrono_literals;

#if TERN_MUTEX_CHECK

TEST(MutexCheckDeathTest, WaitingWhileHoldingAStdMutexAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          tern::spawn(
              [] {
                static std::mutex m;
                std::lock_guard hold(m);
                (void)tern::this_fiber::sleep_for(1ms);
              },
              {.name = "holder"})
              .join();
        });
      },
      "fiber 'holder' \\(id [0-9]+\\) is about to wait or yield while holding a std::mutex");
}

TEST(MutexCheckDeathTest, YieldingWhileHoldingAStdMutexAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          std::mutex m;
          std::unique_lock hold(m);
          tern::this_fiber::yield();
        });
      },
      "while holding a std::mutex");
}

TEST(MutexCheck, ReleasingBeforeWaitingIsFine) {
  tern::Runtime runtime({.workers = 1});
  runtime.run([] {
    std::mutex m;
    for (int i = 0; i < 100; ++i) {
      {
        std::lock_guard hold(m);
      }
      tern::this_fiber::yield();
    }
    tern::Mutex fiber_mutex;
    std::unique_lock hold(fiber_mutex);  // a tern::Mutex may be held across waits
    tern::this_fiber::yield();
  });
}

#endif  // TERN_MUTEX_CHECK

#if TERN_DEBUG_CHECKS

TEST(HandleCheckDeathTest, UsingAHandleFromAnotherWorkerAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 2});
        runtime.run([] {
          tern::Event stop;
          tern::Fiber sleeper = tern::spawn([&] { (void)stop.wait(); }, {.name = "owned"});
          tern::Event done;
          (void)tern::post(1, [&] {
            sleeper.interrupt();  // wrong worker
            done.set();
          });
          (void)done.wait_for(30s);
          stop.set();
          sleeper.join();
        });
      },
      "Fiber::interrupt on fiber 'owned' \\(id [0-9]+\\) from another thread");
}

#endif  // TERN_DEBUG_CHECKS

}  // namespace
