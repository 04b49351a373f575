// tern::prof: counters and timers summed over threads, including threads that have exited.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "tern/prof/counter.h"

namespace {

#if TERN_PROF_ENABLED

TEST(Counter, SumsOverLiveAndExitedThreads) {
  static tern::prof::Counter counter("test.counter.sum");
  counter.add(5);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) counter.add();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 4005u);
}

TEST(Timer, RecordsCountTotalAndMax) {
  static tern::prof::Timer timer("test.timer.stats");
  timer.record(10);
  std::thread other([] {
    timer.record(1000);
    timer.record(30);
  });
  other.join();
  const tern::prof::TimerStats stats = timer.read();
  EXPECT_EQ(stats.count, 3u);
  EXPECT_EQ(stats.total_ns, 1040u);
  EXPECT_EQ(stats.max_ns, 1000u);
}

TEST(ScopedTimer, MeasuresTheScope) {
  static tern::prof::Timer timer("test.timer.scope");
  {
    TERN_PROF_SCOPE(timer);
    volatile unsigned sink = 0;
    for (unsigned i = 0; i < 100000; ++i) sink = sink + i;
  }
  const tern::prof::TimerStats stats = timer.read();
  EXPECT_EQ(stats.count, 1u);
  EXPECT_GT(stats.total_ns, 0u);
  EXPECT_EQ(stats.total_ns, stats.max_ns);
}

TEST(Snapshot, ListsEveryMetricByName) {
  static tern::prof::Counter counter("test.snapshot.counter");
  counter.add(3);
  const std::vector<tern::prof::Sample> samples = tern::prof::snapshot();
  auto found = std::find_if(samples.begin(), samples.end(),
                            [](const auto& s) { return s.name == "test.snapshot.counter"; });
  ASSERT_NE(found, samples.end());
  EXPECT_FALSE(found->is_timer);
  EXPECT_EQ(found->value, 3u);
}

#else

TEST(Prof, CompiledOutCostsNothing) {
  static tern::prof::Counter counter("off");
  counter.add(5);
  EXPECT_EQ(counter.value(), 0u);
  EXPECT_TRUE(std::is_empty_v<tern::prof::Counter>);
}

#endif

}  // namespace
