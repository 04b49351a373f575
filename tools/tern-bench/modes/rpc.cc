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
#include "modes/rpc_run.h"
#include "modes/rpc_stall.h"
#include "rpc_message.h"
#include "tern/fiber/event.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/io/backend.h"
#include "tern/rpc/channel.h"
#include "tern/tls/tls_context.h"

namespace tern::bench {

namespace rpc_mode {

std::uint64_t add_failure_messages(const std::vector<Failures>& failures, Report& report) {
  std::uint64_t count = 0;
  std::vector<std::string> kinds;
  for (const Failures& f : failures) {
    count += f.count;
    for (std::size_t k = 0; k < f.kinds.size(); ++k) {
      if (report.error_messages.size() >= Report::kMaxErrorMessages) break;
      if (std::find(kinds.begin(), kinds.end(), f.kinds[k]) != kinds.end()) continue;
      kinds.push_back(f.kinds[k]);
      report.error_messages.push_back(f.messages[k]);
    }
  }
  return count;
}

}  // namespace rpc_mode

namespace {

using namespace rpc_mode;

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
    report.errors += add_failure_messages(run.failures, report);
    const bool passed = report_stall(run, answer_bytes, report);
    return conclude(report, o.net.output, passed);
  }
  const prof::Histogram latency = run.latency.merged();
  const std::uint64_t calls = o.stream ? run.meter.totals().done : latency.count();
  const Clock::time_point end = *std::max_element(run.ends.begin(), run.ends.end());
  const double elapsed = seconds_between(run.start, end);
  const double tps = elapsed > 0 ? static_cast<double>(calls) / elapsed : 0;
  const std::uint64_t failed = add_failure_messages(run.failures, report);
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
