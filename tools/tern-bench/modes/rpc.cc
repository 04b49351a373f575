// rpc: the RPC benchmark of report 001 (teleport/erpc vs rpcx; docs/benchmark-methods.md). -c
// clients, a fiber each, make -n calls in all to tern.bench.BenchmarkService/Say (N/C each, the
// remainder spread over the first clients), one call after another, with report 001's
// BenchmarkMessage (bench/proto/README.md). Each client has its own tern::rpc::Channel with one
// connection, or with --shared K the clients multiplex over K channels. Channels are opened on the
// worker of their clients and connected before the clock starts. Every reply is checked (field1
// "OK", field2 100, field3 untouched) and every call timed; TPS = verified calls / seconds from the
// start to the last reply. With --stream each client is one BenchmarkService/Pump stream instead:
// it sends its N/C messages without waiting for answers (the stream's flow-control window bounds
// what is in flight), and the rate is verified answers / seconds. With --stream --stall S the
// clients never read: each writes until its stream is full, the full streams are held S seconds,
// and the run reports what the streams held (StallStream, report_stall).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "benchmark_message.tern.h"
#include "core/latency.h"
#include "core/mode.h"
#include "core/progress.h"
#include "core/run_support.h"
#include "modes/modes.h"
#include "rpc_message.h"
#include "soak/soak_stats.h"
#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/rpc/channel.h"
#include "tern/tls/tls_context.h"

namespace tern::bench {

namespace {

// The failures seen on one worker: how many, and the first few distinct ones. Written only by
// fibers of that worker.
struct Failures {
  std::uint64_t count = 0;
  std::vector<std::string> kinds;     // what failed, without the client's number
  std::vector<std::string> messages;  // the same, naming the first client it happened to

  void add(std::size_t client, std::string kind, std::uint64_t times = 1) {
    count += times;
    if (kinds.size() >= Report::kMaxErrorMessages ||
        std::find(kinds.begin(), kinds.end(), kind) != kinds.end())
      return;
    messages.push_back(fmt::format("client {}: {}", client, kind));
    kinds.push_back(std::move(kind));
  }
};

// One stream of --stall: what its writer sent and, at the end of the stall, what it held.
struct StallStream {
  std::atomic<std::uint64_t> sent{0};  // messages written (the clock reads it once all are full)
  std::uint64_t write_waits = 0;       // times its writer parked for the server's window
  std::size_t buffered_bytes = 0;      // answers received and never read, at the end
  std::size_t peak_buffered_bytes = 0;
  bool failed = false;  // the stream failed before the end of the stall
};

// --stall's clock: the server's RSS (KiB; 0 when unread) before the streams opened, once every
// stream was full (both writers parked) and --stall seconds later.
struct StallRss {
  std::uint64_t before = 0;
  std::uint64_t full = 0;
  std::uint64_t end = 0;
  bool all_full = false;        // every stream filled before the clock gave up waiting
  double fill_s = 0;            // from the start to the last stream full
  std::uint64_t sent_full = 0;  // messages all streams had sent by then
};

// A channel and the clients that call through it; the channel lives on one worker.
struct ChannelSlot {
  std::optional<rpc::Channel> channel;
  std::string error;       // why it did not open
  bool connected = false;  // a connection was ready before the start
  WaitGroup users;         // its clients still calling
};

struct Run {
  Run(const RpcOptions& options, std::string address_text)
      : o(options),
        address(std::move(address_text)),
        workers(options.net.workers),
        channel_count(options.shared > 0 ? options.shared : options.concurrency),
        meter(options.net.workers),
        latency(options.net.workers),
        failures(options.net.workers),
        ends(options.net.workers) {
    for (std::size_t j = 0; j < channel_count; ++j)
      channels.push_back(std::make_unique<ChannelSlot>());
  }

  // Calls of client i: N/C, plus one for the first N mod C clients.
  std::uint64_t quota(std::size_t client) const {
    return o.calls / o.concurrency + (client < o.calls % o.concurrency ? 1 : 0);
  }
  // The channel of client i. Client i runs on worker i % workers and channel j on worker
  // j % workers; the clients of a worker take its channels in turn.
  std::size_t channel_of(std::size_t client) const {
    const std::size_t worker = client % workers;
    const std::size_t on_worker = (channel_count - worker + workers - 1) / workers;
    return worker + workers * ((client / workers) % on_worker);
  }

  const RpcOptions& o;
  std::string address;
  tls::TlsContext tls;  // --tls: the client context every channel shares
  std::size_t workers;
  std::size_t channel_count;
  std::size_t message_bytes = 0;
  std::vector<std::unique_ptr<ChannelSlot>> channels;
  Meter meter;
  LatencyRecorder latency;
  std::vector<Failures> failures;       // per worker
  std::vector<Clock::time_point> ends;  // per worker: its last reply
  WaitGroup channels_open;              // each channel connected, or gave up
  WaitGroup channels_closed;
  LoadGate clients;  // the callers: ready (connected), released, done
  Clock::time_point start{};
  Deadline cap = kNoDeadline;
  // --stall: one entry per client, the server's RSS, the streams not full yet (the last one
  // sets all_full), and the end of the stall (set by the clock once it read the last RSS; the
  // clients then note their figures and cancel).
  std::vector<StallStream> stalls;
  StallRss rss;
  std::atomic<std::size_t> filling{0};
  Event all_full;
  Event stall_over;
};

// Channel j: opens it with one connection, waits for the connection, and closes it once its
// clients are done (on this fiber, so on the worker that opened it).
void run_channel(Run& run, std::size_t j) {
  ChannelSlot& slot = *run.channels[j];
  rpc::ChannelOptions options;
  options.connections_per_endpoint = 1;
  options.ping_interval = std::chrono::milliseconds(0);  // the peers' clients send none either
  options.stream_window = run.o.stream_window;
  options.tls = run.tls;
  options.tls_server_name = run.o.net.target.host;
  rpc::Result<rpc::Channel> opened = rpc::Channel::open(run.address, std::move(options));
  if (!opened) {
    slot.error = "opening the channel: " + opened.error().to_string();
  } else {
    slot.channel.emplace(std::move(*opened));
    slot.connected = slot.channel->wait_connected(deadline_after(seconds(run.o.timeout_s))).ok();
  }
  run.channels_open.done();
  (void)slot.users.wait();
  slot.channel.reset();
  run.channels_closed.done();
}

// Client i with --stream: one Pump stream carrying its quota of messages, written by a fiber of
// its own while this one reads and checks the answers.
void run_stream(Run& run, std::size_t i, ChannelSlot& slot, const BenchmarkMessage& request) {
  const std::size_t worker = this_worker::index();
  Failures& failures = run.failures[worker];
  const std::uint64_t quota = run.quota(i);
  BenchmarkServiceClient client(*slot.channel);
  rpc::ClientContext context;
  context.set_deadline(std::min(run.cap, deadline_after(seconds(run.o.timeout_s))));
  rpc::ClientReaderWriter<BenchmarkMessage, BenchmarkMessage> stream = client.Pump(context);
  rpc::Status write_failure;
  Fiber writer = spawn(
      [&] {
        for (std::uint64_t m = 0; m < quota; ++m) {
          write_failure = stream.write(request);
          if (!write_failure.ok()) return;
        }
        write_failure = stream.close_send();
      },
      {.name = "rpc-stream-writer"});
  BenchmarkMessage reply;
  std::uint64_t answered = 0;
  for (; answered < quota; ++answered) {
    rpc::Result<bool> got = stream.read(reply);
    if (!got || !*got) {
      // Every message without an answer counts as failed.
      failures.add(i, got ? std::string("the stream ended early") : got.error().to_string(),
                   quota - answered);
      for (std::uint64_t m = answered; m < quota; ++m) run.meter.add_error(worker);
      stream.cancel();
      break;
    }
    if (std::string why = check_rpc_reply(reply); !why.empty()) {
      failures.add(i, std::move(why));
      run.meter.add_error(worker);
      continue;
    }
    run.meter.add_done(worker, 1, run.message_bytes);
  }
  run.ends[worker] = std::max(run.ends[worker], Clock::now());
  writer.join();
  if (answered == quota) {
    // Every answer came: the stream must still end with ok.
    rpc::Status status = write_failure.ok() ? stream.finish() : write_failure;
    if (!status.ok()) failures.add(i, "stream status: " + status.to_string());
  }
}

// How often a --stall client looks whether its stream is full.
constexpr auto kFullPoll = std::chrono::milliseconds(5);

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

// The server's RSS in KiB, or 0 when there is no --server-pid or it cannot be read.
std::uint64_t server_rss_kib(const Run& run) {
  if (run.o.net.server_pid <= 0) return 0;
  Result<std::uint64_t> kib = read_rss_kib(run.o.net.server_pid);
  return kib ? *kib : 0;
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

// Client i: waits for the start, then makes its calls one after another.
void run_client(Run& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  Failures& failures = run.failures[worker];
  ChannelSlot& slot = *run.channels[run.channel_of(i)];
  BenchmarkMessage request;
  fill_rpc_request(request);
  BenchmarkMessage reply;
  rpc::ClientContext context;
  run.clients.connected.done();
  (void)run.clients.go.wait();
  const std::uint64_t quota = run.quota(i);
  if (!slot.channel) {
    // A channel that did not open: its calls are not made, each counts as failed.
    failures.add(i, slot.error, quota);
    for (std::uint64_t call = 0; call < quota; ++call) run.meter.add_error(worker);
  } else if (run.o.stall_s > 0) {
    run_stall(run, i, slot, request);
  } else if (run.o.stream) {
    run_stream(run, i, slot, request);
  } else {
    BenchmarkServiceClient client(*slot.channel);
    const auto timeout = seconds(run.o.timeout_s);
    for (std::uint64_t call = 0; call < quota; ++call) {
      const Clock::time_point begin = Clock::now();
      if (begin >= run.cap) break;
      context.set_deadline(begin + timeout);
      const rpc::Status status = client.Say(context, request, reply);
      const Clock::time_point end = Clock::now();
      if (!status.ok()) {
        failures.add(i, status.to_string());
        run.meter.add_error(worker);
        if (status == rpc::StatusCode::cancelled) break;  // the context stays cancelled
        continue;
      }
      if (std::string why = check_rpc_reply(reply); !why.empty()) {
        failures.add(i, std::move(why));
        run.meter.add_error(worker);
        continue;
      }
      run.latency.record(worker, end - begin);
      run.meter.add_done(worker, 1, run.message_bytes);
      run.ends[worker] = std::max(run.ends[worker], end);
    }
  }
  slot.users.done();
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

int run_rpc(const RpcOptions& o) {
  Result<net::Address> address = resolve_target_or_say(o.net.target, "rpc");
  if (!address) return 1;
  Run run(o, address->to_string());
  if (o.stall_s > 0) run.stalls = std::vector<StallStream>(o.concurrency);
  if (o.tls) {
    Result<tls::TlsContext> context =
        tls::TlsContext::client({.ca_file = o.tls_ca, .verify_peer = !o.tls_ca.empty()});
    if (!context) {
      std::fprintf(stderr, "tern-bench rpc: %s\n", context.error().message().c_str());
      return 1;
    }
    run.tls = *context;
  }
  {
    BenchmarkMessage request;
    fill_rpc_request(request);
    run.message_bytes = request.ByteSizeLong();
  }
  Report report;
  report.mode = "rpc";
  CpuWindow cpu(o.net.server_pid);
  Progress progress(run.meter, std::chrono::seconds(1), Progress::rate_line("calls"),
                    o.net.output.quiet);
  std::string backend;
  Runtime runtime(client_runtime(o.net));
  runtime.run([&] {
    backend = std::string(io::to_string(io::current_backend()));
    run.channels_open.add(run.channel_count);
    run.channels_closed.add(run.channel_count);
    for (std::size_t i = 0; i < o.concurrency; ++i) run.channels[run.channel_of(i)]->users.add();
    spread_fibers(run.channel_count, "rpc-channel", [&run](std::size_t j) { run_channel(run, j); });
    (void)run.channels_open.wait();
    run_gated_load(
        run.clients, o.concurrency, "rpc-client", [&run](std::size_t i) { run_client(run, i); },
        [&](Clock::time_point now) {
          run.start = now;
          if (o.stall_s > 0) {
            run.rss.before = server_rss_kib(run);
            run.filling.store(o.concurrency, std::memory_order_relaxed);
            spawn([&run] { time_stall(run); }, {.name = "rpc-stall-clock"}).detach();
          }
          if (o.net.duration_s > 0) run.cap = now + seconds(o.net.duration_s);
          for (Clock::time_point& end : run.ends) end = now;
        },
        cpu, progress, report);
    (void)run.channels_closed.wait();
  });

  if (o.stall_s > 0) {
    std::size_t answer_bytes = 0;
    {
      BenchmarkMessage answer;
      fill_rpc_request(answer);
      answer_rpc_request(answer);
      answer_bytes = answer.ByteSizeLong();
    }
    report.params["concurrency"] = o.concurrency;
    report.params["message_bytes"] = run.message_bytes;
    report.params["shared"] = o.shared;
    report.params["stream"] = true;
    add_network_params(report, o.net, backend);
    for (const Failures& f : run.failures) {
      report.errors += f.count;
      for (const std::string& message : f.messages) {
        if (report.error_messages.size() < Report::kMaxErrorMessages)
          report.error_messages.push_back(message);
      }
    }
    const bool passed = report_stall(run, answer_bytes, report);
    return conclude(report, o.net.output, passed);
  }
  const prof::Histogram latency = run.latency.merged();
  const std::uint64_t calls = o.stream ? run.meter.totals().done : latency.count();
  const Clock::time_point end = *std::max_element(run.ends.begin(), run.ends.end());
  const double elapsed = seconds_between(run.start, end);
  const double tps = elapsed > 0 ? static_cast<double>(calls) / elapsed : 0;
  std::uint64_t failed = 0;
  std::vector<std::string> kinds;
  for (const Failures& f : run.failures) {
    failed += f.count;
    for (std::size_t k = 0; k < f.kinds.size(); ++k) {
      if (report.error_messages.size() >= Report::kMaxErrorMessages) break;
      if (std::find(kinds.begin(), kinds.end(), f.kinds[k]) != kinds.end()) continue;
      kinds.push_back(f.kinds[k]);
      report.error_messages.push_back(f.messages[k]);
    }
  }
  report.errors = failed;

  report.params["concurrency"] = o.concurrency;
  report.params["calls"] = o.calls;
  report.params["message_bytes"] = run.message_bytes;
  report.params["shared"] = o.shared;
  report.params["timeout_s"] = o.timeout_s;
  report.params["tls"] = o.tls;
  report.params["stream"] = o.stream;
  add_network_params(report, o.net, backend);
  report.figures["calls"] = calls;
  report.figures["tps"] = round_to(tps, 1);
  if (!o.stream) add_latency_figures(report.figures, latency);
  report.figures["elapsed_s"] = round_to(elapsed, 6);
  if (o.stream) {
    report.summary.push_back(fmt::format(
        "{} stream(s) to BenchmarkService/Pump over {} connection(s), {}-byte messages: {} "
        "verified answers of {} messages in {:.3f} s: {:.1f} messages/s, {} failed",
        o.concurrency, run.channel_count, run.message_bytes, calls, o.calls, elapsed, tps, failed));
  } else {
    report.summary.push_back(fmt::format(
        "{} clients over {} connection(s), {}-byte request: {} verified replies of {} calls in "
        "{:.3f} s: {:.1f} calls/s, {} failed",
        o.concurrency, run.channel_count, run.message_bytes, calls, o.calls, elapsed, tps, failed));
    report.summary.push_back(latency_line("latency per call", latency));
  }
  const auto unconnected = static_cast<std::size_t>(
      std::count_if(run.channels.begin(), run.channels.end(),
                    [](const auto& slot) { return slot->error.empty() && !slot->connected; }));
  if (unconnected > 0)
    report.notes.push_back(fmt::format(
        "{} of {} channel(s) had no connection when the calls started (after waiting up to {} s, "
        "--timeout); their calls were made anyway",
        unconnected, run.channel_count, o.timeout_s));
  const std::uint64_t attempted = calls + failed;
  if (o.net.duration_s > 0 && attempted < o.calls)
    report.notes.push_back(fmt::format("stopped by the --duration cap ({} s) after {} of {} calls",
                                       o.net.duration_s, attempted, o.calls));
  if (calls == 0 && failed == 0) report.add_error("no call completed");
  return conclude(report, o.net.output, calls > 0);
}

}  // namespace

void add_rpc_command(CLI::App& app) { add_mode(app, &add_rpc_options, &run_rpc); }

}  // namespace tern::bench
