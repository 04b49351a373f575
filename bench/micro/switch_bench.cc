// Context-switch micro benchmarks: tern's raw switch against boost.context and swapcontext, and
// the round trip of two tern fibers yielding to each other on one worker.
//
// Every benchmark counts the switches each side really performed and fails (SkipWithError)
// unless both sides switched exactly as often as the loop says (the same-site yield benchmark
// also checks that its two fibers strictly alternate); a variant that never switches cannot
// report a figure. Units are explicit: `per_switch` (or `per_yield`, `per_round_trip`) is
// a time per operation shown in ns, `switches` (or `yields`) is a rate per second. Both come
// from the time Google Benchmark measures for the loop (CPU time of the benchmark thread).

#include <benchmark/benchmark.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "tern/fiber/context.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace {

namespace bctx = boost::context::detail;

// Stacks for the raw switches. Both sides of every raw ping-pong, including the side that runs
// the timed loop, run on stacks mapped here, and the state they share lives in its own cache
// line: the figures then do not depend on where ASLR put the benchmark thread's stack. (With
// the loop on the thread's own stack, the same binary measured 5 or 10 ns per switch depending
// on the stack's placement, for every switch implementation alike.)
constexpr std::size_t kStackSize = 256 * 1024;

// A page-aligned, lazily committed stack, unmapped on destruction.
class BenchStack {
 public:
  BenchStack() {
    memory_ = ::mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory_ == MAP_FAILED) throw std::system_error(errno, std::system_category(), "mmap");
  }
  ~BenchStack() { ::munmap(memory_, kStackSize); }
  BenchStack(const BenchStack&) = delete;
  BenchStack& operator=(const BenchStack&) = delete;
  void* base() const { return memory_; }
  void* top() const { return static_cast<char*>(memory_) + kStackSize; }

 private:
  void* memory_;
};

// Reports `ops` operations done in the timed loop as time per operation and as a rate.
// kIsRate divides by the measured seconds; kInvert turns ops/s into s/op, which the console
// prints with an SI prefix ("2.1ns") and the JSON output holds in seconds.
void report_ops(benchmark::State& state, const std::string& per_op, const std::string& rate,
                double ops) {
  state.counters[per_op] =
      benchmark::Counter(ops, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters[rate] = benchmark::Counter(ops, benchmark::Counter::kIsRate);
}

// Fails the benchmark unless both sides switched once per iteration.
bool check_switches(benchmark::State& state, std::uint64_t main_side, std::uint64_t other_side) {
  const auto expected = static_cast<std::uint64_t>(state.iterations());
  if (main_side != expected || other_side != expected) {
    const std::string message = "switch count mismatch: iterations " + std::to_string(expected) +
                                ", main side " + std::to_string(main_side) + ", other side " +
                                std::to_string(other_side);
    state.SkipWithError(message.c_str());
    return false;
  }
  return true;
}

// What the two sides of a raw ping-pong share: the benchmark state, the switch counts of each
// side and the library's context handles. One per benchmark run, on its own cache line.
template <typename Handle>
struct alignas(64) RawPair {
  benchmark::State* state = nullptr;
  Handle thread{};  // the benchmark thread, resumed when the loop is done
  Handle main{};    // the side that runs the timed loop
  Handle other{};   // the side that only switches back
  std::uint64_t main_switches = 0;
  std::uint64_t other_switches = 0;
};

// Runs a raw ping-pong with a fresh pair and reports it; run(pair, main_stack, other_stack)
// switches into the main side and returns once it is done.
template <typename Handle, typename Run>
void raw_ping_pong(benchmark::State& state, Run run) {
  BenchStack main_stack;
  BenchStack other_stack;
  auto pair = std::make_unique<RawPair<Handle>>();
  pair->state = &state;
  run(*pair, main_stack, other_stack);
  if (check_switches(state, pair->main_switches, pair->other_switches))
    report_ops(state, "per_switch", "switches", 2.0 * static_cast<double>(state.iterations()));
}

// ---- (a) tern raw context switch ----

using TernPair = RawPair<tern::ContextHandle>;

[[noreturn]] void tern_raw_other(void* arg) {
  auto* pair = static_cast<TernPair*>(arg);
  for (;;) {
    ++pair->other_switches;
    tern::switch_context(&pair->other, pair->main, nullptr);
  }
}

[[noreturn]] void tern_raw_main(void* arg) {
  auto* pair = static_cast<TernPair*>(arg);
  for (auto _ : *pair->state) {
    ++pair->main_switches;
    tern::switch_context(&pair->main, pair->other, pair);
  }
  // The other side stays suspended in its loop; it owns nothing, so its stack just goes.
  tern::switch_context(&pair->main, pair->thread, nullptr);
  __builtin_unreachable();
}

// One iteration = main -> other -> main through tern::switch_context: two single switches.
void BM_tern_raw_switch(benchmark::State& state) {
  raw_ping_pong<tern::ContextHandle>(state, [](TernPair& pair, BenchStack& m, BenchStack& o) {
    pair.main = tern::make_context(m.base(), kStackSize, &tern_raw_main);
    pair.other = tern::make_context(o.base(), kStackSize, &tern_raw_other);
    tern::switch_context(&pair.thread, pair.main, &pair);
  });
}
BENCHMARK(BM_tern_raw_switch);

// ---- (b) boost.context jump_fcontext ----

using BoostPair = RawPair<bctx::fcontext_t>;

void boost_other(bctx::transfer_t from) {
  auto* pair = static_cast<BoostPair*>(from.data);
  for (;;) {
    ++pair->other_switches;
    from = bctx::jump_fcontext(from.fctx, nullptr);
  }
}

void boost_main(bctx::transfer_t from) {
  auto* pair = static_cast<BoostPair*>(from.data);
  pair->thread = from.fctx;
  for (auto _ : *pair->state) {
    ++pair->main_switches;
    pair->other = bctx::jump_fcontext(pair->other, pair).fctx;
  }
  bctx::jump_fcontext(pair->thread, nullptr);
  __builtin_unreachable();
}

// One iteration = main -> other -> main through boost's jump_fcontext: two single switches.
void BM_boost_fcontext_switch(benchmark::State& state) {
  raw_ping_pong<bctx::fcontext_t>(state, [](BoostPair& pair, BenchStack& m, BenchStack& o) {
    pair.other = bctx::make_fcontext(o.top(), kStackSize, &boost_other);
    bctx::jump_fcontext(bctx::make_fcontext(m.top(), kStackSize, &boost_main), &pair);
  });
}
BENCHMARK(BM_boost_fcontext_switch);

// ---- (c) swapcontext ----

struct UcontextHandle {
  ucontext_t context;
};
using UcontextPair = RawPair<UcontextHandle>;

// makecontext passes only int arguments portably, so the pair is handed over in a global.
UcontextPair* ucontext_pair = nullptr;

void ucontext_other() {
  UcontextPair* pair = ucontext_pair;
  for (;;) {
    ++pair->other_switches;
    ::swapcontext(&pair->other.context, &pair->main.context);
  }
}

// Returns when done, which resumes uc_link: the benchmark thread.
void ucontext_main() {
  UcontextPair* pair = ucontext_pair;
  for (auto _ : *pair->state) {
    ++pair->main_switches;
    ::swapcontext(&pair->main.context, &pair->other.context);
  }
}

void prepare_ucontext(ucontext_t& context, BenchStack& stack, ucontext_t* link, void (*fn)()) {
  ::getcontext(&context);
  context.uc_stack.ss_sp = stack.base();
  context.uc_stack.ss_size = kStackSize;
  context.uc_link = link;
  ::makecontext(&context, fn, 0);
}

// One iteration = main -> other -> main through glibc swapcontext (which also saves and
// restores the signal mask with a system call): two single switches.
void BM_swapcontext_switch(benchmark::State& state) {
  raw_ping_pong<UcontextHandle>(state, [](UcontextPair& pair, BenchStack& m, BenchStack& o) {
    ucontext_pair = &pair;
    prepare_ucontext(pair.other.context, o, nullptr, &ucontext_other);
    prepare_ucontext(pair.main.context, m, &pair.thread.context, &ucontext_main);
    ::swapcontext(&pair.thread.context, &pair.main.context);
    ucontext_pair = nullptr;
  });
}
BENCHMARK(BM_swapcontext_switch);

// ---- (d) tern fiber yield round trip ----

// One iteration = fiber A yields to fiber B, B yields back to A (A -> B -> A) on one worker,
// through the scheduler's run queue: one round trip, two yields.
//
// Timing: Runtime::run makes the calling thread (Google Benchmark's) worker 0 and runs the
// lambda as a fiber on it, so the `for (auto _ : state)` loop runs inside fiber A on the very
// thread Google Benchmark times; its clocks (wall and this thread's CPU time) cover exactly the
// loop. Starting the runtime, spawning B and shutting down stay outside the timed region.
void BM_tern_fiber_yield(benchmark::State& state) {
  std::uint64_t a_yields = 0;
  std::uint64_t b_yields = 0;
  bool stop = false;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Fiber b = tern::spawn([&] {
      while (!stop) {
        ++b_yields;
        tern::this_fiber::yield();
      }
    });
    for (auto _ : state) {
      ++a_yields;
      tern::this_fiber::yield();
    }
    stop = true;
    b.join();
  });
  if (check_switches(state, a_yields, b_yields)) {
    const auto round_trips = static_cast<double>(state.iterations());
    report_ops(state, "per_round_trip", "round_trips", round_trips);
    report_ops(state, "per_yield", "yields", 2.0 * round_trips);
  }
}
BENCHMARK(BM_tern_fiber_yield);

// The fibers of the same-site benchmark: `self` yields `rounds` times and counts how often it
// came back from a yield after the other fiber had run in between.
struct YieldRounds {
  int last_runner = 0;
  std::uint64_t yields[2] = {0, 0};
  std::uint64_t alternations = 0;
};

[[gnu::noinline]] void yield_rounds(YieldRounds& shared, int self, std::uint64_t rounds) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    shared.last_runner = self;
    ++shared.yields[self];
    tern::this_fiber::yield();
    if (shared.last_runner != self) ++shared.alternations;
  }
}

// Measures the same A -> B -> A round trip when both fibers run the same code (yield_rounds),
// so each one resumes at the call site where the other suspended, as fibers parked in the same
// wait path of a server do. (In BM_tern_fiber_yield, A's loop and B's loop differ, so every
// return from a yield lands at the other fiber's call site: a return mispredict per yield.)
// One iteration = spawn both, 1024 round trips, join both; the spawns and joins add under 1%.
void BM_tern_fiber_yield_same_site(benchmark::State& state) {
  constexpr std::uint64_t kRounds = 1024;
  YieldRounds shared;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    // `self` is made opaque so the compiler cannot clone yield_rounds once per fiber, which
    // would give each fiber its own call site again.
    auto run_rounds = [&shared](int self) {
      benchmark::DoNotOptimize(self);
      yield_rounds(shared, self, kRounds);
    };
    for (auto _ : state) {
      tern::Fiber a = tern::spawn([&run_rounds] { run_rounds(0); });
      tern::Fiber b = tern::spawn([&run_rounds] { run_rounds(1); });
      a.join();
      b.join();
    }
  });
  const auto iterations = static_cast<std::uint64_t>(state.iterations());
  // Strict alternation: every return from a yield but the last one of each batch follows a
  // turn of the other fiber.
  if (shared.yields[0] != kRounds * iterations || shared.yields[1] != kRounds * iterations ||
      shared.alternations < (2 * kRounds - 1) * iterations) {
    const std::string message =
        "fibers did not alternate: yields " + std::to_string(shared.yields[0]) + " and " +
        std::to_string(shared.yields[1]) + ", alternations " + std::to_string(shared.alternations) +
        ", iterations " + std::to_string(iterations);
    state.SkipWithError(message.c_str());
    return;
  }
  const auto round_trips = static_cast<double>(kRounds * iterations);
  report_ops(state, "per_round_trip", "round_trips", round_trips);
  report_ops(state, "per_yield", "yields", 2.0 * round_trips);
}
BENCHMARK(BM_tern_fiber_yield_same_site);

}  // namespace
