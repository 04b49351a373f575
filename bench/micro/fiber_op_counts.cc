// A fixed number of one fiber operation, for instruction counts under callgrind (which a
// Google Benchmark run cannot give: it picks its own iteration counts):
//
//   valgrind --tool=callgrind --callgrind-out-file=/dev/null
//       build/release/bench/micro/fiber_op_counts yield 200000   (one command line)
//
// run with two counts and divide the difference of the totals ("Collected") by the
// difference in operations; start-up and shutdown cancel out. Operations:
//   yield       two fibers on one worker yielding to each other: COUNT yields in all;
//   spawn-join  spawn() of a fiber that does one increment, then join(): COUNT of them;
//   timed-wait  two fibers handing a semaphore permit back and forth, each waiting with a
//               300 s timeout renewed on every wait (a connection's idle timeout): COUNT waits;
//   context     two raw contexts ping-ponging through tern::switch_context: COUNT switches.
// Every operation checks that the work happened and exits non-zero otherwise.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>

#include "tern/fiber/context.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/semaphore.h"

namespace {

bool run_yields(std::uint64_t count) {
  const std::uint64_t rounds = count / 2;
  std::uint64_t yields[2] = {0, 0};
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Fiber other = tern::spawn([&] {
      for (std::uint64_t i = 0; i < rounds; ++i) {
        ++yields[1];
        tern::this_fiber::yield();
      }
    });
    for (std::uint64_t i = 0; i < rounds; ++i) {
      ++yields[0];
      tern::this_fiber::yield();
    }
    other.join();
  });
  return yields[0] == rounds && yields[1] == rounds;
}

bool run_spawn_joins(std::uint64_t count) {
  std::uint64_t ran = 0;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    for (std::uint64_t i = 0; i < count; ++i) tern::spawn([&ran] { ++ran; }).join();
  });
  return ran == count;
}

bool run_timed_waits(std::uint64_t count) {
  using namespace std::chrono_literals;
  const std::uint64_t rounds = count / 2;
  std::uint64_t waits[2] = {0, 0};
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Semaphore turn[2];
    tern::Fiber other = tern::spawn([&] {
      for (std::uint64_t i = 0; i < rounds; ++i) {
        if (turn[1].acquire_for(300s)) ++waits[1];
        turn[0].release();
      }
    });
    for (std::uint64_t i = 0; i < rounds; ++i) {
      turn[1].release();
      if (turn[0].acquire_for(300s)) ++waits[0];
    }
    other.join();
  });
  return waits[0] == rounds && waits[1] == rounds;
}

struct RawPair {
  tern::ContextHandle thread = nullptr;
  tern::ContextHandle main = nullptr;
  tern::ContextHandle other = nullptr;
  std::uint64_t rounds = 0;
  std::uint64_t switches[2] = {0, 0};
};

[[noreturn]] void raw_other(void* arg) {
  auto* pair = static_cast<RawPair*>(arg);
  for (;;) {
    ++pair->switches[1];
    tern::switch_context(&pair->other, pair->main, nullptr);
  }
}

[[noreturn]] void raw_main(void* arg) {
  auto* pair = static_cast<RawPair*>(arg);
  for (std::uint64_t i = 0; i < pair->rounds; ++i) {
    ++pair->switches[0];
    tern::switch_context(&pair->main, pair->other, pair);
  }
  tern::switch_context(&pair->main, pair->thread, nullptr);
  __builtin_unreachable();
}

bool run_context_switches(std::uint64_t count) {
  constexpr std::size_t kStackSize = 64 * 1024;
  auto main_stack = std::make_unique<std::byte[]>(kStackSize);
  auto other_stack = std::make_unique<std::byte[]>(kStackSize);
  RawPair pair;
  pair.rounds = count / 2;
  pair.main = tern::make_context(main_stack.get(), kStackSize, &raw_main);
  pair.other = tern::make_context(other_stack.get(), kStackSize, &raw_other);
  tern::switch_context(&pair.thread, pair.main, &pair);
  return pair.switches[0] == pair.rounds && pair.switches[1] == pair.rounds;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view op = argc > 1 ? argv[1] : "";
  const long count = argc > 2 ? std::atol(argv[2]) : 0;
  if (argc != 3 || count <= 0 ||
      (op != "yield" && op != "spawn-join" && op != "timed-wait" && op != "context")) {
    std::fprintf(
        stderr,
        "usage: fiber_op_counts yield|spawn-join|timed-wait|context COUNT\n"
        "Runs COUNT fiber yields, spawn+joins, timed waits or raw context switches on one\n"
        "worker,\n"
        "for instruction counts under callgrind (run two counts, divide the difference).\n");
    return op == "--help" ? 0 : 2;
  }
  const auto n = static_cast<std::uint64_t>(count);
  const bool ok = op == "yield"        ? run_yields(n)
                  : op == "spawn-join" ? run_spawn_joins(n)
                  : op == "timed-wait" ? run_timed_waits(n)
                                       : run_context_switches(n);
  if (!ok) {
    std::fprintf(stderr, "fiber_op_counts: %s: the counts do not match %ld\n", argv[1], count);
    return 1;
  }
  std::printf("%s: %ld done\n", argv[1], count);
  return 0;
}
