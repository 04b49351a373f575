// The client connection's table of calls waiting for replies (src/rpc/pending_calls.h), checked
// against std::unordered_map under sequential, colliding and random ids.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

#include "rpc/client_connection.h"
#include "rpc/pending_calls.h"

namespace {

using tern::rpc::detail::PendingCall;
using tern::rpc::detail::PendingCalls;

// Every call of `expected` is found under its id, and nothing else is in the table.
void expect_same(const PendingCalls& table,
                 const std::unordered_map<std::uint64_t, PendingCall*>& expected,
                 std::uint64_t highest_id) {
  ASSERT_EQ(table.size(), expected.size());
  for (std::uint64_t id = 1; id <= highest_id; ++id) {
    auto it = expected.find(id);
    ASSERT_EQ(table.find(id), it == expected.end() ? nullptr : it->second) << "id " << id;
  }
}

TEST(PendingCalls, EmptyTableFindsNothing) {
  PendingCalls table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find(1), nullptr);
  EXPECT_EQ(table.find(0), nullptr);
  EXPECT_EQ(table.take(7), nullptr);
  EXPECT_TRUE(table.take_all().empty());
}

TEST(PendingCalls, InsertFindTake) {
  PendingCalls table;
  PendingCall a, b;
  table.insert(1, &a);
  table.insert(2, &b);
  EXPECT_EQ(table.size(), 2u);
  EXPECT_EQ(table.find(1), &a);
  EXPECT_EQ(table.find(2), &b);
  EXPECT_EQ(table.find(3), nullptr);
  EXPECT_EQ(table.take(1), &a);
  EXPECT_EQ(table.take(1), nullptr);
  EXPECT_EQ(table.find(2), &b);
  EXPECT_EQ(table.size(), 1u);
}

// Ids 8 apart share a home slot in a table of 8 or 16 slots: removing the first of a run must
// keep the others reachable (backward shift), including runs that wrap past the last slot.
TEST(PendingCalls, CollidingIdsStayReachableAfterRemovals) {
  for (std::uint64_t first : {1u, 6u, 7u}) {
    PendingCalls table;
    std::vector<PendingCall> calls(3);
    const std::uint64_t ids[] = {first, first + 8, first + 16};
    for (int i = 0; i < 3; ++i) table.insert(ids[i], &calls[i]);
    EXPECT_EQ(table.take(ids[0]), &calls[0]) << "first " << first;
    EXPECT_EQ(table.find(ids[1]), &calls[1]) << "first " << first;
    EXPECT_EQ(table.find(ids[2]), &calls[2]) << "first " << first;
    EXPECT_EQ(table.take(ids[2]), &calls[2]) << "first " << first;
    EXPECT_EQ(table.find(ids[1]), &calls[1]) << "first " << first;
    EXPECT_EQ(table.size(), 1u);
  }
}

// In a table of 8 slots: 7 sits in slot 7, 8 in its home slot 0, 15 (home 7) wraps to slot 1.
// Removing 7 must leave 8 where it is and move 15 back into slot 7.
TEST(PendingCalls, RemovalInARunThatWrapsKeepsEntriesAtHome) {
  PendingCalls table;
  PendingCall seven, eight, fifteen;
  table.insert(7, &seven);
  table.insert(8, &eight);
  table.insert(15, &fifteen);
  EXPECT_EQ(table.take(7), &seven);
  EXPECT_EQ(table.find(8), &eight);
  EXPECT_EQ(table.find(15), &fifteen);
  EXPECT_EQ(table.take(8), &eight);
  EXPECT_EQ(table.find(15), &fifteen);
}

TEST(PendingCalls, GrowsAndKeepsEveryCall) {
  PendingCalls table;
  std::vector<PendingCall> calls(1000);
  std::unordered_map<std::uint64_t, PendingCall*> expected;
  for (std::uint64_t id = 1; id <= calls.size(); ++id) {
    table.insert(id, &calls[id - 1]);
    expected[id] = &calls[id - 1];
  }
  expect_same(table, expected, calls.size() + 10);
  std::vector<PendingCall*> all = table.take_all();
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find(5), nullptr);
  ASSERT_EQ(all.size(), calls.size());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(all[i], &calls[i]);
}

// A connection's pattern: ids rise, replies come back in any order, a call stays in flight for
// the whole run (a slow call, a lost reply) while thousands of others pass it.
TEST(PendingCalls, MatchesAReferenceMapUnderRandomTraffic) {
  std::mt19937_64 random(20261125);
  PendingCalls table;
  std::vector<PendingCall> calls(20000);
  std::unordered_map<std::uint64_t, PendingCall*> expected;
  // Call 1 never comes back: it stays in the table while every other id passes it.
  table.insert(1, &calls[0]);
  expected[1] = &calls[0];
  std::vector<std::uint64_t> in_flight;
  std::uint64_t next_id = 2;
  for (int step = 0; step < 200000; ++step) {
    const bool send = in_flight.empty() || (in_flight.size() < 64 && random() % 2 == 0);
    if (send && next_id <= calls.size()) {
      PendingCall* call = &calls[next_id - 1];
      table.insert(next_id, call);
      expected[next_id] = call;
      in_flight.push_back(next_id);
      ++next_id;
      continue;
    }
    if (in_flight.empty()) break;
    // Mostly one of the oldest few; sometimes any of them.
    const std::size_t pick = random() % 4 == 0
                                 ? random() % in_flight.size()
                                 : random() % std::min<std::size_t>(in_flight.size(), 4);
    const std::uint64_t id = in_flight[pick];
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(pick));
    ASSERT_EQ(table.take(id), expected[id]) << "step " << step;
    expected.erase(id);
    ASSERT_EQ(table.take(id), nullptr);
    if (step % 997 == 0) expect_same(table, expected, next_id);
  }
  expect_same(table, expected, next_id);
  EXPECT_EQ(table.find(1), &calls[0]);
}

}  // namespace
