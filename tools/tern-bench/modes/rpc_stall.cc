// tern-bench rpc --stream --stall: the clients that never read, the clock that holds their full
// streams, and the report of what they held (rpc_stall.h).
#include "modes/rpc_stall.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "benchmark_message.tern.h"
#include "soak/soak_stats.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace tern::bench::rpc_mode {

namespace {

// How often a --stall client looks whether its stream is full.
constexpr auto kFullPoll = std::chrono::milliseconds(5);

}  // namespace

// The server's RSS in KiB, or 0 when there is no --server-pid or it cannot be read.
std::uint64_t server_rss_kib(const Run& run) {
  if (run.o.net.server_pid <= 0) return 0;
  Result<std::uint64_t> kib = read_rss_kib(run.o.net.server_pid);
  return kib ? *kib : 0;
}

// Client i with --stall: one Pump stream whose writer sends until the stall is over and whose
// answers are never read. The stream is full once the server's writer parked (the answers
// buffered reach the window) and this writer parked too (no write and no new wait over a poll),
// and the server has read all it sent: a Say call on the same connection is answered after the
// server read every frame before it. Then it waits for the end of the stall, notes what the
// stream held and cancels it.
void run_stall(Run& run, std::size_t i, ChannelSlot& slot, const BenchmarkMessage& request) {
  const std::size_t worker = this_worker::index();
  StallStream& mine = run.stalls[i];
  BenchmarkServiceClient client(*slot.channel);
  rpc::ClientContext context;
  context.set_deadline(deadline_after(seconds(run.o.timeout_s)));
  rpc::ClientReaderWriter<BenchmarkMessage, BenchmarkMessage> stream = client.Pump(context);
  bool over = false;
  rpc::Status write_failure;
  Fiber writer = spawn(
      [&] {
        while (!over) {
          write_failure = stream.write(request);
          if (!write_failure.ok()) return;
          mine.sent.fetch_add(1, std::memory_order_relaxed);
        }
      },
      {.name = "rpc-stall-writer"});
  std::uint64_t sent = ~std::uint64_t{0};
  std::uint64_t waits = 0;
  while (!run.stall_over.is_set() && write_failure.ok()) {
    if (!this_fiber::sleep_for(kFullPoll)) break;
    const std::uint64_t sent_now = mine.sent.load(std::memory_order_relaxed);
    const std::uint64_t waits_now = stream.stream().write_waits();
    if (stream.stream().buffered_bytes() >= run.o.stream_window && waits_now > 0 &&
        sent_now == sent && waits_now == waits)
      break;
    sent = sent_now;
    waits = waits_now;
  }
  if (write_failure.ok() && !run.stall_over.is_set()) {
    BenchmarkMessage reply;
    rpc::ClientContext call;
    call.set_deadline(deadline_after(seconds(run.o.timeout_s)));
    if (rpc::Status status = client.Say(call, request, reply); !status.ok())
      run.failures[worker].add(i, "the call after the full stream: " + status.to_string());
  }
  if (run.filling.fetch_sub(1, std::memory_order_acq_rel) == 1) run.all_full.set();
  (void)run.stall_over.wait();
  over = true;
  mine.write_waits = stream.stream().write_waits();
  mine.buffered_bytes = stream.stream().buffered_bytes();
  mine.peak_buffered_bytes = stream.stream().peak_buffered_bytes();
  if (!write_failure.ok()) {
    mine.failed = true;
    run.failures[worker].add(i, "stream failed during the stall: " + write_failure.to_string());
  }
  stream.cancel();
  writer.join();
}

// --stall's clock: once every stream is full (or the streams' deadline, less the stall, has
// passed) reads the server's RSS, then again --stall seconds later, and ends the stall.
void time_stall(Run& run) {
  run.rss.all_full =
      run.all_full.wait_until(run.start + seconds(run.o.timeout_s - run.o.stall_s)).has_value();
  run.rss.fill_s = seconds_between(run.start, Clock::now());
  run.rss.full = server_rss_kib(run);
  for (const StallStream& s : run.stalls)
    run.rss.sent_full += s.sent.load(std::memory_order_relaxed);
  (void)this_fiber::sleep_for(seconds(run.o.stall_s));
  run.rss.end = server_rss_kib(run);
  run.stall_over.set();
}

// --stall's figures: per stream (its peak of unread answers against the window, the answers the
// server wrote before its writer parked, the messages it holds unanswered) and the server's RSS
// growth over each half of the stall. The check: no stream buffered more than the window plus
// one answer.
bool report_stall(const Run& run, std::size_t answer_bytes, Report& report) {
  const RpcOptions& o = run.o;
  std::size_t peak_max = 0;
  std::size_t peak_sum = 0;
  std::uint64_t answers_min = ~std::uint64_t{0};
  std::uint64_t answers_max = 0;
  std::uint64_t ahead_max = 0;  // messages sent and not answered, the most of one stream
  std::uint64_t sent = 0;
  std::uint64_t waits = 0;
  std::size_t failed = 0;
  for (const StallStream& s : run.stalls) {
    const std::uint64_t answers = answer_bytes > 0 ? s.buffered_bytes / answer_bytes : 0;
    const std::uint64_t mine = s.sent.load(std::memory_order_relaxed);
    peak_max = std::max(peak_max, s.peak_buffered_bytes);
    peak_sum += s.peak_buffered_bytes;
    answers_min = std::min(answers_min, answers);
    answers_max = std::max(answers_max, answers);
    ahead_max = std::max(ahead_max, mine > answers ? mine - answers : 0);
    sent += mine;
    waits += s.write_waits;
    failed += s.failed ? 1 : 0;
  }
  const std::size_t streams = run.stalls.size();
  const StallRss& rss = run.rss;
  const bool measured_rss = rss.before > 0 && rss.full > 0 && rss.end > 0;
  const auto growth = [](std::uint64_t from, std::uint64_t to) {
    return static_cast<std::int64_t>(to) - static_cast<std::int64_t>(from);
  };
  report.params["stall_s"] = o.stall_s;
  report.params["stream_window"] = o.stream_window;
  report.figures["streams"] = streams;
  report.figures["window_bytes"] = o.stream_window;
  report.figures["answer_bytes"] = answer_bytes;
  report.figures["peak_buffered_bytes_max"] = peak_max;
  report.figures["peak_buffered_bytes_mean"] =
      round_to(static_cast<double>(peak_sum) / static_cast<double>(streams), 1);
  report.figures["answers_before_park_min"] = answers_min;
  report.figures["answers_before_park_max"] = answers_max;
  report.figures["unanswered_bytes_max"] = ahead_max * run.message_bytes;
  report.figures["all_full"] = rss.all_full;
  report.figures["fill_s"] = round_to(rss.fill_s, 3);
  report.figures["messages_sent"] = sent;
  report.figures["messages_sent_after_full"] = sent - rss.sent_full;
  report.figures["write_waits"] = waits;
  report.figures["failed_streams"] = failed;
  const bool within = peak_max <= o.stream_window + answer_bytes;
  report.figures["within_window"] = within;
  if (measured_rss) {
    report.figures["server_rss_before_kib"] = rss.before;
    report.figures["server_rss_end_kib"] = rss.end;
    report.figures["server_rss_full_kib"] = rss.full;
    report.figures["server_rss_growth_kib"] = growth(rss.before, rss.end);
    report.figures["server_rss_after_full_kib"] = growth(rss.full, rss.end);
    report.figures["server_rss_growth_per_stream_kib"] = round_to(
        static_cast<double>(growth(rss.before, rss.end)) / static_cast<double>(streams), 1);
  } else {
    report.notes.push_back(
        "the server's RSS was not measured (no --server-pid, or its "
        "/proc/PID/status could not be read)");
  }
  report.summary.push_back(fmt::format(
      "{} stream(s) to BenchmarkService/Pump that read nothing, window {} bytes: {} after "
      "{:.3f} s, then held {:.2f} s; each buffered at most {} bytes of answers ({} to {} "
      "answers before the server's writer parked); at most {} bytes sent and not answered; {} "
      "messages sent, {} after the streams were full",
      streams, o.stream_window, rss.all_full ? "all full" : "NOT all full", rss.fill_s, o.stall_s,
      peak_max, answers_min, answers_max, ahead_max * run.message_bytes, sent,
      sent - rss.sent_full));
  if (measured_rss) {
    report.summary.push_back(fmt::format(
        "server RSS {} KiB before the streams, {} KiB once full, {} KiB at the end: {:+} KiB "
        "({:.1f} KiB per stream), {:+} KiB after the streams were full",
        rss.before, rss.full, rss.end, growth(rss.before, rss.end),
        static_cast<double>(growth(rss.before, rss.end)) / static_cast<double>(streams),
        growth(rss.full, rss.end)));
  }
  if (!rss.all_full)
    report.notes.push_back(fmt::format(
        "not every stream was full (both writers parked) {:.1f} s after the start: the figures "
        "after full are from then",
        rss.fill_s));
  if (!within)
    report.add_error(
        fmt::format("a stream buffered {} bytes: more than its window ({}) plus "
                    "one answer ({})",
                    peak_max, o.stream_window, answer_bytes));
  return within && failed == 0;
}

}  // namespace tern::bench::rpc_mode
