// Flushing what the rings hold when the process crashes.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "acquire_within.h"
#include "line.h"
#include "logger.h"
#include "tern/log/log.h"
#include "tsc_clock.h"
#include "writer.h"

namespace tern::log {

namespace {

constexpr int kCrashSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
// How long the crash path waits for the writer to finish its pass, or for the sink lock.
constexpr std::uint64_t kLockWaitNs = 500'000'000;
// The line buffer is reserved up front: a crashing process may not be able to allocate.
constexpr std::size_t kCrashLineBytes = 64 * 1024;

struct sigaction previous_actions[std::size(kCrashSignals)];
std::atomic<bool> flushing{false};
std::atomic<int> crashes{0};

fmt::memory_buffer& crash_line() {
  static fmt::memory_buffer* line = [] {
    auto* buffer = new fmt::memory_buffer;
    buffer->reserve(kCrashLineBytes);
    return buffer;
  }();
  return *line;
}

void drain_for_crash(detail::Logger& logger, fmt::memory_buffer& line) {
  detail::DateCache date;
  for (detail::Ring* ring = logger.rings.load(std::memory_order_acquire); ring != nullptr;
       ring = ring->next) {
    std::uint64_t head = ring->head.load(std::memory_order_relaxed);
    const std::uint64_t end = ring->published.load(std::memory_order_acquire);
    while (head < end) {
      const char* at = ring->data + (head & ring->mask);
      detail::RecordHeader header;
      if (detail::read_header(at, &header)) {
        line.clear();
        detail::format_record(line, date, *ring, header, at + sizeof header);
        logger.write_to_sinks(std::string_view(line.data(), line.size()));
      }
      head += header.size;
    }
    ring->head.store(head, std::memory_order_release);
  }
}

void on_crash(int signal, siginfo_t* info, void*) {
  if (crashes.fetch_add(1, std::memory_order_relaxed) == 0) emergency_flush();
  for (std::size_t i = 0; i < std::size(kCrashSignals); ++i)
    if (kCrashSignals[i] == signal) ::sigaction(signal, &previous_actions[i], nullptr);
  // A fault repeats when the instruction runs again; a sent or raised signal must be re-sent.
  if (signal == SIGABRT || info == nullptr || info->si_code <= 0) ::raise(signal);
}

}  // namespace

void emergency_flush() noexcept {
  detail::Logger* logger = detail::Logger::existing();
  if (logger == nullptr || flushing.exchange(true, std::memory_order_acquire)) return;
  const pid_t self = detail::current_tid();
  if (logger->consumer.load(std::memory_order_relaxed) != self &&
      detail::acquire_within(kLockWaitNs, [&] { return logger->try_lock_consumer(self); })) {
    if (detail::acquire_within(kLockWaitNs, [&] { return logger->sink_mutex.try_lock(); })) {
      try {
        drain_for_crash(*logger, crash_line());
        logger->flush_sinks();
      } catch (...) {
      }
      logger->sink_mutex.unlock();
    }
    logger->unlock_consumer();
  }
  flushing.store(false, std::memory_order_release);
}

void install_crash_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    detail::Logger::get();
    crash_line();
    struct sigaction action = {};
    action.sa_sigaction = &on_crash;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    for (std::size_t i = 0; i < std::size(kCrashSignals); ++i)
      ::sigaction(kCrashSignals[i], &action, &previous_actions[i]);
  });
}

}  // namespace tern::log
