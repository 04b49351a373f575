#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tern::bench {

// Running totals of a load run, one slot per client thread (a tern worker or a blocking
// thread). A slot has one writer, its own thread; any thread may read the totals meanwhile.
class Meter {
 public:
  // What a run counts; each mode says what `done` means (replies, sessions, messages, ...).
  struct Totals {
    std::uint64_t sent = 0;    // requests (or messages) written
    std::uint64_t done = 0;    // units of work completed
    std::uint64_t bytes = 0;   // payload bytes those units carried
    std::uint64_t errors = 0;  // failures seen
  };

  // A meter with `slots` slots. Any thread.
  explicit Meter(std::size_t slots);

  // Adds to slot `slot`. Only from the thread that owns the slot.
  void add_sent(std::size_t slot, std::uint64_t n) noexcept { bump(slots_[slot].sent, n); }
  void add_done(std::size_t slot, std::uint64_t units, std::uint64_t bytes) noexcept {
    bump(slots_[slot].done, units);
    bump(slots_[slot].bytes, bytes);
  }
  void add_error(std::size_t slot) noexcept { bump(slots_[slot].errors, 1); }

  // The sums over every slot (a snapshot). Any thread.
  Totals totals() const noexcept;

 private:
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> sent{0};
    std::atomic<std::uint64_t> done{0};
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::uint64_t> errors{0};
  };
  // One writer per slot: a plain load and store, no locked read-modify-write.
  static void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::unique_ptr<Slot[]> slots_;
  std::size_t count_;
};

// What a progress line is made from.
struct ProgressSample {
  double elapsed_s = 0;   // since start()
  double interval_s = 0;  // since the previous line
  Meter::Totals total;
  Meter::Totals delta;  // over the interval
};

// Formats one progress line (without the newline).
using ProgressFormat = std::function<std::string(const ProgressSample&)>;

// Prints one line on stderr every interval while a run lasts, from a thread of its own.
// start() and stop() from one thread.
class Progress {
 public:
  // Prints nothing when `quiet`.
  Progress(const Meter& meter, std::chrono::duration<double> interval, ProgressFormat format,
           bool quiet);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts the clock and the printing thread.
  void start();
  // Stops printing (the partial last interval is not printed); idempotent.
  void stop();

  // "[  2.0 s] <rate> <unit>/s (total N), errors E": the default line for one counter.
  static ProgressFormat rate_line(std::string unit);

 private:
  void loop();
  const Meter& meter_;
  std::chrono::duration<double> interval_;
  ProgressFormat format_;
  bool quiet_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tern::bench
