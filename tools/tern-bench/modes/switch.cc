// switch: the coroutine switch test of report 004 (docs/benchmark-methods.md), in the unit it
// meant. Two contexts pass control back and forth --switches times in all; each side counts its own
// switches and the run only counts as verified when both sides switched exactly as often as the
// loop says (report 004's libco variant never switched at all, and its "M/s" was microseconds per
// switch).
//   tern-fiber:   two tern fibers on one worker, each calling this_fiber::yield() in turn (one
//                 switch = one fiber handing the worker to the other through the scheduler);
//   tern-context: tern::make_context / tern::switch_context ping-pong between two stacks, no
//                 scheduler (one switch = one switch_context call).
// Reported per variant (one report each): ns per switch, switches per second, and the spread of
// ns per switch over batches of round trips (about 1% of the run each, at most kMaxBatchRounds).
//
// Both variants do the same bookkeeping per switch (a count), and per batch (a clock read); the
// fibers' alternation is checked once per batch, not per switch, and batches are counted down
// rather than found with a division, which cost both loops more than a raw switch does.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "tern/fiber/context.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/sanitizer.h"

namespace tern::bench {

namespace {

constexpr std::uint64_t kMaxBatchRounds = 1 << 16;
constexpr std::size_t kStackSize = 256 * 1024;

// What a variant measured.
struct SwitchOutcome {
  std::uint64_t rounds = 0;        // round trips A -> B -> A asked for
  std::uint64_t batch_rounds = 1;  // round trips per timed batch
  std::uint64_t switches[2] = {};  // switches each side made
  std::uint64_t batches = 0;       // batches ended
  std::uint64_t uneven = 0;        // fibers: batch ends where B had not switched as often as A
  double seconds = 0;
  // ns per switch, one value per batch, kept exactly: a histogram bucket (up to 3% wide) would
  // move a median by more than the difference being measured. Reserved before the run.
  std::vector<double> batch_ns;
};

// Records a batch's time as ns per switch, and the progress.
void end_batch(SwitchOutcome& out, Meter& meter, Clock::time_point& batch_start,
               std::uint64_t rounds) {
  const Clock::time_point now = Clock::now();
  out.batch_ns.push_back(std::chrono::duration<double, std::nano>(now - batch_start).count() /
                         static_cast<double>(2 * rounds));
  ++out.batches;
  meter.add_done(0, 2 * rounds, 0);
  batch_start = now;
}

// The batch value at percentile `p` (0..100) by nearest rank: the median of an odd count is its
// middle value, p=100 the largest.
double batch_percentile(std::vector<double> values, double p) {
  const auto rank =
      static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(values.size())));
  const std::size_t index = std::clamp<std::size_t>(rank, 1, values.size()) - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(index),
                   values.end());
  return values[index];
}

// ---- tern fibers ----

struct YieldShared {
  SwitchOutcome* out = nullptr;
  Meter* meter = nullptr;
};

// Fiber `self` yields `rounds` times; side 0 also times the batches and checks, at the end of
// each, that B has switched exactly as often as A: with strict alternation B has had its turn
// after each of A's yields. (`self` is a constant at both calls, so the compiler makes one copy
// per side: as in the raw variant, each side resumes the other at a call site of its own.)
[[gnu::noinline]] void yield_rounds(YieldShared& shared, int self, std::uint64_t rounds) {
  SwitchOutcome& out = *shared.out;
  Clock::time_point batch_start = Clock::now();
  std::uint64_t batch_left = out.batch_rounds;
  for (std::uint64_t i = 0; i < rounds; ++i) {
    ++out.switches[self];
    this_fiber::yield();
    if (self == 0 && --batch_left == 0) {
      batch_left = out.batch_rounds;
      if (out.switches[1] != out.switches[0]) ++out.uneven;
      end_batch(out, *shared.meter, batch_start, out.batch_rounds);
    }
  }
}

void run_fibers(SwitchOutcome& out, Meter& meter) {
  YieldShared shared{.out = &out, .meter = &meter};
  Runtime runtime(RuntimeOptions{.workers = 1});
  runtime.run([&] {
    Fiber other = spawn([&] { yield_rounds(shared, 1, out.rounds); }, {.name = "switch-b"});
    const Clock::time_point start = Clock::now();
    yield_rounds(shared, 0, out.rounds);
    const Clock::time_point end = Clock::now();
    other.join();
    out.seconds = seconds_between(start, end);
  });
}

// ---- raw contexts ----

// A context on a heap stack (or the thread's own), with its sanitizer bookkeeping.
struct RawContext {
  ContextHandle handle = nullptr;
  SanitizerContext sanitizer;
  std::unique_ptr<std::byte[]> stack;
};

struct RawPair {
  RawContext thread;
  RawContext main;   // runs the timed loop
  RawContext other;  // only switches back
  SwitchOutcome* out = nullptr;
  Meter* meter = nullptr;
};

void switch_to(RawContext& from, RawContext& to, void* arg, bool from_ends = false) {
  sanitizer_before_switch(from.sanitizer, to.sanitizer, from_ends);
  switch_context(&from.handle, to.handle, arg);
  if (!from_ends) sanitizer_after_switch(from.sanitizer, to.sanitizer);
}

[[noreturn]] void raw_other(void* arg) {
  auto* pair = static_cast<RawPair*>(arg);
  sanitizer_after_switch(pair->other.sanitizer, pair->main.sanitizer);
  for (;;) {
    ++pair->out->switches[1];
    switch_to(pair->other, pair->main, nullptr);
  }
}

[[noreturn]] void raw_main(void* arg) {
  auto* pair = static_cast<RawPair*>(arg);
  sanitizer_after_switch(pair->main.sanitizer, pair->thread.sanitizer);
  SwitchOutcome& out = *pair->out;
  const Clock::time_point start = Clock::now();
  Clock::time_point batch_start = start;
  std::uint64_t batch_left = out.batch_rounds;
  for (std::uint64_t i = 0; i < out.rounds; ++i) {
    ++out.switches[0];
    switch_to(pair->main, pair->other, pair);
    if (--batch_left == 0) {
      batch_left = out.batch_rounds;
      end_batch(out, *pair->meter, batch_start, out.batch_rounds);
    }
  }
  out.seconds = seconds_between(start, Clock::now());
  // The other side stays suspended in its loop; it owns nothing, so its stack just goes.
  switch_to(pair->main, pair->thread, nullptr, true);
  __builtin_unreachable();
}

void run_contexts(SwitchOutcome& out, Meter& meter) {
  auto pair = std::make_unique<RawPair>();
  pair->out = &out;
  pair->meter = &meter;
  sanitizer_adopt_thread(pair->thread.sanitizer);
  for (RawContext* context : {&pair->main, &pair->other}) {
    context->stack = std::make_unique<std::byte[]>(kStackSize);
    sanitizer_create(context->sanitizer, context->stack.get(), kStackSize);
  }
  pair->main.handle = make_context(pair->main.stack.get(), kStackSize, &raw_main);
  pair->other.handle = make_context(pair->other.stack.get(), kStackSize, &raw_other);
  switch_to(pair->thread, pair->main, pair.get());
  sanitizer_destroy(pair->main.sanitizer);
  sanitizer_destroy(pair->other.sanitizer);
}

Report run_variant(const SwitchOptions& o, const std::string& variant) {
  Meter meter(1);
  Progress progress(meter, std::chrono::seconds(1), Progress::rate_line("switches"),
                    o.output.quiet);
  SwitchOutcome out;
  out.rounds = (o.switches + 1) / 2;
  out.batch_rounds = std::clamp<std::uint64_t>(out.rounds / 100, 1, kMaxBatchRounds);
  out.batch_ns.reserve(out.rounds / out.batch_rounds + 1);
  Report report;
  report.mode = "switch";
  report.target = variant;
  CpuWindow cpu(0);
  cpu.start();
  progress.start();
  if (variant == "tern-fiber") {
    run_fibers(out, meter);
  } else {
    run_contexts(out, meter);
  }
  progress.stop();
  cpu.stop(report);
  const std::uint64_t switches = out.switches[0] + out.switches[1];
  const double ns = switches > 0 ? out.seconds * 1e9 / static_cast<double>(switches) : 0;
  const double per_second = out.seconds > 0 ? static_cast<double>(switches) / out.seconds : 0;
  report.params["switches"] = o.switches;
  report.params["rounds"] = out.rounds;
  report.params["batch_rounds"] = out.batch_rounds;
  report.params["workers"] = 1;
  report.figures["switches"] = switches;
  report.figures["switches_a"] = out.switches[0];
  report.figures["switches_b"] = out.switches[1];
  report.figures["elapsed_s"] = round_to(out.seconds, 6);
  report.figures["ns_per_switch"] = round_to(ns, 3);
  report.figures["switches_per_s"] = static_cast<std::uint64_t>(per_second + 0.5);
  const auto batch_ns = [&](double p) -> Json {
    if (out.batch_ns.empty()) return nullptr;
    return round_to(batch_percentile(out.batch_ns, p), 3);
  };
  report.figures["batch_p50_ns_per_switch"] = batch_ns(50);
  report.figures["batch_p99_ns_per_switch"] = batch_ns(99);
  report.figures["batch_max_ns_per_switch"] = batch_ns(100);
  report.summary.push_back(
      fmt::format("{} switches in {:.6f} s: {:.3f} ns per switch, {:.0f} "
                  "switches/s",
                  switches, out.seconds, ns, per_second));
  if (out.switches[0] != out.rounds || out.switches[1] != out.rounds)
    report.add_error(fmt::format("switch counts: side A {}, side B {}, expected {} each",
                                 out.switches[0], out.switches[1], out.rounds));
  // Fibers go through the scheduler's run queue: at every batch end B must have switched as
  // often as A. (A raw switch names its target.)
  if (variant == "tern-fiber" && (out.uneven > 0 || out.batches == 0))
    report.add_error(
        fmt::format("the sides did not alternate: B's count differed from A's at {} "
                    "of {} batch ends",
                    out.uneven, out.batches));
  return report;
}

int run_switch(const SwitchOptions& o) {
  std::vector<std::string> variants;
  if (o.variant != "context") variants.push_back("tern-fiber");
  if (o.variant != "fiber") variants.push_back("tern-context");
  int status = 0;
  for (const std::string& variant : variants) {
    Report report = run_variant(o, variant);
    status = std::max(status, conclude(report, o.output));
  }
  return status;
}

}  // namespace

void add_switch_command(CLI::App& app) { add_mode(app, &add_switch_options, &run_switch); }

}  // namespace tern::bench
