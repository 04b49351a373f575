#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "ring.h"
#include "tern/log/options.h"
#include "tern/log/sink.h"
#include "tern/prof/counter.h"

namespace tern::log::detail {

class Writer;

enum class Mode : std::uint8_t { synchronous, asynchronous };

// The process's logger: configuration, sinks, the list of rings and the writer. Created on first
// use and never destroyed (threads may log while the process exits).
class Logger {
 public:
  static Logger& get() noexcept;
  // The logger if anything created it yet (the crash path must not construct it).
  static Logger* existing() noexcept;

  Result<void> init(Options options);
  void shutdown();
  void flush();
  // flush() that gives up at the deadline (FATAL). True if everything was written.
  bool flush_until(std::chrono::steady_clock::time_point deadline);

  // The calling thread's ring for the current configuration, or nullptr when the logger is
  // synchronous or the thread is exiting.
  Ring* thread_ring_for_now() noexcept;
  // Formats a line on the calling thread and writes it to the sinks under the sink lock.
  void write_line(const Site& site, std::uint64_t ns, std::string_view context,
                  std::string_view message, bool truncated) noexcept;
  // Wakes the writer if it naps or sleeps. Any thread.
  void wake_writer() noexcept;
  // The writer gave back space in some ring: wakes producers waiting for room.
  void space_freed() noexcept;

  // Writes bytes to every sink; the caller holds sink_mutex.
  void write_to_sinks(std::string_view bytes) noexcept;
  // Writes bytes to every sink that can take them without waiting (Sink::try_write); false if
  // some sink could not. The caller holds sink_mutex.
  bool try_write_to_sinks(std::string_view bytes) noexcept;
  void flush_sinks() noexcept;

  // Rings, newest first: producers push, only the holder of the consumer lock unlinks.
  std::atomic<Ring*> rings{nullptr};
  // Unlinks ring (consumer lock held); `previous` is its predecessor as the caller saw it.
  void unlink(Ring* previous, Ring* ring) noexcept;

  // The consumer lock: the writer holds it for each pass, the crash path to drain the rings.
  // 0 when free, else the owner's thread id.
  std::atomic<pid_t> consumer{0};
  bool try_lock_consumer(pid_t self) noexcept;
  void unlock_consumer() noexcept { consumer.store(0, std::memory_order_release); }

  std::mutex sink_mutex;
  std::vector<std::shared_ptr<Sink>> sinks;  // guarded by sink_mutex

  std::atomic<Mode> mode{Mode::synchronous};
  std::atomic<Policy> policy{Policy::block};
  std::atomic<std::size_t> buffer_bytes{1 << 20};
  std::atomic<std::uint32_t> blocked{0};      // producers waiting for room
  std::atomic<std::uint32_t> space_epoch{0};  // bumped when room appears while some wait
  std::atomic<std::uint64_t> dropped_total{0};
  std::atomic<std::uint64_t> written_total{0};
  std::atomic<pid_t> writer_tid{0};

  prof::Counter written_counter{"log.written"};
  prof::Counter dropped_counter{"log.dropped"};

 private:
  Logger();
  void stop_writer();
  void reset_after_fork() noexcept;

  std::timed_mutex control_;  // init, shutdown, flush
  std::unique_ptr<Writer> writer_;
  pthread_key_t exit_key_{};
  bool atexit_registered_ = false;
};

// The calling thread's id (cached).
pid_t current_tid() noexcept;

}  // namespace tern::log::detail
