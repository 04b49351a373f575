// The rpc scenario of `tern-bench soak`: C callers, a fiber each, call
// tern.bench.BenchmarkService/Say on tern-rpc-server one call after another for --duration
// seconds, with report 001's request (rpc_message.h), and check every reply. Each caller has a
// tern::rpc::Channel of its own (one connection), or with --shared K the callers of a worker
// share that worker's channels out of K. Every call must succeed: a failed call is counted by
// its status code, and the caller goes on after a 10 ms pause. With --abusers, abusive clients
// (soak_abuse.h) attack the server during the load; with --max-p99-ms, the callers' p99 latency
// must stay under the bound.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "benchmark_message.tern.h"
#include "core/run_support.h"
#include "rpc_message.h"
#include "soak/soak.h"
#include "soak/soak_abuse.h"
#include "soak/soak_stats.h"
#include "tern/fiber/event.h"
#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"
#include "tern/fiber/wait_group.h"
#include "tern/rpc/channel.h"

namespace tern::bench {

namespace {

using namespace std::chrono_literals;

constexpr auto kPauseAfterFailure = 10ms;

rpc::ChannelOptions soak_channel_options() {
  rpc::ChannelOptions options;
  options.connections_per_endpoint = 1;
  return options;
}

// A channel and its callers; the channel lives on one worker.
struct ChannelSlot {
  std::optional<rpc::Channel> channel;
  WaitGroup users;  // its callers still calling
};

struct RpcRun {
  explicit RpcRun(SoakContext& run_context)
      : c(run_context),
        workers(run_context.o.net.workers),
        channel_count(run_context.o.shared > 0 ? run_context.o.shared : run_context.o.connections) {
    for (std::size_t j = 0; j < channel_count; ++j)
      channels.push_back(std::make_unique<ChannelSlot>());
  }

  // Caller i runs on worker i % workers and uses a channel of that worker (channel j lives on
  // worker j % workers): its own (channel i) or, shared, the worker's channels in turn.
  std::size_t channel_of(std::size_t caller) const {
    if (c.o.shared == 0) return caller;
    const std::size_t worker = caller % workers;
    const std::size_t on_worker = (channel_count - worker + workers - 1) / workers;
    return worker + workers * ((caller / workers) % on_worker);
  }

  SoakContext& c;
  std::size_t workers;
  std::size_t channel_count;
  std::vector<std::unique_ptr<ChannelSlot>> channels;
  WaitGroup channels_open;  // each connected, or gave up
  WaitGroup channels_closed;
  WaitGroup callers_done;
  Event go;
  Deadline end{};
  std::size_t message_bytes = kRpcRequestBytes;
};

void run_channel(RpcRun& run, std::size_t j) {
  const std::size_t worker = this_worker::index();
  ChannelSlot& slot = *run.channels[j];
  rpc::Result<rpc::Channel> opened =
      rpc::Channel::open(run.c.address.to_string(), soak_channel_options());
  if (!opened) {
    run.c.fail(worker, "channel open: " + std::string(status_code_name(opened.error().code())),
               fmt::format("channel {}: open: {}", j, opened.error().to_string()));
  } else {
    slot.channel.emplace(std::move(*opened));
    if (const rpc::Status up = slot.channel->wait_connected(run.c.io_deadline()); !up.ok())
      run.c.fail(worker, "channel connect: " + std::string(status_code_name(up.code())),
                 fmt::format("channel {}: no connection within --timeout: {}", j, up.to_string()));
  }
  run.channels_open.done();
  (void)slot.users.wait();
  slot.channel.reset();
  run.channels_closed.done();
}

void run_caller(RpcRun& run, std::size_t i) {
  const std::size_t worker = this_worker::index();
  ChannelSlot& slot = *run.channels[run.channel_of(i)];
  if (slot.channel && run.go.wait()) {
    BenchmarkMessage request;
    fill_rpc_request(request);
    BenchmarkMessage reply;
    BenchmarkServiceClient client(*slot.channel);
    std::optional<rpc::ClientContext> context;
    for (std::uint64_t call = 0; Clock::now() < run.end; ++call) {
      if (!context) context.emplace();
      const Clock::time_point begin = Clock::now();
      context->set_deadline(begin + seconds(run.c.o.timeout_s));
      const rpc::Status status = client.Say(*context, request, reply);
      const Clock::time_point now = Clock::now();
      std::string why;
      std::string kind;
      if (!status.ok()) {
        kind = std::string(status_code_name(status.code()));
        why = status.to_string();
        context.reset();  // a cancelled context stays cancelled
      } else if (why = check_rpc_reply(reply); !why.empty()) {
        kind = "wrong reply";
      }
      if (!why.empty()) {
        run.c.fail(worker, kind, fmt::format("caller {}, call {}: {}", i, call, why));
        if (!this_fiber::sleep_until(std::min(now + kPauseAfterFailure, run.end))) break;
        continue;
      }
      run.c.latency.record(worker, now - begin);
      run.c.meter.add_done(worker, 1, run.message_bytes);
    }
  }
  slot.users.done();
  run.callers_done.done();
}

// The server's largest RSS over the load (--max-server-rss-mib).
struct RssWatch {
  std::uint64_t max_kib = 0;
  WaitGroup done;
};

// Samples the server's RSS every 100 ms from the start of the load to its end.
void watch_server_rss(const SoakContext& c, RpcRun& run, RssWatch& watch) {
  if (run.go.wait()) {
    while (Clock::now() < run.end) {
      if (Result<std::uint64_t> kib = read_rss_kib(static_cast<pid_t>(c.o.net.server_pid)))
        watch.max_kib = std::max(watch.max_kib, *kib);
      if (!this_fiber::sleep_for(100ms)) break;
    }
  }
  watch.done.done();
}

}  // namespace

std::string rpc_primer(const SoakContext& context) {
  rpc::Result<rpc::Channel> channel =
      rpc::Channel::open(context.address.to_string(), soak_channel_options());
  if (!channel) return "opening a channel: " + channel.error().to_string();
  if (const rpc::Status up = channel->wait_connected(context.io_deadline()); !up.ok())
    return "no connection: " + up.to_string();
  BenchmarkMessage request;
  fill_rpc_request(request);
  BenchmarkMessage reply;
  rpc::ClientContext call;
  call.set_deadline(context.io_deadline());
  BenchmarkServiceClient client(*channel);
  if (const rpc::Status status = client.Say(call, request, reply); !status.ok())
    return "BenchmarkService/Say: " + status.to_string();
  if (std::string why = check_rpc_reply(reply); !why.empty()) return why;
  return {};
}

void run_rpc_scenario(SoakContext& c) {
  RpcRun run(c);
  c.monitor.set_phase("connect");
  run.channels_open.add(run.channel_count);
  run.channels_closed.add(run.channel_count);
  for (std::size_t i = 0; i < c.o.connections; ++i) run.channels[run.channel_of(i)]->users.add();
  spread_fibers(run.channel_count, "soak-channel", [&run](std::size_t j) { run_channel(run, j); });
  (void)run.channels_open.wait();
  std::uint64_t connected = 0;
  for (const auto& slot : run.channels) connected += slot->channel ? 1 : 0;
  run.callers_done.add(c.o.connections);
  spread_fibers(c.o.connections, "soak-caller", [&run](std::size_t i) { run_caller(run, i); });
  std::optional<Abusers> abusers;
  if (c.o.abusers > 0) {
    abusers.emplace(c.address, c.o.abusers,
                    std::chrono::microseconds(std::llround(c.o.abuse_interval_ms * 1000)));
    abusers->start(run.go, run.end);
  }
  RssWatch rss;
  if (c.o.max_server_rss_mib > 0) {
    rss.done.add();
    spawn([&] { watch_server_rss(c, run, rss); }, {.name = "soak-rss"}).detach();
  }

  const double elapsed = run_timed_load(c, run.go, run.end, run.callers_done);
  if (abusers) abusers->wait();
  (void)rss.done.wait();
  c.monitor.set_phase("closing");
  (void)run.channels_closed.wait();
  c.monitor.set_phase("closed");

  const Meter::Totals totals = c.meter.totals();
  const double rate = elapsed > 0 ? static_cast<double>(totals.done) / elapsed : 0;
  Json& f = c.report.figures;
  f["channels"] = run.channel_count;
  f["channels_open"] = connected;
  f["calls"] = totals.done;
  f["calls_per_s"] = round_to(rate, 1);
  f["load_s"] = round_to(elapsed, 3);
  const prof::Histogram latency = c.latency.merged();
  add_latency_figures(f, latency, "call_");
  c.report.summary.push_back(fmt::format(
      "{} callers over {} channel(s) ({} opened), {}-byte request: {} verified calls in {:.1f} s, "
      "{:.0f}/s",
      c.o.connections, run.channel_count, connected, run.message_bytes, totals.done, elapsed,
      rate));
  c.report.summary.push_back(latency_line("call", latency));
  if (totals.done == 0) c.report.add_error("no call completed");
  if (abusers) {
    abusers->report(f);
    c.report.summary.push_back(fmt::format(
        "beside them {} abusive clients: {} bombs ({} answered), {} pings and {} calls never read, "
        "{} pipelines reset; the server closed {} of their connections",
        4 * c.o.abusers, f["abuse_bombs"].get<std::uint64_t>(),
        f["abuse_bomb_answers"].get<std::uint64_t>(), f["abuse_pings"].get<std::uint64_t>(),
        f["abuse_unread_calls"].get<std::uint64_t>(), f["abuse_resets"].get<std::uint64_t>(),
        f["abuse_server_closes"].get<std::uint64_t>()));
  }
  if (c.o.max_server_rss_mib > 0) {
    const double max_mib = static_cast<double>(rss.max_kib) / 1024;
    f["server_rss_load_max_mib"] = round_to(max_mib, 1);
    if (max_mib > c.o.max_server_rss_mib) {
      c.report.add_error(
          fmt::format("the server's RSS reached {:.1f} MiB during the load, over "
                      "--max-server-rss-mib {}",
                      max_mib, c.o.max_server_rss_mib));
    }
  }
  const double p99_ms = static_cast<double>(latency.percentile(99)) / 1e6;
  if (c.o.max_p99_ms > 0 && totals.done > 0 && p99_ms > c.o.max_p99_ms) {
    c.report.add_error(
        fmt::format("the callers' p99 call latency, {:.1f} ms, is over --max-p99-ms {}", p99_ms,
                    c.o.max_p99_ms));
  }
}

}  // namespace tern::bench
