// The background writer: drains every thread's ring into one batch and writes it to the sinks.
#include "writer.h"

#include <pthread.h>
#include <signal.h>

#include <iterator>

#include "futex.h"
#include "logger.h"
#include "tern/base/detail/sys_calls.h"
#include "tern/base/signal_mask.h"

namespace tern::log::detail {

namespace {

// The batch goes to the sinks once it holds this much (and at the end of every pass).
constexpr std::size_t kBatchBytes = 256 * 1024;
// Passes that found nothing before the writer sleeps until woken, and its naps until then.
constexpr unsigned kNapPasses = 10;
constexpr auto kNap = std::chrono::milliseconds(1);
// A wake-up can be missed (producers publish without a fence): sleep no longer than this.
constexpr auto kSleep = std::chrono::milliseconds(50);
// After a pass that took less than this from the rings, the writer pauses for kCatchUp before
// the next one. Draining right behind a producer would read the cache lines it is still writing
// (and its published tail after every record), moving each line between the two cores.
constexpr std::uint64_t kSmallPassBytes = 16 * 1024;
constexpr auto kCatchUp = std::chrono::microseconds(50);

constexpr Site kDroppedSite{Level::warn, __LINE__, base_name(__FILE__), "{} messages dropped"};
constexpr std::string_view kWriterContext = "tern-log";

}  // namespace

TscClock& tsc_clock() noexcept {
  static TscClock clock;
  return clock;
}

void format_record(fmt::memory_buffer& out, DateCache& date, Ring& ring, const RecordHeader& header,
                   const char* body) {
  std::uint64_t ns = tsc_clock().to_ns(header.stamp);
  if (ns < ring.last_ns) ns = ring.last_ns;
  ring.last_ns = ns;
  const std::string_view context = header.context_size != 0
                                       ? std::string_view(body, header.context_size)
                                       : std::string_view(ring.thread_text, ring.thread_text_size);
  const char* payload = body + header.context_size;
  append_prefix(out, date, ns, *header.site, context);
  const std::size_t start = out.size();
  if (header.kind == RecordKind::deferred) {
    Output output{out};
    header.decode(payload, *header.site, output);
    finish_line(out, start, false);
  } else {
    const std::string_view text = StringCodec::get(payload);
    out.append(text.data(), text.data() + text.size());
    finish_line(out, start, header.truncated != 0);
  }
}

Writer::Writer(Logger& logger) : logger_(logger) {
  batch_.reserve(kBatchBytes + 64 * 1024);
  drops_reported_ = logger_.dropped_total.load(std::memory_order_relaxed);
  const ProcessSignalsBlocked blocked;  // the writer inherits the mask
  thread_ = std::thread([this] { run(); });
}

Writer::~Writer() {
  stop_.store(true, std::memory_order_seq_cst);
  logger_.wake_writer();
  thread_.join();
}

bool Writer::flush_until(std::chrono::steady_clock::time_point deadline) {
  const std::uint64_t ticket = flush_requested_.fetch_add(1, std::memory_order_seq_cst) + 1;
  logger_.wake_writer();
  std::unique_lock lock(flush_mutex_);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    flush_cv_.wait(lock, [&] { return flush_done_ >= ticket; });
    return true;
  }
  return flush_cv_.wait_until(lock, deadline, [&] { return flush_done_ >= ticket; });
}

void Writer::run() {
  ::pthread_setname_np(::pthread_self(), "tern-log");
  const pid_t self = current_tid();
  logger_.writer_tid.store(self, std::memory_order_relaxed);
  while (!logger_.try_lock_consumer(self))
    tern::detail::sleep_thread(std::chrono::nanoseconds(kNap).count());
  tsc_clock().calibrate();
  logger_.unlock_consumer();
  unsigned idle_passes = 0;
  for (;;) {
    const bool stopping = stop_.load(std::memory_order_seq_cst);
    const std::uint64_t requested = flush_requested_.load(std::memory_order_seq_cst);
    while (!logger_.try_lock_consumer(self))
      tern::detail::sleep_thread(std::chrono::nanoseconds(kNap).count());
    const Drained drained = drain(stopping || requested != flush_done_);
    report_drops();
    write_batch();
    tsc_clock().maybe_renew();
    logger_.unlock_consumer();
    finish_flushes(requested);
    if (drained.records > 0) {
      idle_passes = 0;
      if (drained.bytes < kSmallPassBytes && !stopping &&
          requested == flush_requested_.load(std::memory_order_relaxed)) {
        tern::detail::sleep_thread(std::chrono::nanoseconds(kCatchUp).count());
      }
      continue;
    }
    if (stopping) break;
    if (requested != flush_requested_.load(std::memory_order_relaxed)) continue;
    idle(idle_passes);
  }
  {
    std::lock_guard lock(logger_.sink_mutex);
    logger_.flush_sinks();
  }
  finish_flushes(flush_requested_.load(std::memory_order_seq_cst));
  logger_.space_freed();
  logger_.writer_tid.store(0, std::memory_order_relaxed);
}

Writer::Drained Writer::drain(bool to_the_end) {
  Drained total;
  Ring* previous = nullptr;
  Ring* ring = logger_.rings.load(std::memory_order_acquire);
  while (ring != nullptr) {
    Ring* next = ring->next;
    const bool retired = ring->retired.load(std::memory_order_acquire);
    const Drained one = drain_ring(*ring, to_the_end || retired);
    total.records += one.records;
    total.bytes += one.bytes;
    if (retired && ring->head.load(std::memory_order_relaxed) ==
                       ring->published.load(std::memory_order_acquire)) {
      logger_.unlink(previous, ring);
      delete ring;
    } else {
      previous = ring;
    }
    ring = next;
  }
  return total;
}

Writer::Drained Writer::drain_ring(Ring& ring, bool to_the_end) {
  std::uint64_t head = ring.head.load(std::memory_order_relaxed);
  const std::uint64_t first = head;
  const std::uint64_t end = ring.published.load(std::memory_order_acquire);
  if (head == end) return {};
  const std::uint64_t stop_at = to_the_end ? end : std::min(end, head + ring.capacity() / 4);
  std::size_t records = 0;
  while (head < stop_at) {
    const char* at = ring.data + (head & ring.mask);
    RecordHeader header;
    if (read_header(at, &header)) {
      format_record(batch_, date_, ring, header, at + sizeof header);
      ++records;
    }
    head += header.size;
    if (batch_.size() >= kBatchBytes) {
      ring.head.store(head, std::memory_order_seq_cst);
      logger_.space_freed();
      write_batch();
    }
  }
  ring.head.store(head, std::memory_order_seq_cst);
  logger_.space_freed();
  logger_.written_total.fetch_add(records, std::memory_order_relaxed);
  logger_.written_counter.add(records);
  return {records, head - first};
}

void Writer::write_batch() {
  if (batch_.size() == 0) return;
  {
    std::lock_guard lock(logger_.sink_mutex);
    logger_.write_to_sinks(std::string_view(batch_.data(), batch_.size()));
  }
  batch_.clear();
}

void Writer::report_drops() {
  const std::uint64_t dropped = logger_.dropped_total.load(std::memory_order_relaxed);
  if (dropped == drops_reported_) return;
  const std::uint64_t count = dropped - drops_reported_;
  drops_reported_ = dropped;
  logger_.dropped_counter.add(count);
  append_prefix(batch_, date_, TscClock::realtime_ns(), kDroppedSite, kWriterContext);
  fmt::format_to(std::back_inserter(batch_), "{} messages dropped", count);
  batch_.push_back('\n');
}

void Writer::finish_flushes(std::uint64_t requested) {
  {
    std::lock_guard lock(flush_mutex_);
    if (requested <= flush_done_) return;
  }
  {
    std::lock_guard lock(logger_.sink_mutex);
    logger_.flush_sinks();
  }
  {
    std::lock_guard lock(flush_mutex_);
    flush_done_ = requested;
  }
  flush_cv_.notify_all();
}

bool Writer::work_pending() noexcept {
  if (stop_.load(std::memory_order_seq_cst)) return true;
  if (flush_requested_.load(std::memory_order_seq_cst) != flush_done_) return true;
  if (logger_.dropped_total.load(std::memory_order_seq_cst) != drops_reported_) return true;
  for (Ring* ring = logger_.rings.load(std::memory_order_acquire); ring != nullptr;
       ring = ring->next) {
    if (ring->published.load(std::memory_order_seq_cst) !=
        ring->head.load(std::memory_order_relaxed))
      return true;
  }
  return false;
}

void Writer::idle(unsigned& idle_passes) noexcept {
  const bool nap = idle_passes < kNapPasses;
  if (nap) ++idle_passes;
  const std::uint32_t state = nap ? 1 : 2;
  writer_state.state.store(state, std::memory_order_seq_cst);
  if (!work_pending()) futex_wait(writer_state.state, state, nap ? kNap : kSleep);
  writer_state.state.store(0, std::memory_order_relaxed);
}

}  // namespace tern::log::detail
