// switch_peers: the context-switch loops `tern-bench switch` compares tern with (report 004's
// coroutine switch test, done right): two contexts ping-pong --switches times through
// boost.context's jump_fcontext (--impl boost) or glibc's swapcontext (--impl ucontext).
//
//   switch_peers --impl boost|ucontext [--switches 10000000] [--json]
//
// One switch is one jump from one context to the other. Both contexts run the same loop: bump
// the shared switch counter and their own, then jump to the other, until the counter reaches
// --switches. The run is verified only if the counter equals --switches and each side made its
// half (the first side ceil(N/2) jumps, the second floor(N/2)), which holds only if every jump
// really landed in the other context. Both contexts run on stacks mapped here (so the figure
// does not depend on where the thread's own stack lies); the clock runs from the first counted
// jump to the last one. Prints ns per switch and switches per second, or with --json one object:
//   {"mode":"switch","target":"boost.context","switches":N,"ns_per_switch":x,
//    "switches_per_s":y,"verified":true}
// Exit status 1 if the run is not verified.

#include <sys/mman.h>
#include <ucontext.h>

#include <CLI/CLI.hpp>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>

namespace {

namespace bctx = boost::context::detail;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kStackSize = 256 * 1024;

// A page-aligned, lazily committed stack, unmapped on destruction.
class Stack {
 public:
  Stack() {
    memory_ = ::mmap(nullptr, kStackSize, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory_ == MAP_FAILED) throw std::system_error(errno, std::system_category(), "mmap");
  }
  ~Stack() { ::munmap(memory_, kStackSize); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;
  void* base() const { return memory_; }
  void* top() const { return static_cast<char*>(memory_) + kStackSize; }

 private:
  void* memory_;
};

// What both contexts share, on its own cache line.
struct alignas(64) Run {
  std::uint64_t target = 0;    // switches to make
  std::uint64_t switches = 0;  // switches made, by either side
  std::uint64_t side_switches[2] = {0, 0};
  Clock::time_point start{};
  Clock::time_point end{};
};

struct Outcome {
  std::uint64_t switches = 0;
  double seconds = 0;
  bool verified = false;
};

Outcome outcome_of(const Run& run) {
  const std::uint64_t first_half = (run.target + 1) / 2;
  const std::uint64_t second_half = run.target / 2;
  return {run.switches, std::chrono::duration<double>(run.end - run.start).count(),
          run.switches == run.target && run.side_switches[0] == first_half &&
              run.side_switches[1] == second_half};
}

// ---- boost.context (jump_fcontext / make_fcontext) ----

struct BoostRun {
  Run run;
  bctx::fcontext_t thread = nullptr;  // resumed when the target is reached
  bctx::fcontext_t second = nullptr;  // the second side, before its first run
};

// Each side's loop; `other` is the context to jump to, refreshed on every return.
[[noreturn]] void boost_loop(BoostRun& shared, int side, bctx::fcontext_t other) {
  Run& run = shared.run;
  while (run.switches < run.target) {
    ++run.switches;
    ++run.side_switches[side];
    other = bctx::jump_fcontext(other, nullptr).fctx;
  }
  run.end = Clock::now();
  bctx::jump_fcontext(shared.thread, nullptr);
  __builtin_unreachable();
}

BoostRun* boost_run = nullptr;

void boost_second(bctx::transfer_t from) { boost_loop(*boost_run, 1, from.fctx); }

void boost_first(bctx::transfer_t from) {
  BoostRun& shared = *boost_run;
  shared.thread = from.fctx;
  shared.run.start = Clock::now();
  boost_loop(shared, 0, shared.second);
}

Outcome run_boost(std::uint64_t switches) {
  Stack first_stack;
  Stack second_stack;
  auto shared = std::make_unique<BoostRun>();
  shared->run.target = switches;
  boost_run = shared.get();
  shared->second = bctx::make_fcontext(second_stack.top(), kStackSize, &boost_second);
  bctx::jump_fcontext(bctx::make_fcontext(first_stack.top(), kStackSize, &boost_first), nullptr);
  boost_run = nullptr;
  return outcome_of(shared->run);
}

// ---- ucontext (swapcontext / makecontext) ----

struct UcontextRun {
  Run run;
  ucontext_t thread;
  ucontext_t sides[2];
};

// makecontext passes only int arguments portably, so the run is handed over in a global.
UcontextRun* ucontext_run = nullptr;

// Each side's loop; returning resumes uc_link, the thread.
void ucontext_loop(int side) {
  UcontextRun& shared = *ucontext_run;
  Run& run = shared.run;
  if (side == 0) run.start = Clock::now();
  while (run.switches < run.target) {
    ++run.switches;
    ++run.side_switches[side];
    ::swapcontext(&shared.sides[side], &shared.sides[1 - side]);
  }
  run.end = Clock::now();
}

Outcome run_ucontext(std::uint64_t switches) {
  Stack stacks[2];
  auto shared = std::make_unique<UcontextRun>();
  shared->run.target = switches;
  ucontext_run = shared.get();
  for (int side = 0; side < 2; ++side) {
    ucontext_t& context = shared->sides[side];
    ::getcontext(&context);
    context.uc_stack.ss_sp = stacks[side].base();
    context.uc_stack.ss_size = kStackSize;
    context.uc_link = &shared->thread;
    ::makecontext(&context, reinterpret_cast<void (*)()>(&ucontext_loop), 1, side);
  }
  ::swapcontext(&shared->thread, &shared->sides[0]);
  ucontext_run = nullptr;
  return outcome_of(shared->run);
}

}  // namespace

int main(int argc, char** argv) {
  std::string impl;
  std::uint64_t switches = 10'000'000;
  bool json = false;
  CLI::App app{
      "switch_peers: two contexts ping-pong --switches times through boost.context's\n"
      "jump_fcontext or glibc's swapcontext; prints ns per switch and switches per second\n"
      "(one switch = one jump from one context to the other), verified by per-side counts."};
  app.add_option("--impl", impl, "boost (boost.context fcontext) or ucontext (swapcontext)")
      ->required()
      ->check(CLI::IsMember({"boost", "ucontext"}));
  app.add_option("--switches", switches, "switches to make")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object instead of a line of text");
  CLI11_PARSE(app, argc, argv);

  const bool boost = impl == "boost";
  const char* target = boost ? "boost.context" : "ucontext";
  Outcome outcome;
  try {
    outcome = boost ? run_boost(switches) : run_ucontext(switches);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switch_peers: %s\n", e.what());
    return 1;
  }
  const double count = static_cast<double>(outcome.switches);
  const double ns_per_switch = outcome.seconds * 1e9 / count;
  const double per_s = outcome.seconds > 0 ? count / outcome.seconds : 0;
  if (json) {
    std::printf(
        "{\"mode\":\"switch\",\"target\":\"%s\",\"switches\":%llu,\"ns_per_switch\":%.3f,"
        "\"switches_per_s\":%.0f,\"verified\":%s}\n",
        target, static_cast<unsigned long long>(switches), ns_per_switch, per_s,
        outcome.verified ? "true" : "false");
  } else {
    std::printf(
        "switch_peers: %s: %llu switches in %.3f s: %.2f ns per switch, %.1f M switches/s%s\n",
        target, static_cast<unsigned long long>(switches), outcome.seconds, ns_per_switch,
        per_s / 1e6, outcome.verified ? " (verified)" : " (NOT VERIFIED)");
  }
  if (!outcome.verified) {
    std::fprintf(stderr, "switch_peers: %s: %llu switches counted of %llu\n", target,
                 static_cast<unsigned long long>(outcome.switches),
                 static_cast<unsigned long long>(switches));
    return 1;
  }
  return 0;
}
