// What a shared stack costs per switch (FiberOptions::stack_mode = StackMode::shared): two fibers
// on one worker yield to each other while each holds a frame of 256 B, 2 KiB or 8 KiB, in three
// pairings run side by side: both on stacks of their own (the reference), one on the shared
// stack (each round trip copies it out once and back once, as when a sleeping fiber is woken by
// an ordinary one), and both on it (every yield copies one out and the other in, through the
// copier context). One iteration is one round trip (A -> B -> A); `per_yield` is half of it.
//
// Timing as in switch_bench: Runtime::run makes Google Benchmark's thread worker 0 and the timed
// loop runs in fiber A on it. The benchmark fails unless both fibers yielded as often as the
// loop says.

#include <alloca.h>
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace {

enum Pairing : std::int64_t { kBothOwn = 0, kOneShared = 1, kBothShared = 2 };

const char* pairing_name(std::int64_t pairing) {
  switch (pairing) {
    case kBothOwn:
      return "own+own";
    case kOneShared:
      return "own+shared";
    default:
      return "shared+shared";
  }
}

tern::FiberOptions options_for(bool shared) {
  return {.name = shared ? "shared" : "own",
          .stack_mode = shared ? tern::StackMode::shared : tern::StackMode::own};
}

// Runs body() below a frame of `bytes` bytes that the fiber has written, so that a copied-out
// stack holds at least that much.
template <typename Body>
[[gnu::noinline]] void below_frame(std::size_t bytes, Body&& body) {
  auto* frame = static_cast<volatile unsigned char*>(alloca(bytes));
  for (std::size_t i = 0; i < bytes; i += 64) frame[i] = static_cast<unsigned char>(i);
  body();
  benchmark::DoNotOptimize(frame[0]);
}

void BM_yield_round_trip(benchmark::State& state) {
  const std::int64_t pairing = state.range(0);
  const auto bytes = static_cast<std::size_t>(state.range(1));
  std::uint64_t a_yields = 0;
  std::uint64_t b_yields = 0;
  bool stop = false;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Fiber b = tern::spawn(
        [&] {
          below_frame(bytes, [&] {
            while (!stop) {
              ++b_yields;
              tern::this_fiber::yield();
            }
          });
        },
        options_for(pairing != kBothOwn));
    tern::Fiber a = tern::spawn(
        [&] {
          below_frame(bytes, [&] {
            for (auto _ : state) {
              ++a_yields;
              tern::this_fiber::yield();
            }
          });
          stop = true;
        },
        options_for(pairing == kBothShared));
    a.join();
    b.join();
  });
  const auto iterations = static_cast<std::uint64_t>(state.iterations());
  // B yields once before A's first and may yield once more after A's last.
  if (a_yields != iterations || b_yields < iterations || b_yields > iterations + 2) {
    const std::string message = "yields: A " + std::to_string(a_yields) + ", B " +
                                std::to_string(b_yields) + " for " + std::to_string(iterations) +
                                " iterations";
    state.SkipWithError(message.c_str());
    return;
  }
  const auto round_trips = static_cast<double>(iterations);
  state.counters["per_round_trip"] =
      benchmark::Counter(round_trips, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["per_yield"] = benchmark::Counter(
      2.0 * round_trips, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(pairing_name(pairing)) + ", " + std::to_string(bytes) + " B frames");
}
BENCHMARK(BM_yield_round_trip)
    ->ArgNames({"pairing", "frame"})
    ->ArgsProduct({{kBothOwn, kOneShared, kBothShared}, {256, 2048, 8192}});

}  // namespace
