// tern::spawn and the Fiber handle, this_fiber, fiber-local storage, timers, interruption.
#include <gtest/gtest.h>

#include <atomic>
#include <cfenv>
#include <chrono>
#include <cstddef>
#include <string>
#include <system_error>
#include <vector>

#include "tern/base/assert.h"
#include "tern/fiber/detail/run_next.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/fiber_local.h"
#include "tern/fiber/runtime.h"
#include "tern/prof/metrics.h"
#include "test_scale.h"
#include "yields_until_post_runs.h"

namespace {

using namespace std::chrono_literals;

// Runs fn as the first fiber of a one-worker runtime.
template <typename Fn>
void on_one_worker(Fn&& fn) {
  tern::Runtime runtime({.workers = 1});
  runtime.run(std::forward<Fn>(fn));
}

TEST(Spawn, RunsTheCallableAndJoinWaitsForIt) {
  on_one_worker([] {
    int ran = 0;
    tern::Fiber fiber = tern::spawn([&] { ran = 42; });
    EXPECT_TRUE(fiber.joinable());
    EXPECT_EQ(ran, 0) << "a spawned fiber runs when its creator yields or waits";
    fiber.join();
    EXPECT_FALSE(fiber.joinable());
    EXPECT_EQ(ran, 42);
  });
}

// With start_spawned_first on, a spawned fiber runs ahead of those that were ready before it;
// off again, spawns queue last.
TEST(Spawn, StartSpawnedFirstRunsTheNewFiberFirst) {
  on_one_worker([] {
    std::vector<int> order;
    tern::Fiber first = tern::spawn([&] { order.push_back(1); });
    tern::Fiber second = tern::spawn([&] { order.push_back(2); });
    tern::detail::start_spawned_first(true);
    tern::Fiber third = tern::spawn([&] { order.push_back(3); });
    tern::detail::start_spawned_first(false);
    tern::Fiber fourth = tern::spawn([&] { order.push_back(4); });
    first.join();
    second.join();
    third.join();
    fourth.join();
    EXPECT_EQ(order, (std::vector<int>{3, 1, 2, 4}));
    order.clear();
    tern::detail::start_spawned_first(true);  // with nothing else ready
    tern::Fiber fifth = tern::spawn([&] { order.push_back(5); });
    tern::detail::start_spawned_first(false);
    tern::Fiber sixth = tern::spawn([&] { order.push_back(6); });
    fifth.join();
    sixth.join();
    EXPECT_EQ(order, (std::vector<int>{5, 6}));
  });
}

TEST(Spawn, JoinAfterTheFiberFinished) {
  on_one_worker([] {
    bool ran = false;
    tern::Fiber fiber = tern::spawn([&] { ran = true; });
    tern::this_fiber::yield();
    EXPECT_TRUE(ran);
    fiber.join();
  });
}

TEST(Spawn, DetachedFibersFinishAndFreeThemselves) {
  std::atomic<int> finished{0};
  on_one_worker([&] {
    for (int i = 0; i < 1000; ++i) tern::spawn([&] { finished++; }).detach();
  });
  EXPECT_EQ(finished.load(), 1000) << "run() waits for detached fibers";
}

TEST(Spawn, CapturesAreMovedAndDestroyedInTheFiber) {
  on_one_worker([] {
    auto shared = std::make_shared<int>(5);
    std::weak_ptr<int> watch = shared;
    tern::Fiber fiber = tern::spawn([owned = std::move(shared)] { EXPECT_EQ(*owned, 5); });
    EXPECT_FALSE(watch.expired());
    fiber.join();
    EXPECT_TRUE(watch.expired()) << "the callable is destroyed when the fiber ends";
  });
}

TEST(Spawn, ManyFibersWithCustomStackSizes) {
  on_one_worker([] {
    std::vector<tern::Fiber> fibers;
    long sum = 0;
    for (int i = 0; i < 200; ++i) {
      const std::size_t stack = (i % 2 == 0) ? 16 * 1024 : 256 * 1024;
      fibers.push_back(tern::spawn(
          [&sum, i] {
            volatile char scratch[8 * 1024];
            scratch[0] = static_cast<char>(i);
            tern::this_fiber::yield();
            sum += scratch[0];
          },
          {.stack_size = stack}));
    }
    for (tern::Fiber& f : fibers) f.join();
    long expected = 0;
    for (int i = 0; i < 200; ++i) expected += static_cast<char>(i);
    EXPECT_EQ(sum, expected);
  });
}

// Spawns `fibers` fibers on the calling worker, each recording its number (1, 2, ...) and
// yielding `rounds` times, joins them, and returns the numbers in the order they were recorded.
std::vector<int> yield_turns(int fibers, int rounds) {
  std::vector<int> trace;
  std::vector<tern::Fiber> spawned;
  for (int who = 1; who <= fibers; ++who) {
    spawned.push_back(tern::spawn([&trace, who, rounds] {
      for (int i = 0; i < rounds; ++i) {
        trace.push_back(who);
        tern::this_fiber::yield();
      }
    }));
  }
  for (tern::Fiber& fiber : spawned) fiber.join();
  return trace;
}

TEST(Yield, AlternatesFibersOnOneWorker) {
  on_one_worker([] { EXPECT_EQ(yield_turns(2, 3), (std::vector<int>{1, 2, 1, 2, 1, 2})); });
}

TEST(Yield, ThreeFibersTakeTurnsInOrder) {
  // A yield hands the worker to the first ready fiber and queues the yielder behind every
  // other ready fiber: with three, each runs once per round, in the order they were spawned.
  on_one_worker(
      [] { EXPECT_EQ(yield_turns(3, 4), (std::vector<int>{1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3})); });
}

TEST(Yield, BusyYieldersLeaveTheWorkerLoopItsTurnEvery64Switches) {
  // Two fibers that only yield to each other must not starve the worker's loop, which takes
  // in posted work, fires timers and polls for I/O: it gets the worker once in 64 switches.
  // A task this worker posts to itself runs only after such a turn, so it must have run
  // after at most 32 round trips of the two yielders (plus the switches around the turn).
  on_one_worker([] {
    bool posted_ran = false;
    bool other_stop = false;
    tern::Fiber other = tern::spawn([&] {
      while (!other_stop) tern::this_fiber::yield();
    });
    tern::this_fiber::yield();  // the other fiber is up and yielding
    ASSERT_TRUE(tern::post(0, [&posted_ran] { posted_ran = true; }));
    int yields = 0;
    while (!posted_ran && yields < 1000) {
      tern::this_fiber::yield();
      ++yields;
    }
    EXPECT_TRUE(posted_ran);
    EXPECT_LE(yields, 34) << "the loop's turn came late";
    // A timer fires while both keep yielding, too.
    bool slept = false;
    tern::Fiber sleeper = tern::spawn([&slept] {
      EXPECT_TRUE(tern::this_fiber::sleep_for(1ms));
      slept = true;
    });
    const auto give_up = tern::Clock::now() + 10s;
    while (!slept && tern::Clock::now() < give_up) tern::this_fiber::yield();
    EXPECT_TRUE(slept) << "a timer did not fire while two fibers kept yielding";
    other_stop = true;
    other.join();
    sleeper.join();
  });
}

TEST(Yield, BusyYieldersOnSmallStacksLeaveTheWorkerLoopItsTurnToo) {
  // Yielders with stacks of 32 KiB or more take the loop's turn on their own stack; smaller
  // ones (these get the least, 16 KiB) switch to the worker's loop for it. Either way a posted
  // task runs within a turn.
  on_one_worker([] {
    const tern::FiberOptions small{.stack_size = 16 * 1024};
    bool stop = false;
    int yields = -1;
    tern::Fiber other = tern::spawn(
        [&stop] {
          while (!stop) tern::this_fiber::yield();
        },
        small);
    tern::Fiber poster = tern::spawn(
        [&] {
          tern::this_fiber::yield();  // the other fiber is up and yielding
          yields = tern_test::yields_until_post_runs();
          stop = true;
        },
        small);
    poster.join();
    stop = true;
    other.join();
    EXPECT_GE(yields, 0) << "the posted task did not run";
    EXPECT_LE(yields, 34) << "the loop's turn came late";
  });
}

TEST(Yield, AloneReturnsAtOnce) {
  on_one_worker([] {
    for (int i = 0; i < 1000; ++i) tern::this_fiber::yield();
  });
}

// 1/3 in the current rounding mode; volatile so it is computed at run time.
double one_third_now() {
  volatile double one = 1.0;
  volatile double three = 3.0;
  return one / three;
}

TEST(Yield, EachFiberKeepsItsOwnRoundingModeAcrossSwitches) {
  // Every way a fiber leaves and gets the worker back (a yield from its own code, a yield from
  // shared code, a join, the worker's main loop every few dozen switches) must give it back its
  // own MXCSR / x87 rounding mode, which the System V ABI makes callee-saved.
  const int original = std::fegetround();
  ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
  const double upward = one_third_now();
  ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
  const double toward_zero = one_third_now();
  ASSERT_EQ(std::fesetround(FE_DOWNWARD), 0);
  const double downward = one_third_now();
  std::fesetround(original);
  ASSERT_NE(upward, toward_zero);
  ASSERT_NE(upward, downward);

  int errors = 0;
  constexpr int kRounds = 1000;  // many main-loop turns (one every 64 switches)
  auto shared_loop = [&errors](int mode, double expected) {
    for (int i = 0; i < kRounds; ++i) {
      tern::this_fiber::yield();
      if (std::fegetround() != mode || one_third_now() != expected) ++errors;
    }
  };
  on_one_worker([&] {
    tern::Fiber up = tern::spawn([&] {
      std::fesetround(FE_UPWARD);
      shared_loop(FE_UPWARD, upward);
    });
    tern::Fiber zero = tern::spawn([&] {
      std::fesetround(FE_TOWARDZERO);
      shared_loop(FE_TOWARDZERO, toward_zero);
    });
    tern::Fiber down = tern::spawn([&] {
      std::fesetround(FE_DOWNWARD);
      for (int i = 0; i < kRounds; ++i) {  // yields from a call site of its own
        tern::this_fiber::yield();
        if (std::fegetround() != FE_DOWNWARD || one_third_now() != downward) ++errors;
      }
    });
    std::fesetround(FE_UPWARD);
    const double mine = one_third_now();
    up.join();
    zero.join();
    down.join();
    if (std::fegetround() != FE_UPWARD || one_third_now() != mine) ++errors;
    std::fesetround(original);
  });
  EXPECT_EQ(errors, 0);
}

TEST(Join, AFiberThatEndsInAnotherRoundingModeGivesItsJoinerBackItsOwn) {
  // A finishing fiber resumes its joiner without saving itself (tern_exit_context); the joiner
  // must still get back its own MXCSR / x87 rounding mode.
  const int original = std::fegetround();
  ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
  const double toward_zero = one_third_now();
  std::fesetround(original);
  int errors = 0;
  on_one_worker([&] {
    std::fesetround(FE_TOWARDZERO);
    for (int i = 0; i < 100; ++i) {
      tern::spawn([i] { std::fesetround(i % 2 == 0 ? FE_UPWARD : FE_DOWNWARD); }).join();
      if (std::fegetround() != FE_TOWARDZERO || one_third_now() != toward_zero) ++errors;
    }
    std::fesetround(original);
  });
  EXPECT_EQ(errors, 0);
}

TEST(ThisFiber, IdsAreUniqueAndNamesAreKept) {
  on_one_worker([] {
    const std::uint64_t main_id = tern::this_fiber::id();
    EXPECT_NE(main_id, 0u);
    std::uint64_t child_id = 0;
    std::string child_name;
    tern::Fiber child = tern::spawn(
        [&] {
          child_id = tern::this_fiber::id();
          child_name = std::string(tern::this_fiber::name());
          tern::this_fiber::set_name("renamed-with-a-name-longer-than-thirty-one-characters");
          child_name += "|" + std::string(tern::this_fiber::name());
        },
        {.name = "worker-a"});
    const std::uint64_t handle_id = child.id();
    child.join();
    EXPECT_EQ(child_id, handle_id);
    EXPECT_NE(child_id, main_id);
    EXPECT_EQ(child_name, "worker-a|renamed-with-a-name-longer-than");
  });
}

TEST(Spawn, AReusedFiberStartsWithNothingOfTheLastOne) {
  // A finished fiber's control block and stack are kept for the next spawn: nothing of the
  // last fiber's name, pending interrupt or fiber-locals may show in the next one.
  static tern::FiberLocal<int> local;
  on_one_worker([] {
    std::uint64_t first_id = 0;
    tern::Fiber first = tern::spawn(
        [&first_id] {
          first_id = tern::this_fiber::id();
          *local = 7;
          tern::this_fiber::set_name("first-fiber-long-name");
          tern::this_fiber::yield();  // the interrupt comes in here and is never seen
        },
        {.name = "first"});
    tern::this_fiber::yield();
    first.interrupt();
    first.join();
    for (int i = 0; i < 3; ++i) {
      std::uint64_t id = 0;
      std::string name = "unset";
      bool stop_requested = true;
      int local_value = -1;
      tern::Result<void> slept = tern::fail(std::errc::invalid_argument);
      tern::Fiber next = tern::spawn(
          [&] {
            id = tern::this_fiber::id();
            name = std::string(tern::this_fiber::name());
            stop_requested = tern::this_fiber::stop_requested();
            local_value = *local;
            *local = 9;
            slept = tern::this_fiber::sleep_for(1ms);
          },
          {.name = i == 1 ? "" : "ab"});
      next.join();
      EXPECT_NE(id, first_id);
      EXPECT_EQ(name, i == 1 ? "" : "ab");
      EXPECT_FALSE(stop_requested);
      EXPECT_EQ(local_value, 0);
      EXPECT_TRUE(slept) << "the last fiber's interrupt reached this one: "
                         << slept.error().message();
    }
  });
}

TEST(Sleep, SleepsAtLeastTheDuration) {
  on_one_worker([] {
    const auto start = tern::Clock::now();
    ASSERT_TRUE(tern::this_fiber::sleep_for(20ms));
    EXPECT_GE(tern::Clock::now() - start, 20ms);
    ASSERT_TRUE(tern::this_fiber::sleep_until(tern::Clock::now() - 1s)) << "past deadline";
  });
}

// A worker whose fibers keep yielding never parks: its timers are checked between switches.
TEST(Sleep, TimersFireWhileAnotherFiberKeepsYielding) {
  on_one_worker([] {
    bool slept = false;
    tern::Fiber sleeper = tern::spawn([&] {
      const auto deadline = tern::Clock::now() + 3ms;
      ASSERT_TRUE(tern::this_fiber::sleep_until(deadline));
      EXPECT_GE(tern::Clock::now(), deadline) << "never early";
      slept = true;
    });
    const auto give_up = tern::Clock::now() + 10s;
    while (!slept && tern::Clock::now() < give_up) tern::this_fiber::yield();
    EXPECT_TRUE(slept) << "the timer fired while the worker never went idle";
    sleeper.join();
  });
}

TEST(Sleep, TimersFireInDeadlineOrder) {
  on_one_worker([] {
    std::vector<int> order;
    std::vector<tern::Fiber> fibers;
    const auto base = tern::Clock::now() + 30ms;
    for (int i : {5, 1, 4, 2, 3}) {
      fibers.push_back(tern::spawn([&order, base, i] {
        ASSERT_TRUE(tern::this_fiber::sleep_until(base + i * 5ms));
        order.push_back(i);
      }));
    }
    for (tern::Fiber& f : fibers) f.join();
    EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
  });
}

TEST(Sleep, ManySleepersWithTheSameDeadlineAllWake) {
  on_one_worker([] {
    int woke = 0;
    std::vector<tern::Fiber> fibers;
    const auto deadline = tern::Clock::now() + 10ms;
    const int count = tern_test::scaled(10000);
    for (int i = 0; i < count; ++i) {
      fibers.push_back(tern::spawn([&] {
        ASSERT_TRUE(tern::this_fiber::sleep_until(deadline));
        ++woke;
      }));
    }
    for (tern::Fiber& f : fibers) f.join();
    EXPECT_EQ(woke, count);
  });
}

TEST(Sleep, HundredThousandPendingTimersFireInOrderAndNeverEarly) {
  on_one_worker([] {
    const int count = tern_test::scaled(100000);
    int woke = 0;
    int early = 0;
    int slept = 0;
    int out_of_order = 0;
    int parked = 0;
    int warmed = 0;
    tern::Deadline last_fired{};
    tern::Deadline base{};
    tern::Event warm;  // a first wake-up of every fiber, timed to choose how far off `base` is
    tern::Event go;
    std::vector<tern::Fiber> fibers;
    fibers.reserve(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) {
      // Deadlines spread over 200 ms in a scrambled order.
      const auto offset = std::chrono::microseconds((i * 7919) % 200000);
      fibers.push_back(tern::spawn(
          [&, offset] {
            ++parked;
            ASSERT_TRUE(warm.wait());
            ++warmed;
            ASSERT_TRUE(go.wait());  // every fiber exists and waits before the clock starts
            const auto deadline = base + offset;
            // Pending with room to spare: under TSan on a busy machine the worker can be
            // descheduled between this check and the timer's insertion.
            const bool pending = tern::Clock::now() + 20ms < deadline;
            ASSERT_TRUE(tern::this_fiber::sleep_until(deadline));
            if (tern::Clock::now() < deadline) ++early;
            if (pending) {  // it really waited for its timer
              ++slept;
              if (deadline < last_fired) ++out_of_order;
              last_fired = deadline;
            }
            ++woke;
          },
          {.stack_size = 16 * 1024}));
    }
    while (parked < count) tern::this_fiber::yield();
    // The deadlines start 1 s plus twice the time one wake-up of every fiber takes now, so the
    // fibers get to sleep before their deadlines even where that pass is slow (under TSan on a
    // busy machine it took over a second, and then no timer was pending).
    const tern::Deadline warm_start = tern::Clock::now();
    warm.set();
    while (warmed < count) tern::this_fiber::yield();
    base = tern::Clock::now() + 1s + 2 * (tern::Clock::now() - warm_start);
    go.set();
    for (tern::Fiber& f : fibers) f.join();
    EXPECT_EQ(woke, count);
    EXPECT_EQ(early, 0);
    EXPECT_GT(slept, 0);
    EXPECT_EQ(out_of_order, 0) << "pending timers fire in deadline order";
    RecordProperty("timers_pending_at_once", slept);
  });
}

// The tern_timers_pending series of worker `worker`, as the metrics registry reads it now.
double timers_pending_on(const std::string& worker) {
  for (const tern::prof::Family& family : tern::prof::MetricsRegistry::global().collect()) {
    if (family.name != "tern_timers_pending") continue;
    for (const tern::prof::Series& series : family.series)
      if (series.labels == tern::prof::Labels{{"worker", worker}}) return series.value;
  }
  return -1;
}

TEST(Sleep, TimersPendingGaugeCountsArmedDeadlines) {
  on_one_worker([] {
    EXPECT_EQ(timers_pending_on("0"), 0);
    constexpr int kSleepers = 3;
    std::vector<tern::Fiber> sleepers;
    for (int i = 0; i < kSleepers; ++i)
      sleepers.push_back(tern::spawn([] { (void)tern::this_fiber::sleep_for(1h); }));
    tern::Event stopped;
    tern::Fiber waiter = tern::spawn([&] { (void)stopped.wait(); });  // no deadline: no timer
    tern::Fiber short_sleep = tern::spawn([] { (void)tern::this_fiber::sleep_for(1ms); });
    tern::this_fiber::yield();  // every fiber is waiting now
    EXPECT_EQ(timers_pending_on("0"), kSleepers + 1);
    short_sleep.join();  // its timer fired
    EXPECT_EQ(timers_pending_on("0"), kSleepers);
    sleepers[0].interrupt();  // an interrupted wait disarms its timer
    sleepers[0].join();
    EXPECT_EQ(timers_pending_on("0"), kSleepers - 1);
    for (int i = 1; i < kSleepers; ++i) sleepers[i].interrupt();
    for (int i = 1; i < kSleepers; ++i) sleepers[i].join();
    stopped.set();
    waiter.join();
    EXPECT_EQ(timers_pending_on("0"), 0);
  });
}

// A wait that ends long before its deadline (a socket read with an idle timeout, say) leaves
// its timer in the heap for the fiber's next wait; the node must neither end a later wait early
// nor wake a wait that has no deadline, and does not count as pending.
TEST(Sleep, AKeptTimerNeverEndsALaterWaitEarly) {
  on_one_worker([] {
    tern::Event first, second, third, fourth, fifth, at_fourth, at_fifth;
    tern::Deadline second_deadline{}, kept_until{};
    std::error_code second_result, short_result, third_result;
    bool third_done = false;
    auto error_of = [](const tern::Result<void>& got) {
      return got ? std::error_code() : got.error();
    };
    tern::Fiber waiter = tern::spawn([&] {
      const tern::Deadline first_deadline = tern::deadline_after(1200ms);
      EXPECT_TRUE(first.wait_until(first_deadline).has_value());  // set at once: the node stays
      // A later deadline reuses the node: it fires at first_deadline and is re-armed.
      second_deadline = first_deadline + 300ms;
      second_result = error_of(second.wait_until(second_deadline));
      EXPECT_GE(tern::Clock::now(), second_deadline) << "the wait ended before its deadline";
      at_fourth.set();
      EXPECT_TRUE(fourth.wait_until(tern::deadline_after(1h)).has_value());
      // A deadline sooner than the kept node's replaces it.
      const tern::Deadline short_deadline = tern::deadline_after(10ms);
      short_result = error_of(second.wait_until(short_deadline));
      EXPECT_GE(tern::Clock::now(), short_deadline);
      at_fifth.set();
      kept_until = tern::deadline_after(1100ms);
      EXPECT_TRUE(fifth.wait_until(kept_until).has_value());
      // No deadline: the kept node firing is no reason to wake.
      third_result = error_of(third.wait());
      third_done = true;
    });
    tern::this_fiber::yield();
    EXPECT_EQ(timers_pending_on("0"), 1);
    first.set();  // ends the first wait long before its deadline
    tern::this_fiber::yield();
    EXPECT_EQ(timers_pending_on("0"), 1) << "the second wait's timer";
    EXPECT_TRUE(at_fourth.wait().has_value());
    EXPECT_EQ(second_result, std::errc::timed_out);
    fourth.set();
    EXPECT_TRUE(at_fifth.wait().has_value());
    EXPECT_EQ(short_result, std::errc::timed_out);
    fifth.set();
    tern::this_fiber::yield();  // the waiter keeps its node and waits on `third`
    EXPECT_EQ(timers_pending_on("0"), 0) << "a kept node is no pending timer";
    // What is awaited here is the clock passing the kept node's deadline.
    (void)tern::this_fiber::sleep_until(kept_until + 100ms);
    EXPECT_FALSE(third_done);
    third.set();
    waiter.join();
    EXPECT_TRUE(third_done);
    EXPECT_EQ(third_result, std::error_code());
  });
}

TEST(Interrupt, CancelsASleepOnce) {
  on_one_worker([] {
    std::error_code first;
    bool second_ok = false;
    tern::Fiber sleeper = tern::spawn([&] {
      tern::Result<void> r = tern::this_fiber::sleep_for(1h);
      first = r ? std::error_code() : r.error();
      second_ok = static_cast<bool>(tern::this_fiber::sleep_for(1ms));
    });
    tern::this_fiber::yield();  // let it start sleeping
    sleeper.interrupt();
    sleeper.join();
    EXPECT_EQ(first, std::errc::operation_canceled);
    EXPECT_TRUE(second_ok) << "an interrupt is consumed by the wait it cancels";
  });
}

TEST(Interrupt, BeforeTheWaitCancelsTheNextWait) {
  on_one_worker([] {
    std::error_code result;
    bool saw_request = false;
    tern::Fiber target = tern::spawn([&] {
      saw_request = tern::this_fiber::stop_requested();
      tern::Result<void> r = tern::this_fiber::sleep_for(1h);
      result = r ? std::error_code() : r.error();
    });
    target.interrupt();
    target.join();
    EXPECT_TRUE(saw_request);
    EXPECT_EQ(result, std::errc::operation_canceled);
  });
}

TEST(JoinUntil, TimesOutAndStaysJoinable) {
  on_one_worker([] {
    tern::Fiber slow = tern::spawn([] { (void)tern::this_fiber::sleep_for(50ms); });
    tern::Result<void> early = slow.join_until(tern::Clock::now() + 5ms);
    ASSERT_FALSE(early);
    EXPECT_EQ(early.error(), std::errc::timed_out);
    EXPECT_EQ(early.error().message(), "deadline exceeded");
    EXPECT_TRUE(slow.joinable());
    EXPECT_TRUE(slow.join_until(tern::Clock::now() + 30s));
    EXPECT_FALSE(slow.joinable());
  });
}

// Counts its live instances.
struct Tracked {
  int value = 0;
  static inline std::atomic<int> alive{0};
  Tracked() { alive++; }
  ~Tracked() { alive--; }
};

TEST(FiberLocal, EachFiberHasItsOwnValueDestroyedAtExit) {
  static tern::FiberLocal<Tracked> local;
  on_one_worker([] {
    std::vector<tern::Fiber> fibers;
    std::vector<int> seen(10, -1);
    for (int i = 0; i < 10; ++i) {
      fibers.push_back(tern::spawn([&seen, i] {
        local->value = i;
        tern::this_fiber::yield();
        seen[i] = local->value;
      }));
    }
    for (tern::Fiber& f : fibers) f.join();
    for (int i = 0; i < 10; ++i) EXPECT_EQ(seen[i], i);
    EXPECT_EQ(Tracked::alive.load(), 0) << "values are destroyed when their fiber ends";
    EXPECT_EQ(local->value, 0) << "the first fiber has a fresh value of its own";
  });
  EXPECT_EQ(Tracked::alive.load(), 0);
}

TEST(Exceptions, CaughtInsideAFiberStayThere) {
  on_one_worker([] {
    bool caught = false;
    tern::Fiber f = tern::spawn([&] {
      try {
        throw std::runtime_error("inside");
      } catch (const std::runtime_error&) {
        caught = true;
      }
    });
    f.join();
    EXPECT_TRUE(caught);
  });
}

// Far more than any process can map: mmap of the stack fails with ENOMEM.
constexpr std::size_t kUnmappableStack = std::size_t{1} << 52;

TEST(TrySpawn, ReportsAStackThatCannotBeMappedAndRunsNothing) {
  on_one_worker([] {
    bool ran = false;
    tern::Result<tern::Fiber> fiber =
        tern::try_spawn([&] { ran = true; }, {.name = "giant", .stack_size = kUnmappableStack});
    ASSERT_FALSE(fiber.has_value());
    EXPECT_EQ(fiber.error(), std::errc::not_enough_memory) << fiber.error().message();
    tern::this_fiber::yield();
    EXPECT_FALSE(ran);
    // The worker goes on spawning fibers of ordinary sizes.
    tern::Result<tern::Fiber> next = tern::try_spawn([&] { ran = true; }, {.name = "ordinary"});
    ASSERT_TRUE(next.has_value()) << next.error().message();
    next->join();
    EXPECT_TRUE(ran);
  });
}

TEST(TrySpawn, KeepsAnLvalueCallableWhenItFails) {
  on_one_worker([] {
    std::vector<int> payload{1, 2, 3};
    auto fn = [payload = std::move(payload)] { (void)payload; };
    tern::Result<tern::Fiber> fiber = tern::try_spawn(fn, {.stack_size = kUnmappableStack});
    EXPECT_FALSE(fiber.has_value());
    tern::Result<tern::Fiber> retry = tern::try_spawn(fn);
    ASSERT_TRUE(retry.has_value());
    retry->join();
  });
}

TEST(SpawnDeathTest, AStackThatCannotBeMappedEndsTheProgramNamingBothFibers) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(on_one_worker([] {
                 tern::this_fiber::set_name("spawner");
                 tern::spawn([] {}, {.name = "giant", .stack_size = kUnmappableStack}).join();
               }),
               "tern: tern::spawn: cannot map a stack of [0-9]+ bytes for fiber \"giant\": "
               "Cannot allocate memory \\(src/fiber/fiber\\.cc:[0-9]+, fiber \"spawner\" "
               "\\(id [0-9]+\\) on worker 0\\)");
}

TEST(FatalDeathTest, FormatsTheMessageAndNamesTheFiberAndWorker) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(on_one_worker([] {
                 tern::spawn(
                     [] {
                       const std::string table = "routes";
                       TERN_FATAL("invariant {} of {} broken ({:.1f}%)", 3, table, 12.5);
                     },
                     {.name = "checker"})
                     .join();
               }),
               "tern: invariant 3 of routes broken \\(12\\.5%\\) "
               "\\(tests/fiber/fiber_test\\.cc:[0-9]+, fiber \"checker\" \\(id [0-9]+\\) "
               "on worker 0\\)\n");
}

TEST(FatalDeathTest, AssertNamesTheFiberToo) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(on_one_worker([] {
                 tern::this_fiber::set_name("asserter");
                 const int answer = 41;
                 TERN_ASSERT(answer == 42, "the answer is wrong");
               }),
               "tern: the answer is wrong \\[failed: answer == 42\\] "
               "\\(tests/fiber/fiber_test\\.cc:[0-9]+, fiber \"asserter\" \\(id [0-9]+\\) "
               "on worker 0\\)");
}

TEST(ExceptionsDeathTest, EscapingAFiberTerminatesNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(on_one_worker([] {
                 tern::spawn([] { throw std::runtime_error("boom"); }, {.name = "thrower"}).join();
               }),
               "fiber 'thrower' .* ended with an exception: boom");
}

// Calling tern off a runtime ends the program with the public call's name and what to do, and
// no internal names: one line, then the place of the call in tern.
constexpr const char* kCallItFromAFiber =
    " called outside a tern::Runtime: call it from a fiber \\(inside Runtime::run\\)";

TEST(OffRuntimeDeathTest, SpawnSaysWhereToCallIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(tern::spawn([] {}).detach(), std::string("tern: tern::spawn") + kCallItFromAFiber +
                                                " \\(src/fiber/fiber\\.cc:[0-9]+\\)\n");
}

TEST(OffRuntimeDeathTest, SleepAndYieldSayWhereToCallThem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)tern::this_fiber::sleep_for(std::chrono::milliseconds(1)),
               std::string("tern: tern::this_fiber::sleep_for/sleep_until") + kCallItFromAFiber);
  EXPECT_DEATH(tern::this_fiber::yield(),
               std::string("tern: tern::this_fiber::yield") + kCallItFromAFiber);
}

TEST(OffRuntimeDeathTest, PostAndThisWorkerSayWhereToCallThem) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)tern::post(0, [] {}),
               std::string("tern: tern::post") + kCallItFromAFiber +
                   ", or use Runtime::post from other threads \\(src/fiber/runtime\\.cc:[0-9]+\\)");
  EXPECT_DEATH((void)tern::this_worker::index(),
               std::string("tern: tern::this_worker::index") + kCallItFromAFiber);
}

TEST(OffRuntimeDeathTest, MessagesNameNoInternals) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The fatal line carries no assertion text ("[failed: ...]") and no path before the place.
  EXPECT_DEATH(tern::spawn([] {}).detach(),
               "(^|\n)tern: [^[/\n]*\\(src/fiber/fiber\\.cc:[0-9]+\\)\n");
  EXPECT_DEATH((void)tern::this_worker::count(),
               "(^|\n)tern: [^[/\n]*\\(src/fiber/runtime\\.cc:[0-9]+\\)\n");
}

TEST(FiberDeathTest, DestroyingAJoinableHandleAbortsNamingTheFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(on_one_worker([] { tern::Fiber f = tern::spawn([] {}, {.name = "forgotten"}); }),
               "handle of fiber 'forgotten' .* destroyed while joinable");
}

}  // namespace
