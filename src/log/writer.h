#pragma once

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "line.h"
#include "ring.h"
#include "tsc_clock.h"

namespace tern::log::detail {

class Logger;

// The calibration every writer (and the crash path) converts stamps with; calibrated once per
// process. Used under the consumer lock.
TscClock& tsc_clock() noexcept;

// Appends the line of one record to out. Holder of the consumer lock.
void format_record(fmt::memory_buffer& out, DateCache& date, Ring& ring, const RecordHeader& header,
                   const char* body);

// The background thread of an asynchronous logger: takes records from every thread's ring in
// turn, formats them into one batch and writes the batch to the sinks; answers flush requests;
// logs "N messages dropped" for Policy::drop. Created and destroyed by Logger (init/shutdown).
class Writer {
 public:
  explicit Writer(Logger& logger);
  // Writes out everything the rings hold, flushes the sinks and joins the thread.
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Waits until every record published before the call is written and the sinks are flushed,
  // or until the deadline (then false). Any thread but the writer.
  bool flush_until(std::chrono::steady_clock::time_point deadline);

 private:
  void run();
  // What a pass over the rings took: records formatted and ring bytes freed.
  struct Drained {
    std::size_t records = 0;
    std::uint64_t bytes = 0;
  };
  Drained drain(bool to_the_end);
  Drained drain_ring(Ring& ring, bool to_the_end);
  void write_batch();
  void report_drops();
  void finish_flushes(std::uint64_t requested);
  bool work_pending() noexcept;
  void idle(unsigned& idle_passes) noexcept;

  Logger& logger_;
  fmt::memory_buffer batch_;
  DateCache date_;
  std::uint64_t drops_reported_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> flush_requested_{0};
  std::mutex flush_mutex_;
  std::condition_variable flush_cv_;
  std::uint64_t flush_done_ = 0;  // guarded by flush_mutex_
  std::thread thread_;
};

}  // namespace tern::log::detail
