// Fiber stacks: guard pages, the per-thread pool, and stack-overflow detection.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "fiber/stack.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace {

TEST(Stack, IsUsableAndRoundedToPages) {
  tern::Result<tern::detail::Stack> stack = tern::detail::map_stack(10000);
  ASSERT_TRUE(stack) << stack.error().message();
  EXPECT_GE(stack->size, 10000u);
  EXPECT_EQ(stack->size % 4096, 0u);
  std::memset(stack->base, 0xab, stack->size);  // every usable byte is writable
  EXPECT_TRUE(stack->in_guard(static_cast<char*>(stack->base) - 1));
  EXPECT_FALSE(stack->in_guard(stack->base));
  tern::detail::unmap_stack(*stack);
}

TEST(StackPool, ReusesStacksOfTheSameSize) {
  tern::detail::StackPool pool(4);
  tern::Result<tern::detail::Stack> first = pool.take(64 * 1024);
  ASSERT_TRUE(first);
  void* base = first->base;
  pool.give(*first);
  EXPECT_EQ(pool.cached(), 1u);
  tern::Result<tern::detail::Stack> again = pool.take(64 * 1024);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->base, base) << "a cached stack of the right size is reused";
  tern::Result<tern::detail::Stack> other = pool.take(128 * 1024);
  ASSERT_TRUE(other);
  EXPECT_NE(other->base, base);
  pool.give(*again);
  pool.give(*other);
  EXPECT_EQ(pool.cached(), 2u);
}

TEST(StackPool, UnmapsBeyondItsLimit) {
  tern::detail::StackPool pool(2, 2);
  std::vector<tern::detail::Stack> stacks;
  for (int i = 0; i < 5; ++i) stacks.push_back(*pool.take(16 * 1024));
  for (const auto& s : stacks) pool.give(s);
  EXPECT_EQ(pool.cached(), 2u);
}

// A burst of stacks given back stays cached (up to burst_cached) while fibers keep taking them,
// and trim() unmaps, down to max_cached, those that stayed unused for a whole interval.
TEST(StackPool, KeepsABurstUntilATrimFindsItUnused) {
  tern::detail::StackPool pool(2, 6);
  std::vector<tern::detail::Stack> stacks;
  for (int i = 0; i < 8; ++i) stacks.push_back(*pool.take(16 * 1024));
  for (const auto& s : stacks) pool.give(s);
  EXPECT_EQ(pool.cached(), 6u) << "beyond burst_cached, stacks are unmapped at once";
  EXPECT_TRUE(pool.holds_burst());
  pool.trim();  // starts an interval
  EXPECT_EQ(pool.cached(), 6u);
  stacks.clear();
  for (int i = 0; i < 3; ++i) stacks.push_back(*pool.take(16 * 1024));
  for (const auto& s : stacks) pool.give(s);
  pool.trim();  // three stayed unused through the interval: one goes, down to two plus the used
  EXPECT_EQ(pool.cached(), 5u);
  pool.trim();  // none taken since: down to max_cached
  EXPECT_EQ(pool.cached(), 2u);
  EXPECT_FALSE(pool.holds_burst());
  pool.trim();
  EXPECT_EQ(pool.cached(), 2u);
}

TEST(StackPool, MapsABatchOnceItHasMappedABatchOneByOne) {
  constexpr std::size_t kBatch = tern::detail::StackPool::kMapBatch;
  tern::detail::StackPool pool;
  std::vector<tern::detail::Stack> stacks;
  for (std::size_t i = 0; i < kBatch; ++i) stacks.push_back(*pool.take(16 * 1024));
  EXPECT_EQ(pool.cached(), 0u) << "a few fibers map only their own stacks";
  tern::Result<tern::detail::Stack> more = pool.take(16 * 1024);
  ASSERT_TRUE(more);
  stacks.push_back(*more);
  EXPECT_EQ(pool.cached(), kBatch - 1) << "the rest of the batch";
  while (pool.cached() > 0) stacks.push_back(*pool.take(16 * 1024));
  for (std::size_t i = 0; i < stacks.size(); ++i) {
    const tern::detail::Stack& s = stacks[i];
    EXPECT_GE(s.size, 16u * 1024);
    std::memset(s.base, 0xab, s.size);  // every usable byte of each is writable
    EXPECT_TRUE(s.in_guard(static_cast<char*>(s.base) - 1));
    for (std::size_t j = 0; j < i; ++j) {  // and none overlaps another's stack or guard
      const auto* a = static_cast<const char*>(s.mapping);
      const auto* b = static_cast<const char*>(stacks[j].mapping);
      EXPECT_TRUE(a + s.mapping_size <= b || b + stacks[j].mapping_size <= a);
    }
  }
  // Each stack of a batch is unmapped on its own (a cache beyond its bound unmaps one).
  tern::detail::unmap_stack(stacks.back());
  stacks.pop_back();
  for (const auto& s : stacks) pool.give(s);
  EXPECT_EQ(pool.cached(), 2 * kBatch - 1);
}

// Recurses with a frame the compiler cannot elide until the stack runs out.
volatile int recursion_limit = 1 << 30;
[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (depth >= recursion_limit) return frame[0];
  return recurse(depth + 1) + frame[0];
}

TEST(StackOverflowDeathTest, AbortsNamingTheFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          tern::spawn([] { recurse(0); }, {.name = "deep", .stack_size = 32 * 1024}).join();
        });
      },
      "stack overflow in fiber 'deep' \\(id [0-9]+, stack 32 KiB\\)");
}

TEST(StackOverflowDeathTest, NamesASharedStackFiber) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          tern::spawn([] { recurse(0); }, {.name = "deep", .stack_mode = tern::StackMode::shared})
              .join();
        });
      },
      "stack overflow in fiber 'deep' \\(id [0-9]+, stack 256 KiB, the worker's shared stack\\)");
}

TEST(StackOverflowDeathTest, OtherCrashesAreLeftToTheDefaultHandler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        tern::Runtime runtime({.workers = 1});
        runtime.run([] {
          volatile int* null = nullptr;
          *null = 1;
        });
      },
      "");
}

}  // namespace
