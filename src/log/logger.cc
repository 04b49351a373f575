// The logger's state and the paths off the inlined fast path: configuration, per-thread rings,
// full rings (block or drop), caller-formatted records and synchronous writes.
#include "logger.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <exception>
#include <new>

#include "acquire_within.h"
#include "futex.h"
#include "line.h"
#include "tern/log/log.h"
#include "tern/log/peer_log.h"
#include "tsc_clock.h"
#include "writer.h"

namespace tern::log::detail {

namespace {

constexpr std::size_t kMinBufferBytes = 16 * 1024;
constexpr std::size_t kMaxBufferBytes = std::size_t{1} << 30;
// Spins on a full ring before sleeping: the writer usually frees room within microseconds.
constexpr unsigned kBlockedSpins = 256;
constexpr auto kBlockedSleep = std::chrono::milliseconds(10);
// The writer napping between passes is woken only once a ring is this full (1/kNapWakeShare).
constexpr std::uint64_t kNapWakeShare = 4;
constexpr auto kFatalFlushTimeout = std::chrono::seconds(10);
// How long a peer line waits for the sink lock in synchronous mode before it is dropped.
constexpr std::uint64_t kPeerLineLockWaitNs = 1'000'000;

std::atomic<Logger*> instance{nullptr};

constinit thread_local bool thread_exiting = false;
constinit thread_local pid_t cached_tid = 0;
constinit thread_local DateCache thread_date{};

// Whether this thread may add to the prof counters: 0 not yet known, 1 yes, 2 no longer (its
// prof cells may be gone). The guard is created after the thread's prof cells, so it is
// destroyed before them at thread exit.
constinit thread_local std::uint8_t counter_state = 0;
struct CounterGuard {
  bool armed = false;
  ~CounterGuard() { counter_state = 2; }
};
thread_local CounterGuard counter_guard;

void count_written_here(Logger& logger) noexcept {
  logger.written_total.fetch_add(1, std::memory_order_relaxed);
  if (counter_state == 0 && !thread_exiting) {
    logger.written_counter.add(0);
    counter_guard.armed = true;
    counter_state = 1;
  }
  if (counter_state == 1) logger.written_counter.add(1);
}

void on_thread_exit(void* value) {
  auto* ring = static_cast<Ring*>(value);
  thread_ring = nullptr;
  thread_exiting = true;
  ring->retired.store(true, std::memory_order_release);
}

std::size_t round_buffer(std::size_t bytes) {
  return std::bit_ceil(std::clamp(bytes, kMinBufferBytes, kMaxBufferBytes));
}

std::size_t thread_context(char* out, std::size_t capacity, std::string_view* text) noexcept {
  if (ContextProvider provider = shared.provider.load(std::memory_order_relaxed)) {
    const std::size_t size = provider(out, capacity);
    if (size != 0) {
      *text = std::string_view(out, size);
      return size;
    }
  }
  out[0] = 't';
  const fmt::format_int id(current_tid());
  const std::size_t size = std::min(capacity - 1, id.size());
  std::copy_n(id.data(), size, out + 1);
  *text = std::string_view(out, size + 1);
  return 0;
}

}  // namespace

pid_t current_tid() noexcept {
  if (cached_tid == 0) cached_tid = static_cast<pid_t>(::syscall(SYS_gettid));
  return cached_tid;
}

Ring::Ring(std::size_t capacity, pid_t tid) {
  data = static_cast<char*>(::operator new(capacity, std::align_val_t{64}, std::nothrow));
  mask = capacity - 1;
  limit = capacity;
  thread_text[0] = 't';
  const fmt::format_int id(tid);
  std::copy_n(id.data(), id.size(), thread_text + 1);
  thread_text_size = id.size() + 1;
}

Ring::~Ring() {
  if (data != nullptr) ::operator delete(data, std::align_val_t{64});
}

Logger::Logger() {
  sinks.push_back(std::make_shared<StderrSink>());
  ::pthread_key_create(&exit_key_, &on_thread_exit);
  ::pthread_atfork(nullptr, nullptr, [] {
    if (Logger* logger = existing()) logger->reset_after_fork();
  });
}

Logger& Logger::get() noexcept {
  static Logger* const logger = [] {
    auto* created = new Logger;  // never destroyed: threads may log while the process exits
    instance.store(created, std::memory_order_release);
    return created;
  }();
  return *logger;
}

Logger* Logger::existing() noexcept { return instance.load(std::memory_order_acquire); }

namespace {
// Built at start-up rather than by the first call, which may come when the process is out of
// file descriptors or memory (the network layer logs exactly then).
[[maybe_unused]] const bool logger_built = (Logger::get(), true);
}  // namespace

Result<void> Logger::init(Options options) {
  std::vector<std::shared_ptr<Sink>> new_sinks = std::move(options.sinks);
  std::erase(new_sinks, nullptr);
  if (!options.file.path.empty()) {
    Result<std::shared_ptr<FileSink>> file = FileSink::open(std::move(options.file));
    if (!file) return std::unexpected(file.error());
    new_sinks.push_back(std::move(*file));
  }
  if (new_sinks.empty()) new_sinks.push_back(std::make_shared<StderrSink>());

  std::lock_guard control(control_);
  stop_writer();
  {
    std::lock_guard lock(sink_mutex);
    flush_sinks();
    sinks = std::move(new_sinks);
  }
  policy.store(options.policy, std::memory_order_relaxed);
  shared.level.store(static_cast<std::uint8_t>(options.level), std::memory_order_relaxed);
  buffer_bytes.store(round_buffer(options.buffer_bytes), std::memory_order_relaxed);
  if (!options.synchronous) {
    if (TscClock::usable()) shared.tsc.store(true, std::memory_order_relaxed);
    writer_ = std::make_unique<Writer>(*this);
    mode.store(Mode::asynchronous, std::memory_order_seq_cst);
  }
  shared.generation.fetch_add(1, std::memory_order_seq_cst);
  if (!atexit_registered_) {
    atexit_registered_ = true;
    std::atexit([] { Logger::get().shutdown(); });
  }
  return {};
}

void Logger::stop_writer() {
  if (mode.load(std::memory_order_relaxed) == Mode::asynchronous) {
    mode.store(Mode::synchronous, std::memory_order_seq_cst);
    shared.generation.fetch_add(1, std::memory_order_seq_cst);
  }
  writer_.reset();  // drains every ring, flushes the sinks, joins
}

void Logger::shutdown() {
  std::lock_guard control(control_);
  stop_writer();
  {
    std::lock_guard lock(sink_mutex);
    flush_sinks();
    sinks.clear();
    sinks.push_back(std::make_shared<StderrSink>());
  }
  policy.store(Policy::block, std::memory_order_relaxed);
  shared.level.store(TERN_LOG_LEVEL_INFO, std::memory_order_relaxed);
  shared.generation.fetch_add(1, std::memory_order_seq_cst);
}

void Logger::flush() { flush_until(std::chrono::steady_clock::time_point::max()); }

bool Logger::flush_until(std::chrono::steady_clock::time_point deadline) {
  if (writer_tid.load(std::memory_order_relaxed) == current_tid()) return false;
  std::unique_lock control(control_, std::defer_lock);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    control.lock();
  } else if (!control.try_lock_until(deadline)) {
    return false;
  }
  if (writer_) return writer_->flush_until(deadline);
  std::lock_guard lock(sink_mutex);
  flush_sinks();
  return true;
}

Ring* Logger::thread_ring_for_now() noexcept {
  if (thread_exiting) return nullptr;
  const std::uint32_t generation = shared.generation.load(std::memory_order_seq_cst);
  if (mode.load(std::memory_order_seq_cst) != Mode::asynchronous) return nullptr;
  auto* ring = static_cast<Ring*>(thread_ring);
  const std::size_t capacity = buffer_bytes.load(std::memory_order_relaxed);
  if (ring != nullptr && ring->capacity() != capacity) {
    thread_ring = nullptr;  // the writer frees it once drained
    ring->retired.store(true, std::memory_order_release);
    ring = nullptr;
  }
  if (ring == nullptr) {
    ring = new (std::nothrow) Ring(capacity, current_tid());
    if (ring == nullptr || ring->data == nullptr) {
      delete ring;
      return nullptr;
    }
    Ring* first = rings.load(std::memory_order_relaxed);
    do {
      ring->next = first;
    } while (!rings.compare_exchange_weak(first, ring, std::memory_order_release,
                                          std::memory_order_relaxed));
    ::pthread_setspecific(exit_key_, ring);
    thread_ring = ring;
  }
  ring->generation = generation;
  return ring;
}

void Logger::unlink(Ring* previous, Ring* ring) noexcept {
  if (previous == nullptr) {
    Ring* expected = ring;
    if (rings.compare_exchange_strong(expected, ring->next, std::memory_order_acq_rel)) return;
    previous = rings.load(std::memory_order_acquire);  // rings were pushed in front of it
    while (previous->next != ring) previous = previous->next;
  }
  previous->next = ring->next;
}

bool Logger::try_lock_consumer(pid_t self) noexcept {
  pid_t expected = 0;
  return consumer.compare_exchange_strong(expected, self, std::memory_order_acquire,
                                          std::memory_order_relaxed);
}

void Logger::write_to_sinks(std::string_view bytes) noexcept {
  for (const std::shared_ptr<Sink>& sink : sinks) {
    try {
      sink->write(bytes);
    } catch (...) {
      // A sink that throws loses this batch; the others still get it.
    }
  }
}

bool Logger::try_write_to_sinks(std::string_view bytes) noexcept {
  bool all = true;
  for (const std::shared_ptr<Sink>& sink : sinks) {
    try {
      all = sink->try_write(bytes) && all;
    } catch (...) {
      all = false;
    }
  }
  return all;
}

void Logger::flush_sinks() noexcept {
  for (const std::shared_ptr<Sink>& sink : sinks) {
    try {
      sink->flush();
    } catch (...) {
    }
  }
}

void Logger::write_line(const Site& site, std::uint64_t ns, std::string_view context,
                        std::string_view message, bool truncated) noexcept {
  try {
    fmt::memory_buffer line;
    append_prefix(line, thread_date, ns, site, context);
    const std::size_t start = line.size();
    line.append(message.data(), message.data() + message.size());
    finish_line(line, start, truncated);
    if (peer_line) {
      // A peer line never waits for long: a line being written by another thread holds the lock
      // for microseconds, a writer stuck on a full pipe holds it indefinitely; nor does it wait for
      // a sink that cannot take it now.
      std::unique_lock lock(sink_mutex, std::defer_lock);
      if (!acquire_within(kPeerLineLockWaitNs, [&] { return lock.try_lock(); }) ||
          !try_write_to_sinks(std::string_view(line.data(), line.size()))) {
        dropped_total.fetch_add(1, std::memory_order_relaxed);
        dropped_counter.add(1);
        return;
      }
    } else {
      std::lock_guard lock(sink_mutex);
      write_to_sinks(std::string_view(line.data(), line.size()));
    }
  } catch (...) {
    return;  // out of memory: the line is lost
  }
  count_written_here(*this);
}

void Logger::wake_writer() noexcept {
  if (writer_state.state.load(std::memory_order_seq_cst) != 0 &&
      writer_state.state.exchange(0, std::memory_order_seq_cst) != 0)
    futex_wake(writer_state.state, 1);
}

void Logger::space_freed() noexcept {
  // The writer stored the ring's head seq_cst; a waiting producer counts itself in `blocked`
  // before it reads the head (seq_cst): one of the two sees the other.
  if (blocked.load(std::memory_order_seq_cst) == 0) return;
  space_epoch.fetch_add(1, std::memory_order_release);
  futex_wake(space_epoch, INT32_MAX);
}

void Logger::reset_after_fork() noexcept {
  // Only the forking thread exists in the child: the writer is gone and any lock it held stays
  // held. Start over synchronously; the parent writes the records its rings hold.
  new (&sink_mutex) std::mutex;
  new (&control_) std::timed_mutex;
  (void)writer_.release();
  consumer.store(0, std::memory_order_relaxed);
  writer_tid.store(0, std::memory_order_relaxed);
  blocked.store(0, std::memory_order_relaxed);
  writer_state.state.store(0, std::memory_order_relaxed);
  for (Ring* ring = rings.load(std::memory_order_acquire); ring != nullptr; ring = ring->next)
    ring->head.store(ring->published.load(std::memory_order_relaxed), std::memory_order_relaxed);
  mode.store(Mode::synchronous, std::memory_order_relaxed);
  shared.generation.fetch_add(1, std::memory_order_seq_cst);
}

Reserved reserve_slow(RingProducer* producer, std::size_t size) noexcept {
  auto& ring = static_cast<Ring&>(*producer);
  const std::uint64_t capacity = ring.capacity();
  Logger& logger = Logger::get();
  for (unsigned attempt = 0;; ++attempt) {
    const std::uint64_t head = ring.head.load(std::memory_order_acquire);
    ring.limit = head + capacity;
    const std::uint64_t offset = ring.tail & ring.mask;
    const std::uint64_t to_end = capacity - offset;
    const std::uint64_t needed = size <= to_end ? size : to_end + size;
    if (ring.tail + needed <= ring.limit) {
      if (size > to_end) {
        // Only `size` and `kind` of a filler exist: as little as 8 bytes may be left.
        write_filler(ring.data + offset, to_end);
        ring.tail += to_end;  // published together with the record
      }
      return {ring.data + (ring.tail & ring.mask), false};
    }
    if (ring.generation != shared.generation.load(std::memory_order_relaxed))
      return {nullptr, false};
    if (peer_line || logger.policy.load(std::memory_order_relaxed) == Policy::drop) {
      logger.dropped_total.fetch_add(1, std::memory_order_relaxed);
      logger.wake_writer();
      return {nullptr, true};
    }
    logger.wake_writer();
    if (attempt < kBlockedSpins) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
      continue;
    }
    logger.blocked.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t epoch = logger.space_epoch.load(std::memory_order_acquire);
    if (ring.head.load(std::memory_order_seq_cst) == head)
      futex_wait(logger.space_epoch, epoch, kBlockedSleep);
    logger.blocked.fetch_sub(1, std::memory_order_relaxed);
  }
}

void writer_idle(RingProducer* producer) noexcept {
  auto& ring = static_cast<Ring&>(*producer);
  const std::uint32_t state = writer_state.state.load(std::memory_order_relaxed);
  if (state == 1) {
    // The fill level as last seen (it only overestimates); the writer's head, a cache line the
    // writer keeps writing, is read again only when that estimate crosses the threshold.
    const std::uint64_t share = ring.capacity() / kNapWakeShare;
    if (ring.tail + ring.capacity() - ring.limit < share) return;
    ring.limit = ring.head.load(std::memory_order_acquire) + ring.capacity();
    if (ring.tail + ring.capacity() - ring.limit < share) return;
  }
  Logger::get().wake_writer();
}

void emit_formatted(const Site& site, fmt::string_view format, fmt::format_args args) noexcept {
  Logger& logger = Logger::get();
  // The message, cut to kMaxMessageBytes; a few bytes more to find a UTF-8 boundary.
  constexpr std::size_t kScratch = kMaxMessageBytes + 4;
  static constinit thread_local char scratch[kScratch];
  std::size_t length = 0;
  bool truncated = false;
  try {
    const auto result = fmt::vformat_to_n(scratch, kScratch, format, args);
    length = std::min(result.size, kScratch);
    truncated = result.size > kMaxMessageBytes;
  } catch (const std::exception& e) {
    const auto result = fmt::format_to_n(scratch, kScratch, "[log format error: {}] {}", e.what(),
                                         std::string_view(format.data(), format.size()));
    length = std::min(result.size, kScratch);
    truncated = result.size > kMaxMessageBytes;
  }
  if (truncated) length = utf8_cut(std::string_view(scratch, length), kMaxMessageBytes);
  const std::string_view message(scratch, length);

  char context[kMaxContextBytes];
  std::string_view context_text;
  const std::size_t context_size = thread_context(context, sizeof context, &context_text);

  if (Ring* ring = logger.thread_ring_for_now()) {
    const std::uint64_t when = stamp();
    const std::size_t size =
        (sizeof(RecordHeader) + context_size + 4 + length + 7) & ~std::size_t{7};
    const Reserved space = reserve(ring, size);
    if (space.at != nullptr) {
      ::new (static_cast<void*>(space.at)) RecordHeader{static_cast<std::uint32_t>(size),
                                                        RecordKind::text,
                                                        static_cast<std::uint8_t>(context_size),
                                                        truncated,
                                                        0,
                                                        &site,
                                                        nullptr,
                                                        when};
      char* at = space.at + sizeof(RecordHeader);
      std::memcpy(at, context, context_size);
      StringCodec::put_bytes(at + context_size, message.data(), message.size());
      commit(ring, size);
      return;
    }
    if (space.dropped) return;
  }
  logger.write_line(site, TscClock::realtime_ns(), context_text, message, truncated);
}

void fatal_exit() noexcept {
  if (Logger* logger = Logger::existing())
    logger->flush_until(std::chrono::steady_clock::now() + kFatalFlushTimeout);
  std::abort();
}

}  // namespace tern::log::detail

namespace tern::log {

Result<void> init(Options options) { return detail::Logger::get().init(std::move(options)); }

void shutdown() { detail::Logger::get().shutdown(); }

void flush() { detail::Logger::get().flush(); }

void set_level(Level level) noexcept {
  detail::shared.level.store(static_cast<std::uint8_t>(level), std::memory_order_relaxed);
}

Level level() noexcept {
  return static_cast<Level>(detail::shared.level.load(std::memory_order_relaxed));
}

std::uint64_t dropped() noexcept {
  return detail::Logger::get().dropped_total.load(std::memory_order_relaxed);
}

std::uint64_t written() noexcept {
  return detail::Logger::get().written_total.load(std::memory_order_relaxed);
}

void set_context_provider(ContextProvider provider) noexcept {
  detail::shared.provider.store(provider, std::memory_order_relaxed);
}

}  // namespace tern::log
