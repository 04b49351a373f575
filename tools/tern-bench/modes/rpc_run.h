#pragma once
// The state of one `tern-bench rpc` run, shared by its call and stream clients (rpc.cc) and its
// --stream --stall clients (rpc_stall.cc). Everything here is used from the run's worker fibers.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/latency.h"
#include "core/options.h"
#include "core/progress.h"
#include "core/report.h"
#include "core/run_support.h"
#include "tern/fiber/event.h"
#include "tern/fiber/wait_group.h"
#include "tern/rpc/channel.h"
#include "tern/tls/tls_context.h"

namespace tern::bench::rpc_mode {

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

// Adds one message for each kind of failure the workers saw (naming the first client it happened
// to) to the report's, up to its limit, and returns how many failures there were in all. After
// the run, on the thread that started it.
std::uint64_t add_failure_messages(const std::vector<Failures>& failures, Report& report);

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

}  // namespace tern::bench::rpc_mode
