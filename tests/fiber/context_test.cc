// Tests of the raw context switch (tern/fiber/context.h): argument passing, switches between
// many contexts, callee-saved registers and FP control state (with assembly probes), stack
// alignment at entry and after switches, and floating-point work interleaved across contexts.

#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "arch/context_checks.h"

namespace tern::test {
namespace {

// The checks shared with the standalone context_check (arch/context_checks.h).
TEST(ContextTest, PingPongPassesArgsBothWays) { EXPECT_EQ(check_ping_pong(), ""); }

TEST(ContextTest, EntryAndResumedCodeSeeAbiStackAlignment) {
  EXPECT_EQ(check_stack_alignment(), "");
}

TEST(ContextTest, FloatingPointValuesSurviveInterleavedSwitches) {
  EXPECT_EQ(check_floating_point(), "");
}

// ---------------------------------------------------------------------------------------------
// A ring of contexts switching straight to each other, not through the thread's context.

constexpr std::size_t kRingSize = 5;
constexpr std::uint64_t kRingLaps = 2'000;

// State shared by the ring test and its member contexts.
struct Ring {
  TestContext* main = nullptr;
  std::vector<std::unique_ptr<TestContext>> members;
  std::size_t starting = 0;  // index of the member being started
  std::uint64_t total_hops = kRingSize * kRingLaps;
  std::uint64_t errors = 0;
  std::vector<std::uint64_t> hops_seen = std::vector<std::uint64_t>(kRingSize);
};

void* const kStop = as_arg(~std::uintptr_t{0});

// Entry of a ring member: passes hop h on to its successor as h + 1, checking that h is its turn
// and that its own stack locals survived, until it receives kStop.
void ring_member(void* arg) {
  auto& ring = *static_cast<Ring*>(arg);
  const std::size_t me = ring.starting;
  TestContext& self = *ring.members[me];
  landed(self);
  std::uint64_t hops = 0;
  const std::uint64_t canary = mix(me + 1);
  const std::uint64_t* volatile canary_at = &canary;
  void* got = checked_switch(self, *ring.main, nullptr);
  while (got != kStop) {
    const std::uintptr_t hop = from_arg(got);
    if (hop % kRingSize != me || *canary_at != mix(me + 1)) ++ring.errors;
    ++hops;
    TestContext& next =
        hop + 1 == ring.total_hops ? *ring.main : *ring.members[(me + 1) % kRingSize];
    got = checked_switch(self, next, as_arg(hop + 1));
  }
  ring.hops_seen[me] = hops;
  final_switch(self, *ring.main, nullptr);
}

TEST(ContextTest, RingOfContextsSwitchesDirectly) {
  TestContext main;
  Ring ring;
  ring.main = &main;
  for (std::size_t i = 0; i < kRingSize; ++i) {
    ring.members.push_back(std::make_unique<TestContext>(&ring_member));
  }
  for (std::size_t i = 0; i < kRingSize; ++i) {
    ring.starting = i;
    ASSERT_EQ(checked_switch(main, *ring.members[i], &ring), nullptr);
  }
  EXPECT_EQ(from_arg(checked_switch(main, *ring.members[0], as_arg(0))), ring.total_hops);
  for (auto& member : ring.members) EXPECT_EQ(checked_switch(main, *member, kStop), nullptr);
  EXPECT_EQ(ring.errors, 0u);
  for (std::size_t i = 0; i < kRingSize; ++i) EXPECT_EQ(ring.hops_seen[i], kRingLaps) << i;
}

// Divides 1 by 3 at run time, in the current rounding mode.
[[gnu::noinline]] double one_third() {
  volatile double one = 1.0;
  volatile double three = 3.0;
  return one / three;
}

// State shared by the rounding-mode test and its worker context.
struct RoundingRun {
  TestContext* main = nullptr;
  TestContext* worker = nullptr;
  double expected = 0;  // one_third() rounded upward
  int errors = 0;
};

constexpr int kRoundingRounds = 100;

// Entry of the rounding worker: rounds upward and checks after every switch that it still does.
void rounding_worker(void* arg) {
  auto& run = *static_cast<RoundingRun*>(arg);
  landed(*run.worker);
  std::fesetround(FE_UPWARD);
  for (int round = 0; round < kRoundingRounds; ++round) {
    checked_switch(*run.worker, *run.main, nullptr);
    if (std::fegetround() != FE_UPWARD || one_third() != run.expected) ++run.errors;
  }
  final_switch(*run.worker, *run.main, nullptr);
}

TEST(ContextTest, RoundingModeIsPerContext) {
  const int original = std::fegetround();
  ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
  const double upward = one_third();
  ASSERT_EQ(std::fesetround(FE_TOWARDZERO), 0);
  const double toward_zero = one_third();
  ASSERT_NE(upward, toward_zero);

  TestContext main;
  TestContext worker(&rounding_worker);
  RoundingRun run{&main, &worker, upward};
  int errors = 0;
  for (int round = 0; round <= kRoundingRounds; ++round) {
    checked_switch(main, worker, &run);
    if (std::fegetround() != FE_TOWARDZERO || one_third() != toward_zero) ++errors;
  }
  std::fesetround(original);
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(run.errors, 0);
}

// State shared by the FP-control inheritance test and its context.
struct InheritRun {
  TestContext* main = nullptr;
  TestContext* self = nullptr;
  FpControl seen;
};

// Entry that records the FP control state it starts with.
void record_fp_control(void* arg) {
  auto& run = *static_cast<InheritRun*>(arg);
  landed(*run.self);
  run.seen = read_fp_control();
  final_switch(*run.self, *run.main, nullptr);
}

TEST(ContextTest, NewContextStartsWithItsCreatorsFpControl) {
  const FpControl original = read_fp_control();
  write_fp_control(creation_fp_control());
  TestContext context(&record_fp_control);
  write_fp_control(original);

  TestContext main;
  InheritRun run{&main, &context};
  checked_switch(main, context, &run);
  EXPECT_TRUE(same_fp_control(run.seen, creation_fp_control())) << to_string(run.seen);
  EXPECT_TRUE(same_fp_control(read_fp_control(), original)) << to_string(read_fp_control());
}

// ---------------------------------------------------------------------------------------------
// Callee-saved registers and FP control words, loaded and checked in assembly (regs_<arch>.S).

#if TERN_TEST_CONTEXT_ASM

TEST(ContextRegsTest, CalleeSavedRegistersAndControlWordsSurviveSwitches) {
  EXPECT_EQ(check_registers(), "");
}

TEST(ContextRegsTest, PeerStartsWithItsCreatorsControlWordsNotTheSwitchers) {
  EXPECT_EQ(check_creator_fp_control(), "");
}

#endif  // TERN_TEST_CONTEXT_ASM

}  // namespace
}  // namespace tern::test
