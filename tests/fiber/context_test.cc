// Tests of the raw context switch (tern/fiber/context.h): argument passing, switches between
// many contexts, callee-saved registers and FP control state (with assembly probes), stack
// alignment at entry and after switches, and floating-point work interleaved across contexts.

#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "arch/context_harness.h"
#include "tern/fiber/context.h"

namespace tern::test {
namespace {

// Turns a counter into a full-width pointer-sized value (a bijection), so args use all 64 bits.
std::uintptr_t mix(std::uint64_t n) {
  return static_cast<std::uintptr_t>(n * 0x9e3779b97f4a7c15ull);
}

// Wraps a number as a switch arg.
void* as_arg(std::uintptr_t value) { return reinterpret_cast<void*>(value); }

// Unwraps a switch arg.
std::uintptr_t from_arg(void* arg) { return reinterpret_cast<std::uintptr_t>(arg); }

// ---------------------------------------------------------------------------------------------
// Ping-pong between the test's thread and one context.

constexpr std::uint64_t kPingPongRounds = 100'000;

// State shared by the ping-pong test and its peer context.
struct PingPong {
  TestContext* main = nullptr;
  TestContext* peer = nullptr;
  std::uint64_t peer_seen = 0;
  std::uint64_t peer_errors = 0;
};

// Entry of the ping-pong peer: answers every value v with ~v until it receives 0.
void ping_pong_peer(void* arg) {
  auto& state = *static_cast<PingPong*>(arg);
  landed(*state.peer);
  void* got = checked_switch(*state.peer, *state.main, &state);
  for (std::uint64_t n = 1; from_arg(got) != 0; ++n) {
    if (from_arg(got) != mix(n)) ++state.peer_errors;
    ++state.peer_seen;
    got = checked_switch(*state.peer, *state.main, as_arg(~from_arg(got)));
  }
  final_switch(*state.peer, *state.main, as_arg(0x5eed));
}

TEST(ContextTest, PingPongPassesArgsBothWays) {
  TestContext main;
  TestContext peer(&ping_pong_peer);
  PingPong state{&main, &peer};
  // The first switch's arg is the entry's parameter; the entry answers with it.
  ASSERT_EQ(checked_switch(main, peer, &state), &state);
  std::uint64_t errors = 0;
  for (std::uint64_t n = 1; n <= kPingPongRounds; ++n) {
    if (from_arg(checked_switch(main, peer, as_arg(mix(n)))) != ~mix(n)) ++errors;
  }
  EXPECT_EQ(from_arg(checked_switch(main, peer, nullptr)), 0x5eedu);
  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(state.peer_errors, 0u);
  EXPECT_EQ(state.peer_seen, kPingPongRounds);
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

// ---------------------------------------------------------------------------------------------
// Stack alignment at a new context's entry and after switches.

constexpr int kAlignRounds = 8;

// State of one alignment run; `probe` is what tern_test_probe_entry receives.
struct AlignRun {
  EntryProbe probe;
  TestContext* main = nullptr;
  TestContext* self = nullptr;
  int misaligned_locals = 0;
};

// Continuation of tern_test_probe_entry: checks an aligned local after each of several switches.
void align_continuation(void* probe) {
  auto& run = *static_cast<AlignRun*>(static_cast<EntryProbe*>(probe)->user);
  landed(*run.self);
  for (int round = 0; round < kAlignRounds; ++round) {
    if (!aligned_local_ok()) ++run.misaligned_locals;
    checked_switch(*run.self, *run.main, nullptr);
  }
  if (!aligned_local_ok()) ++run.misaligned_locals;
  final_switch(*run.self, *run.main, nullptr);
}

TEST(ContextTest, EntryAndResumedCodeSeeAbiStackAlignment) {
  ASSERT_TRUE(aligned_local_ok());
  // make_context must align the top itself: try every top misalignment.
  for (std::size_t trim = 0; trim < 48; ++trim) {
    SCOPED_TRACE(::testing::Message() << "stack top trimmed by " << trim);
    TestContext main;
    TestContext context(&tern_test_probe_entry, trim);
    AlignRun run;
    run.probe.next = &align_continuation;
    run.probe.user = &run;
    run.main = &main;
    run.self = &context;
    int main_misaligned = 0;
    for (int round = 0; round <= kAlignRounds; ++round) {
      checked_switch(main, context, &run.probe);
      if (!aligned_local_ok()) ++main_misaligned;
    }
    EXPECT_EQ(run.probe.entry_sp % 16, kEntrySpRemainder);
    const std::uintptr_t top = context.stack_base() + kTestStackSize - trim;
    EXPECT_LT(run.probe.entry_sp, top);
    EXPECT_GT(run.probe.entry_sp, top - 4096) << "the entry does not start near the stack top";
    EXPECT_EQ(run.misaligned_locals, 0);
    EXPECT_EQ(main_misaligned, 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Floating-point work interleaved across two contexts.

constexpr int kFpSteps = 2'000;

// One step of a recurrence; out of line, so the interleaved and the straight runs execute the
// same instructions and must agree to the last bit.
[[gnu::noinline]] double fp_step(double acc, int k, double scale) {
  return acc * 0.9990234375 + std::sqrt(k * scale) / (k + 0.5) - 1.0 / (acc * acc + k);
}

// Four doubles advanced together (more live FP values than one register).
struct FpLanes {
  double a, b, c, d;
  bool operator==(const FpLanes&) const = default;
};

// Runs the recurrence on `lanes` for kFpSteps steps without switching.
FpLanes fp_reference(FpLanes lanes) {
  for (int k = 1; k <= kFpSteps; ++k) {
    lanes = {fp_step(lanes.a, k, 1.0), fp_step(lanes.b, k, 2.5), fp_step(lanes.c, k, 0.25),
             fp_step(lanes.d, k, 7.0)};
  }
  return lanes;
}

// State shared by the floating-point test and its worker context.
struct FpRun {
  TestContext* main = nullptr;
  TestContext* worker = nullptr;
  FpLanes worker_result{};
};

constexpr FpLanes kMainSeed{1.0, 2.0, 0.5, -3.0};
constexpr FpLanes kWorkerSeed{-7.25, 0.125, 3.0, 11.0};

// Entry of the FP worker: runs the recurrence from kWorkerSeed, switching to main after each step.
void fp_worker(void* arg) {
  auto& run = *static_cast<FpRun*>(arg);
  landed(*run.worker);
  double a = kWorkerSeed.a, b = kWorkerSeed.b, c = kWorkerSeed.c, d = kWorkerSeed.d;
  for (int k = 1; k <= kFpSteps; ++k) {
    a = fp_step(a, k, 1.0);
    b = fp_step(b, k, 2.5);
    c = fp_step(c, k, 0.25);
    d = fp_step(d, k, 7.0);
    checked_switch(*run.worker, *run.main, nullptr);
  }
  run.worker_result = {a, b, c, d};
  final_switch(*run.worker, *run.main, nullptr);
}

TEST(ContextTest, FloatingPointValuesSurviveInterleavedSwitches) {
  TestContext main;
  TestContext worker(&fp_worker);
  FpRun run{&main, &worker};
  double a = kMainSeed.a, b = kMainSeed.b, c = kMainSeed.c, d = kMainSeed.d;
  for (int k = 1; k <= kFpSteps; ++k) {
    checked_switch(main, worker, &run);
    a = fp_step(a, k, 1.0);
    b = fp_step(b, k, 2.5);
    c = fp_step(c, k, 0.25);
    d = fp_step(d, k, 7.0);
  }
  checked_switch(main, worker, nullptr);
  EXPECT_EQ((FpLanes{a, b, c, d}), fp_reference(kMainSeed));
  EXPECT_EQ(run.worker_result, fp_reference(kWorkerSeed));
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
  const FpControl before = read_fp_control();
  TestContext peer(&tern_test_regs_peer);
  RegsShared shared;
  shared.peer_ctx = peer.handle();
  constexpr std::uint64_t kRounds = 1'000;
  const std::uint64_t mismatch = tern_test_regs_run(&shared, kRounds);
  EXPECT_EQ(mismatch, 0u) << "clobbered: " << describe_mismatch(mismatch);
  EXPECT_EQ(shared.peer_rounds, kRounds);
  EXPECT_TRUE(same_fp_control(read_fp_control(), before)) << to_string(read_fp_control());
}

TEST(ContextRegsTest, PeerStartsWithItsCreatorsControlWordsNotTheSwitchers) {
  const FpControl original = read_fp_control();
  write_fp_control(creation_fp_control());
  TestContext peer(&tern_test_regs_peer);
  write_fp_control(original);

  RegsShared shared;
  shared.peer_ctx = peer.handle();
  const std::uint64_t mismatch = tern_test_regs_run(&shared, 1);
  EXPECT_EQ(mismatch, 0u) << "clobbered: " << describe_mismatch(mismatch);
  const FpControl seen = peer_entry_fp_control(shared);
  EXPECT_TRUE(same_fp_control(seen, creation_fp_control())) << to_string(seen);
}

#endif  // TERN_TEST_CONTEXT_ASM

}  // namespace
}  // namespace tern::test
