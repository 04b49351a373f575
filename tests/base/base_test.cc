// tern::base: Result and error codes, intrusive list, MPSC queue, spin lock, deadlines.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tern/base/assert.h"
#include "tern/base/clock.h"
#include "tern/base/coarse_clock.h"
#include "tern/base/duration.h"
#include "tern/base/intrusive_list.h"
#include "tern/base/mpsc_queue.h"
#include "tern/base/result.h"
#include "tern/base/spin_lock.h"
#include "tern/base/wait_limit.h"

namespace {

TEST(ParseDuration, EveryUnit) {
  using namespace std::chrono_literals;
  EXPECT_EQ(tern::parse_duration("250ns").value(), 250ns);
  EXPECT_EQ(tern::parse_duration("200us").value(), 200us);
  EXPECT_EQ(tern::parse_duration("1.5ms").value(), 1500us);
  EXPECT_EQ(tern::parse_duration("10s").value(), 10s);
  EXPECT_EQ(tern::parse_duration("2m").value(), 120s);
  EXPECT_EQ(tern::parse_duration("1h").value(), 3600s);
  EXPECT_EQ(tern::parse_duration("0").value(), 0ns);
  EXPECT_EQ(tern::parse_duration("off").value(), 0ns);
  EXPECT_EQ(tern::parse_duration("0us").value(), 0ns);
}

TEST(FatalDeathTest, PrintsOneLineWithTheRelativeLocationOffTheWorkers) {
  const std::string what = "queue";
  EXPECT_DEATH(TERN_FATAL("{} is {} entries long", what, 42),
               "^tern: queue is 42 entries long \\(tests/base/base_test\\.cc:[0-9]+\\)\n$");
}

TEST(FatalDeathTest, ContextProviderAddsItsText) {
  EXPECT_DEATH(
      {
        tern::set_fatal_context_provider([](char* out, std::size_t capacity) noexcept {
          const std::string_view text = "test context";
          const std::size_t n = std::min(text.size(), capacity);
          std::memcpy(out, text.data(), n);
          return n;
        });
        TERN_FATAL("with context");
      },
      "^tern: with context \\(tests/base/base_test\\.cc:[0-9]+, test context\\)\n$");
}

TEST(FatalDeathTest, AssertShowsTheMessageAndTheFailedCondition) {
  const int size = 3;
  EXPECT_DEATH(TERN_ASSERT(size > 4, "tern: the buffer is too small"),
               "^tern: the buffer is too small \\[failed: size > 4\\] "
               "\\(tests/base/base_test\\.cc:[0-9]+\\)");
}

TEST(FatalDeathTest, TheSignalSafeFormCallsItsHookBeforeAborting) {
  EXPECT_DEATH(tern::detail::fatal_message(
                   "/any/where/src/fiber/x.cc", 7, "raw message",
                   +[]() noexcept {
                     const char text[] = "hook ran\n";
                     [[maybe_unused]] auto n = ::write(2, text, sizeof text - 1);
                   }),
               "^tern: raw message \\(src/fiber/x\\.cc:7\\)\nhook ran\n$");
}

TEST(ParseDuration, RejectsWhatIsNotADuration) {
  for (const char* bad :
       {"", "10", "us", "10x", "-1s", "10 s", " 1s", "1e400s", "nan s", "inf s", "10000000h"})
    EXPECT_FALSE(tern::parse_duration(bad).has_value()) << bad;
  EXPECT_EQ(tern::parse_duration("10").error(), std::errc::invalid_argument);
}

TEST(Result, CarriesValueOrError) {
  tern::Result<int> ok = 7;
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, 7);
  tern::Result<int> bad = tern::fail(std::errc::timed_out);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), std::errc::timed_out);
}

TEST(Result, ADeadlinePrintsAsOneAndComparesAsTimedOut) {
  const std::error_code deadline = tern::deadline_exceeded();
  EXPECT_EQ(deadline.message(), "deadline exceeded");
  EXPECT_EQ(deadline, std::errc::timed_out);
  EXPECT_EQ(deadline.value(), ETIMEDOUT);
  EXPECT_NE(deadline, std::errc::operation_canceled);
  EXPECT_EQ(deadline, tern::deadline_exceeded());
}

TEST(Result, ContextGoesInFrontOfTheMessageAndKeepsComparisons) {
  const std::error_code in_use(EADDRINUSE, std::system_category());
  const std::error_code bound = tern::with_context(in_use, "bind 127.0.0.1:8080");
  EXPECT_EQ(bound.message(), "bind 127.0.0.1:8080: Address already in use");
  EXPECT_EQ(bound, std::errc::address_in_use);
  EXPECT_NE(bound, std::errc::connection_refused);
  EXPECT_EQ(bound.value(), EADDRINUSE);
  EXPECT_EQ(tern::without_context(bound), in_use);
  // The same context gives the same code; another context, another one.
  EXPECT_EQ(tern::with_context(in_use, "bind 127.0.0.1:8080"), bound);
  EXPECT_NE(tern::with_context(in_use, "bind 127.0.0.1:8081"), bound);
  // Contexts nest, and a deadline keeps its condition under one.
  EXPECT_EQ(tern::with_context(bound, "start").message(),
            "start: bind 127.0.0.1:8080: Address already in use");
  EXPECT_EQ(tern::without_context(tern::with_context(bound, "start")), in_use);
  const std::error_code late = tern::with_context(tern::deadline_exceeded(), "connect 10.0.0.1:80");
  EXPECT_EQ(late.message(), "connect 10.0.0.1:80: deadline exceeded");
  EXPECT_EQ(late, std::errc::timed_out);
  // An explanation replaces the message.
  const std::error_code bad = tern::with_explanation(
      std::make_error_code(std::errc::invalid_argument), "'x': missing port");
  EXPECT_EQ(bad.message(), "'x': missing port");
  EXPECT_EQ(bad, std::errc::invalid_argument);
  // tern::Errc codes compare as codes, so they are left as they are; no error stays no error.
  EXPECT_EQ(tern::with_context(tern::Errc::eof, "read"), tern::Errc::eof);
  EXPECT_FALSE(tern::with_context(std::error_code(), "nothing"));
}

TEST(Result, TernErrorCodesHaveTheirOwnCategory) {
  const std::error_code closed = tern::Errc::closed;
  EXPECT_EQ(closed.category().name(), std::string("tern"));
  EXPECT_EQ(closed.message(), "closed");
  EXPECT_EQ(closed, tern::Errc::closed);
  EXPECT_NE(closed, tern::Errc::lagged);
  EXPECT_NE(closed, std::errc::timed_out);
  EXPECT_EQ(tern::make_error_code(tern::Errc::stopped).message(), "runtime stopped");
}

struct Item {
  int value;
  tern::ListHook hook;
};
using ItemList = tern::IntrusiveList<Item, &Item::hook>;

TEST(IntrusiveList, PushPopRemoveKeepOrderAndLinks) {
  std::vector<Item> items(5);
  for (int i = 0; i < 5; ++i) items[i].value = i;
  ItemList list;
  EXPECT_TRUE(list.empty());
  for (Item& item : items) list.push_back(item);
  EXPECT_EQ(list.size(), 5u);
  list.remove(items[2]);
  EXPECT_FALSE(items[2].hook.linked());
  list.push_front(items[2]);
  std::vector<int> order;
  while (Item* item = list.pop_front()) {
    EXPECT_FALSE(item->hook.linked());
    order.push_back(item->value);
  }
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1, 3, 4}));
  EXPECT_EQ(list.size(), 0u);
  EXPECT_EQ(list.front(), nullptr);
}

struct QueueItem : tern::MpscNode {
  int producer = 0;
  int sequence = 0;
};

TEST(MpscQueue, ManyProducersOneConsumerLoseNothingAndKeepPerProducerOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 20000;
  tern::MpscQueue queue;
  std::vector<std::unique_ptr<QueueItem[]>> items;
  for (int p = 0; p < kProducers; ++p) items.push_back(std::make_unique<QueueItem[]>(kPerProducer));
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        items[p][i].producer = p;
        items[p][i].sequence = i;
        queue.push(&items[p][i]);
      }
    });
  }
  std::vector<int> next(kProducers, 0);
  int received = 0;
  const auto deadline = tern::deadline_after(std::chrono::seconds(60));
  while (received < kProducers * kPerProducer && tern::Clock::now() < deadline) {
    tern::MpscNode* node = queue.pop();
    if (node == nullptr) {
      std::this_thread::yield();
      continue;
    }
    auto* item = static_cast<QueueItem*>(node);
    ASSERT_EQ(item->sequence, next[item->producer]) << "producer " << item->producer;
    ++next[item->producer];
    ++received;
  }
  for (std::thread& t : producers) t.join();
  EXPECT_EQ(received, kProducers * kPerProducer);
  EXPECT_EQ(queue.pop(), nullptr);
  EXPECT_TRUE(queue.drained());
}

TEST(MpscQueue, DrainedUntilAPushAndAgainOnceEverythingIsPopped) {
  tern::MpscQueue queue;
  EXPECT_TRUE(queue.drained());
  QueueItem items[3];
  queue.push(&items[0]);
  EXPECT_FALSE(queue.drained());
  EXPECT_EQ(queue.pop(), &items[0]);
  EXPECT_TRUE(queue.drained());
  queue.push(&items[1]);
  queue.push(&items[2]);
  EXPECT_FALSE(queue.drained());
  EXPECT_EQ(queue.pop(), &items[1]);
  EXPECT_FALSE(queue.drained());
  EXPECT_EQ(queue.pop(), &items[2]);
  EXPECT_TRUE(queue.drained());
  EXPECT_EQ(queue.pop(), nullptr);
  EXPECT_TRUE(queue.drained());
}

TEST(SpinLock, ExcludesAcrossThreads) {
  tern::SpinLock lock;
  long counter = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50000; ++i) {
        lock.lock();
        ++counter;
        lock.unlock();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter, 200000);
  EXPECT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
}

TEST(Clock, CoarseDeadlineIsAtMostTwoTicksLate) {
  const auto tick = tern::coarse_resolution();
  EXPECT_GT(tick, std::chrono::nanoseconds::zero());
  EXPECT_LE(tern::coarse_now(), tern::Clock::now()) << "the coarse clock lags, never leads";
  for (int i = 0; i < 1000; ++i) {
    const auto before = tern::Clock::now();
    const auto deadline = tern::coarse_deadline_after(std::chrono::seconds(300));
    const auto after = tern::Clock::now();
    // Two ticks of margin: on a loaded virtual machine the coarse clock was seen lagging a
    // little over one; the assertion allows a lag of three.
    ASSERT_GE(deadline, before + std::chrono::seconds(300) - tick);
    ASSERT_LE(deadline, after + std::chrono::seconds(300) + 2 * tick);
  }
  EXPECT_EQ(tern::coarse_deadline_after(std::chrono::nanoseconds::max()), tern::kNoDeadline);
  const auto before = tern::Clock::now();
  const auto now_if_negative = tern::coarse_deadline_after(std::chrono::seconds(-1));
  EXPECT_GE(now_if_negative, before) << "a timeout of zero or less is now, as in deadline_after";
  EXPECT_LE(now_if_negative, tern::Clock::now());
}

TEST(WaitLimit, ADeadlineIsKeptAsItIs) {
  const tern::Deadline deadline = tern::Clock::now() + std::chrono::seconds(5);
  tern::WaitLimit limit = deadline;
  EXPECT_FALSE(limit.is_idle());
  EXPECT_EQ(limit.fix(), deadline);
  EXPECT_EQ(tern::WaitLimit().fix(), tern::kNoDeadline);
}

TEST(WaitLimit, AnIdleTimeoutGetsItsDeadlineWhenFixedAndKeepsIt) {
  const auto tick = tern::coarse_resolution();
  tern::WaitLimit limit = tern::WaitLimit::idle(std::chrono::seconds(300));
  EXPECT_TRUE(limit.is_idle());
  const auto before = tern::Clock::now();
  const tern::Deadline fixed = limit.fix();
  const auto after = tern::Clock::now();
  // As coarse_deadline_after counts it (CoarseDeadlineIsAtMostTwoTicksLate).
  EXPECT_GE(fixed, before + std::chrono::seconds(300) - tick);
  EXPECT_LE(fixed, after + std::chrono::seconds(300) + 2 * tick);
  EXPECT_FALSE(limit.is_idle());
  EXPECT_EQ(limit.fix(), fixed) << "the later waits of one operation share its first deadline";

  // A wait that read the coarse clock itself has the deadline count from its reading.
  tern::WaitLimit from_reading = tern::WaitLimit::idle(std::chrono::seconds(300));
  const tern::Deadline reading = tern::coarse_now();
  EXPECT_EQ(from_reading.fix(reading), reading + std::chrono::seconds(300) + 2 * tick);
  EXPECT_EQ(from_reading.fix(), reading + std::chrono::seconds(300) + 2 * tick);
  EXPECT_EQ(tern::WaitLimit(fixed).fix(reading), fixed) << "a deadline ignores the reading";

  const auto now = tern::Clock::now();
  EXPECT_LE(tern::WaitLimit::idle(std::chrono::nanoseconds(0)).fix(), now);
  EXPECT_LE(tern::WaitLimit::idle(std::chrono::seconds(-1)).fix(), now);
  EXPECT_EQ(tern::WaitLimit::idle(std::chrono::nanoseconds::max()).fix(), tern::kNoDeadline);
}

TEST(Clock, DeadlineAfterSaturatesInsteadOfOverflowing) {
  EXPECT_EQ(tern::deadline_after(std::chrono::hours::max()), tern::kNoDeadline);
  EXPECT_EQ(tern::deadline_after(std::chrono::nanoseconds::max()), tern::kNoDeadline);
  const auto before = tern::Clock::now();
  const auto deadline = tern::deadline_after(std::chrono::milliseconds(5));
  EXPECT_GE(deadline - before, std::chrono::milliseconds(5));
  EXPECT_LT(deadline, tern::kNoDeadline);
  // A count a peer may send (an unsigned 64-bit number of microseconds) and negative ones.
  EXPECT_EQ(tern::deadline_after(std::chrono::duration<std::uint64_t, std::micro>(
                std::numeric_limits<std::uint64_t>::max())),
            tern::kNoDeadline);
  const tern::Deadline most_negative = tern::deadline_after(std::chrono::microseconds::min());
  const tern::Deadline minus_one = tern::deadline_after(std::chrono::seconds(-1));
  const auto after = tern::Clock::now();
  EXPECT_GE(most_negative, before) << "a negative timeout is now, not a time long past";
  EXPECT_LE(most_negative, after);
  EXPECT_GE(minus_one, before);
  EXPECT_LE(minus_one, after);
}

}  // namespace
