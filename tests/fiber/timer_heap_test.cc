// The scheduler's timer heap against a reference model: random inserts, removals of any armed
// node and expiries keep the earliest deadline, the pop order and every node's index right.
#include "fiber/timer_heap.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

namespace tern::detail {
namespace {

using namespace std::chrono_literals;

Deadline at(std::int64_t ms) { return Deadline{} + std::chrono::milliseconds(ms); }

TEST(TimerHeap, PopsInDeadlineOrderAndNothingBeforeItsTime) {
  TimerHeap heap;
  std::vector<TimerNode> nodes(9);
  const std::int64_t order[] = {50, 10, 90, 30, 70, 20, 80, 40, 60};
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].when = at(order[i]);
    heap.insert(&nodes[i]);
  }
  EXPECT_EQ(heap.earliest(), at(10));
  EXPECT_EQ(heap.pop_expired(at(9)), nullptr);
  std::vector<std::int64_t> fired;
  while (TimerNode* node = heap.pop_expired(at(65))) {
    EXPECT_FALSE(node->armed());
    fired.push_back((node->when - Deadline{}) / 1ms);
  }
  EXPECT_EQ(fired, (std::vector<std::int64_t>{10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(heap.size(), 3u);
  EXPECT_EQ(heap.earliest(), at(70));
}

TEST(TimerHeap, RandomInsertsRemovalsAndExpiriesMatchAnOrderedModel) {
  constexpr std::size_t kNodes = 3000;
  std::vector<TimerNode> nodes(kNodes);
  std::multimap<Deadline, TimerNode*> model;
  TimerHeap heap;
  std::mt19937_64 random(12345);
  std::int64_t now = 0;
  for (int step = 0; step < 200000; ++step) {
    TimerNode& node = nodes[random() % kNodes];
    const unsigned action = random() % 8;
    if (action < 4 && !node.armed()) {
      // Many equal deadlines, as timers set in the same millisecond have.
      node.when = at(now + static_cast<std::int64_t>(random() % 500));
      heap.insert(&node);
      model.emplace(node.when, &node);
    } else if (action < 7 && node.armed()) {
      heap.remove(&node);
      EXPECT_FALSE(node.armed());
      auto [first, last] = model.equal_range(node.when);
      for (auto it = first; it != last; ++it) {
        if (it->second == &node) {
          model.erase(it);
          break;
        }
      }
    } else {
      now += static_cast<std::int64_t>(random() % 20);
      while (TimerNode* fired = heap.pop_expired(at(now))) {
        ASSERT_FALSE(model.empty());
        ASSERT_EQ(fired->when, model.begin()->first) << "step " << step;
        ASSERT_LE(fired->when, at(now));
        auto [first, last] = model.equal_range(fired->when);
        bool found = false;
        for (auto it = first; it != last; ++it) {
          if (it->second == fired) {
            model.erase(it);
            found = true;
            break;
          }
        }
        ASSERT_TRUE(found) << "a node that was not armed fired";
      }
      if (!model.empty()) {
        ASSERT_GT(model.begin()->first, at(now));
      }
    }
    ASSERT_EQ(heap.size(), model.size()) << "step " << step;
    if (!model.empty()) {
      ASSERT_EQ(heap.earliest(), model.begin()->first) << "step " << step;
    }
  }
  // Every armed node is still removable by its own index.
  for (auto& [when, node] : model) heap.remove(node);
  EXPECT_TRUE(heap.empty());
}

}  // namespace
}  // namespace tern::detail
