// Fiber micro benchmarks: spawn+join with a pooled stack, Channel ping-pong on one worker and
// across two workers, and an uncontended tern::Mutex (with std::mutex as the reference).
//
// How fibers are timed: Google Benchmark calls each benchmark on its own thread. The benchmark
// builds a tern::Runtime there; Runtime::run makes that same thread worker 0 and runs the
// lambda as a fiber on it, so the `for (auto _ : state)` loop runs inside a fiber on the thread
// Google Benchmark times, and its automatic timing covers exactly the loop. Starting the
// runtime, spawning the helper fibers, a warm-up round and the shutdown all stay outside the
// timed region. Benchmarks that involve a second worker use UseRealTime(): the benchmark
// thread's CPU time would leave out the time worker 0 sleeps while worker 1 works.
//
// Every benchmark checks that the work happened (fibers ran, values came back in order, the
// other side received as many messages as were sent) and fails with SkipWithError otherwise.
// Units are explicit: `per_*` counters are times per operation (shown in ns), the others rates.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "tern/fiber/channel.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/mutex.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"

namespace {

// Reports `ops` operations done in the timed loop as time per operation and as a rate.
// kIsRate divides by the measured seconds; kInvert turns ops/s into s/op, which the console
// prints with an SI prefix ("85ns") and the JSON output holds in seconds.
void report_ops(benchmark::State& state, const std::string& per_op, const std::string& rate,
                double ops) {
  state.counters[per_op] =
      benchmark::Counter(ops, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters[rate] = benchmark::Counter(ops, benchmark::Counter::kIsRate);
}

// Fails the benchmark unless `done` operations happened on each of the listed sides.
bool check_count(benchmark::State& state, const char* what, std::uint64_t done) {
  const auto expected = static_cast<std::uint64_t>(state.iterations());
  if (done == expected) return true;
  const std::string message = std::string(what) + ": " + std::to_string(done) + " of " +
                              std::to_string(expected) + " iterations";
  state.SkipWithError(message.c_str());
  return false;
}

// Measures spawn() + join() of a fiber that does one increment; its stack comes from the
// worker's pool (a warm-up fiber puts one there before timing starts).
void BM_tern_spawn_join(benchmark::State& state) {
  std::uint64_t ran = 0;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::spawn([] {}).join();
    for (auto _ : state) tern::spawn([&ran] { ++ran; }).join();
  });
  if (check_count(state, "fibers that ran", ran))
    report_ops(state, "per_spawn_join", "spawn_joins", static_cast<double>(state.iterations()));
}
BENCHMARK(BM_tern_spawn_join);

// The two ends of a ping-pong: pings go one way, each comes back as ping + 1.
struct PingPong {
  tern::Channel<std::uint64_t> ping{1};
  tern::Channel<std::uint64_t> pong{1};
  std::uint64_t echoed = 0;  // counted by the echoing fiber

  // The echoing side: answers every ping until `ping` is closed.
  void echo() {
    for (;;) {
      tern::Result<std::uint64_t> value = ping.recv();
      if (!value) return;
      ++echoed;
      if (!pong.send(*value + 1)) return;
    }
  }

  // One round trip from the pinging side; false if the reply is missing or not value + 1.
  bool round_trip(std::uint64_t value) {
    if (ping.send(value)) {
      tern::Result<std::uint64_t> reply = pong.recv();
      if (reply && *reply == value + 1) return true;
    }
    return false;
  }

  // Runs the timed loop on the pinging side; one iteration is one round trip.
  void run_loop(benchmark::State& state) {
    if (!round_trip(0)) {  // warm-up: the echoing fiber is up and waiting
      state.SkipWithError("warm-up round trip failed");
      return;
    }
    echoed = 0;
    std::uint64_t value = 1;
    for (auto _ : state) {
      if (!round_trip(value++)) {
        state.SkipWithError("a reply was missing or wrong");
        break;
      }
    }
    ping.close();
  }

  void report(benchmark::State& state) {
    if (state.error_occurred()) return;
    if (check_count(state, "pings echoed", echoed))
      report_ops(state, "per_round_trip", "round_trips", static_cast<double>(state.iterations()));
  }
};

// Measures a Channel<uint64_t> round trip (send, the peer receives and sends back, receive)
// between two fibers on one worker; capacity-1 channels in each direction.
void BM_tern_channel_ping_pong_same_worker(benchmark::State& state) {
  PingPong pp;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Fiber echo = tern::spawn([&pp] { pp.echo(); });
    pp.run_loop(state);
    echo.join();
  });
  pp.report(state);
}
BENCHMARK(BM_tern_channel_ping_pong_same_worker);

// Measures the same round trip with the pinging fiber on worker 0 and the echoing fiber on
// worker 1 (started there with tern::post): every message crosses threads and wakes the
// other worker. Wall-clock time.
void BM_tern_channel_ping_pong_cross_worker(benchmark::State& state) {
  PingPong pp;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 2});
  runtime.run([&] {
    tern::WaitGroup echo_done;
    echo_done.add();
    if (!tern::post(1, [&pp, &echo_done] {
          pp.echo();
          echo_done.done();
        })) {
      state.SkipWithError("tern::post to worker 1 failed");
      return;
    }
    pp.run_loop(state);
    (void)echo_done.wait();
  });
  pp.report(state);
}
BENCHMARK(BM_tern_channel_ping_pong_cross_worker)->UseRealTime();

// Measures lock() + unlock() of a tern::Mutex nobody else wants, from a worker fiber.
void BM_tern_mutex_uncontended(benchmark::State& state) {
  std::uint64_t held = 0;
  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  runtime.run([&] {
    tern::Mutex mutex;
    for (auto _ : state) {
      mutex.lock();
      ++held;
      benchmark::ClobberMemory();
      mutex.unlock();
    }
  });
  if (check_count(state, "critical sections", held))
    report_ops(state, "per_lock_unlock", "lock_unlocks", static_cast<double>(state.iterations()));
}
BENCHMARK(BM_tern_mutex_uncontended);

// Measures lock() + unlock() of an uncontended std::mutex on a plain thread (the reference).
void BM_std_mutex_uncontended(benchmark::State& state) {
  std::uint64_t held = 0;
  std::mutex mutex;
  for (auto _ : state) {
    mutex.lock();
    ++held;
    benchmark::ClobberMemory();
    mutex.unlock();
  }
  if (check_count(state, "critical sections", held))
    report_ops(state, "per_lock_unlock", "lock_unlocks", static_cast<double>(state.iterations()));
}
BENCHMARK(BM_std_mutex_uncontended);

}  // namespace
