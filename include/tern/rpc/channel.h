#pragma once

#include <tern/base/clock.h>
#include <tern/fiber/fiber.h>
#include <tern/net/address.h>
#include <tern/net/connector.h>
#include <tern/rpc/client_context.h>
#include <tern/rpc/future.h>
#include <tern/rpc/status.h>
#include <tern/rpc/stream.h>
#include <tern/tls/tls_context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc {

// How a Channel spreads calls over its endpoints.
enum class LoadBalancing {
  round_robin,      // each call to the next healthy endpoint
  consistent_hash,  // by ClientContext::set_call_key (round robin for calls without a key)
  least_loaded,     // fewest calls in flight, weighed by latency and endpoint weight
  locality,         // least_loaded within ChannelOptions::zone, spilling to other zones
};

// One server of a channel as a naming source describes it.
struct EndpointSpec {
  std::string address{};       // "host:port", "dns://name:port" (every address) or "unix:/path"
  std::uint32_t weight = 1;    // relative share for least_loaded, locality and consistent_hash
  std::string zone{};          // where the server runs, for LoadBalancing::locality ("": none)
  MetadataEntries metadata{};  // whatever else the naming source knows (shown in /status)
};

// Active health checks: every endpoint is checked at an interval, apart from its calls; one that
// fails `unhealthy_after` checks in a row gets no calls until it passes `healthy_after` checks.
struct HealthCheckOptions {
  // Time between checks (0: no checks). Channels with one endpoint never check: there is no
  // other endpoint to send calls to, and connection pings find a dead peer already.
  std::chrono::milliseconds interval{2'000};
  std::chrono::milliseconds timeout{1'000};  // a check with no answer within this fails
  unsigned unhealthy_after = 3;
  unsigned healthy_after = 1;
  // The method a check calls with an empty request (a reply with status ok passes); empty: the
  // check is a ping frame, which the server's connection answers without running a handler.
  std::string service{};
  std::string method{};
};

// Outlier ejection: a circuit breaker per endpoint. Closed, it opens after
// `consecutive_failures` failed calls in a row, or when at least `min_calls` calls of one
// `window` failed at `failure_ratio` or more. Open, the endpoint gets no calls for an ejection
// time that starts at `base_ejection` and doubles with each ejection in a row (up to
// `max_ejection`); then it is half-open and lets `half_open_probes` calls through at a time: one
// that succeeds closes the breaker, one that fails opens it again. Failures are replies with
// unavailable, deadline_exceeded, resource_exhausted, internal, unknown or data_loss and broken
// connections; other statuses are the service's answers and count as successes.
struct BreakerOptions {
  bool enabled = true;
  unsigned consecutive_failures = 5;
  double failure_ratio = 0.5;
  unsigned min_calls = 20;
  std::chrono::milliseconds window{10'000};
  std::chrono::milliseconds base_ejection{1'000};
  std::chrono::milliseconds max_ejection{30'000};
  unsigned half_open_probes = 1;
  // At most this share of the endpoints is ejected at once, and never all of them: a breaker
  // that would open beyond it stays closed.
  unsigned max_ejection_percent = 50;
};

// The retry budget: retries and hedges of the channel may be at most `percent` % of its calls
// over the last `window`, plus `min_per_second` per second of that window, so a failing cluster
// is not hit by a storm of retries. A retry over budget is not made (the call returns its last
// status; counted in ChannelStats::retries_throttled).
struct RetryBudgetOptions {
  unsigned percent = 20;
  unsigned min_per_second = 10;
  std::chrono::seconds window{10};
};

// Hedged (backup) requests for idempotent calls: when no reply came `delay` after the call was
// sent, the same call goes to another endpoint; the first reply wins and the other is cancelled.
struct HedgingOptions {
  std::chrono::milliseconds delay{0};  // 0 (and no percentile): no hedging
  // With a percentile (95: the p95), the delay is that percentile of the latencies of the
  // channel's last 256 replies when it is longer than `delay` (until 32 replies came: `delay`,
  // and no hedging when that is 0).
  double percentile = 0;
  unsigned max_hedges = 1;  // backups per call
};

// Resolves "name:port" to addresses (dns:// targets); the default is net::resolve. Called from
// the channel's worker.
using NameResolver =
    std::function<tern::Result<std::vector<net::Address>>(std::string_view host_port)>;

// How a Channel behaves; the defaults suit most clients.
struct ChannelOptions {
  // Connections kept open to every endpoint; calls are multiplexed over them.
  std::size_t connections_per_endpoint = 2;
  LoadBalancing load_balancing = LoadBalancing::round_robin;
  // Backoff between reconnect attempts and the deadline of one attempt.
  net::ConnectorOptions reconnect{};
  // A connected connection sends a ping this often and is dropped (and reconnected) when no
  // pong comes back within ping_timeout (0: no pings).
  std::chrono::milliseconds ping_interval{5'000};
  std::chrono::milliseconds ping_timeout{5'000};
  // The deadline of calls whose context sets none (0: no deadline).
  std::chrono::nanoseconds default_timeout{0};
  // How many other endpoints an idempotent call tries after its connection failed or the server
  // answered unavailable.
  unsigned max_retries = 2;
  // The zone this client runs in, for LoadBalancing::locality.
  std::string zone{};
  // LoadBalancing::locality sends calls to other zones when every endpoint of the local zone has
  // this many calls in flight (or none is usable).
  std::uint32_t locality_spill_in_flight = 100;
  HealthCheckOptions health_check{};
  BreakerOptions breaker{};
  RetryBudgetOptions retry_budget{};
  HedgingOptions hedging{};
  // Frame and metadata limits for replies (docs/rpc-protocol.md).
  std::uint32_t max_frame_size = 64u << 20;
  std::uint32_t max_metadata_size = 64u << 10;
  // Once the first byte of a frame from the server has arrived, the whole frame must arrive
  // within this; otherwise the connection is closed (its calls fail over as when it breaks) and
  // reconnected. Time between frames is not limited by it (0: no limit).
  std::chrono::milliseconds frame_read_timeout{30'000};
  // The largest body of a push frame, after decompression: a larger push is dropped (counted in
  // ChannelStats::oversized_pushes) before anything is decompressed; the connection stays.
  std::uint32_t max_push_size = 1u << 20;
  // Receives server-push frames (the method named in their metadata, the raw body); without it
  // they are counted and dropped unread (not decompressed). Runs on the connection's reading
  // fiber: do not block.
  std::function<void(std::string_view service, std::string_view method,
                     std::span<const std::byte> body)>
      on_push{};
  // dns:// targets are resolved again this often: new addresses are added, and addresses the
  // name no longer has are dropped once their calls finish (0: resolved once, at open).
  std::chrono::milliseconds dns_refresh_interval{30'000};
  // Resolves dns:// names (empty: net::resolve); tests inject their own.
  NameResolver resolver{};
  // etcd:// targets: servers register under "<etcd_prefix>/<service>/<address>" (ServerOptions::
  // registry), every etcd request has etcd_timeout as its deadline, and while etcd is unreachable
  // the channel keeps its endpoints and retries with backoff up to etcd_max_backoff.
  std::string etcd_prefix = "/tern/services";
  std::chrono::milliseconds etcd_timeout{3'000};
  std::chrono::milliseconds etcd_max_backoff{5'000};
  // TLS to every endpoint when it holds a client context (docs/tls.md): the handshake runs after
  // each connect and reconnect (resuming the last session when the context keeps them), the
  // server's certificate must verify and carry the target's host name, which is sent as SNI.
  // Targets written "tls://host:port" make the channel speak TLS even without it, with a context
  // trusting the system's CA bundle.
  tls::TlsContext tls{};
  // The name the servers' certificates must carry, and the SNI sent, instead of each target's
  // host (e.g. a certificate for "db.internal" reached through 10.0.0.7).
  std::string tls_server_name{};
  // A connect whose TLS handshake does not finish within this fails like a refused connect.
  std::chrono::milliseconds tls_handshake_timeout{10'000};
  // Sent with every call as the metadata "authorization: Bearer <token>" (docs/tls.md) unless the
  // call's ClientContext carries its own "authorization" (empty: none).
  std::string bearer_token{};
  // Bytes of messages a stream's server may send ahead of this client's reads (the stream's
  // flow-control window; at least 64 KiB).
  std::uint32_t stream_window = 256u << 10;
};

// Counters of a Channel; from the channel's worker.
struct ChannelStats {
  std::uint64_t calls = 0;         // calls started (one-way included)
  std::uint64_t failed_calls = 0;  // calls that ended with a status other than ok
  std::uint64_t retries = 0;       // extra attempts of idempotent calls
  std::uint64_t connects = 0;      // connections established
  std::uint64_t connection_losses = 0;
  std::uint64_t late_replies = 0;       // replies to calls that had already given up
  std::uint64_t protocol_errors = 0;    // connections closed for a malformed frame
  std::uint64_t frame_timeouts = 0;     // connections closed for a frame over frame_read_timeout
  std::uint64_t dropped_pushes = 0;     // push frames dropped unread: no on_push handler
  std::uint64_t oversized_pushes = 0;   // push frames dropped for a body over max_push_size
  std::uint64_t pushes = 0;             // push frames handed to on_push
  std::uint64_t streams = 0;            // streams opened
  std::uint64_t retries_throttled = 0;  // retries and hedges not made: over the retry budget
  std::uint64_t hedges = 0;             // backup requests sent
  std::uint64_t hedge_wins = 0;         // calls answered by a backup request first
  std::uint64_t ejections = 0;          // breakers opened
  std::uint64_t health_checks = 0;      // checks made
  std::uint64_t health_check_failures = 0;
  std::size_t unhealthy = 0;  // endpoints failing their health checks now
  std::size_t ejected = 0;    // endpoints whose breaker is open now
  std::size_t connected = 0;  // connections ready now
  std::size_t endpoints = 0;
};

// One endpoint of a channel as it stands now (Channel::endpoint_status, admin /status).
struct EndpointStatus {
  std::string name{};  // "127.0.0.1:5000"
  std::string zone{};
  std::uint32_t weight = 1;
  bool healthy = true;         // passing its health checks (or not checked)
  std::string_view breaker{};  // "closed", "open" or "half_open"
  std::uint32_t in_flight = 0;
  std::size_t connected = 0;  // connections ready
  double latency_ewma_ms = 0;
  std::uint64_t calls = 0;     // attempts sent to it
  std::uint64_t failures = 0;  // of those, failures as the breaker counts them
  MetadataEntries metadata{};  // as its EndpointSpec gave it
};

// A client of one or more RPC servers: "host:port", "host:port,host:port", "dns://name:port"
// (every address the name resolves to, resolved again every dns_refresh_interval), "unix:/path",
// or "etcd://host:port,host:port/service" (the servers registered for the service in etcd,
// followed as they come and go; docs/rpc.md, "Naming"); "tls://" before the targets (or
// ChannelOptions::tls) makes every connection TLS. Keeps a small pool of multiplexed
// connections per endpoint, reconnects with backoff, checks health with pings and health checks,
// ejects failing endpoints (a circuit breaker each), balances calls (round robin, consistent
// hash, least loaded or locality) and retries or hedges idempotent calls on another endpoint
// within a retry budget (docs/rpc.md, "Cluster options"). Calls block
// the calling fiber only. A Channel belongs to the worker that opened it: call it from fibers of
// that worker (open one per worker to spread calls over workers); debug builds abort, naming the
// call, when another worker uses it.
class Channel {
 public:
  // Parses and resolves `targets` and starts connecting in the background; fails with
  // invalid_argument for a malformed target and unavailable when a name does not resolve or
  // (etcd://) no etcd endpoint answers the first listing. Worker fibers only.
  [[nodiscard]] static Result<Channel> open(std::string_view targets, ChannelOptions options = {});
  // As open(targets), with each endpoint's weight, zone and metadata given (the way a naming
  // source describes them). Worker fibers only.
  [[nodiscard]] static Result<Channel> open(std::span<const EndpointSpec> endpoints,
                                            ChannelOptions options = {});

  Channel(Channel&&) noexcept;
  Channel& operator=(Channel&&) noexcept;
  // Closes the channel (see close()).
  ~Channel();

  // Calls service/method with `request` and waits for the reply, which is parsed into `reply`.
  // Returns ok, or why there is no reply (the server's status, deadline_exceeded, cancelled,
  // unavailable, ...). With no connection ready it fails with unavailable once the channel's
  // first connect attempts have failed, or waits for one if the context sets wait_for_ready.
  // From fibers of the channel's worker.
  [[nodiscard]] Status call(ClientContext& context, std::string_view service,
                            std::string_view method, const google::protobuf::MessageLite& request,
                            google::protobuf::MessageLite& reply);

  // Sends a one-way call: the server runs the method and sends no reply. Returns once the call
  // is queued on a connection (unavailable when none is ready, unless the context sets
  // wait_for_ready). From fibers of the channel's worker.
  [[nodiscard]] Status notify(ClientContext& context, std::string_view service,
                              std::string_view method,
                              const google::protobuf::MessageLite& request);

  // Opens a stream to service/method (a streaming method; <tern/rpc/stream.h>): the returned
  // end reads and writes the stream's messages until the server's final status. With no
  // connection ready the end fails every operation with unavailable (as call does; the context's
  // wait_for_ready and deadline apply). The context's deadline is the stream's. From fibers of
  // the channel's worker; the stream stays on that worker.
  [[nodiscard]] StreamCall open_stream(ClientContext& context, std::string_view service,
                                       std::string_view method);

  // Starts the call in its own fiber and returns a future of the reply. `service` and `method`
  // must outlive the call (string literals, as generated code passes).
  template <typename Reply, typename Request>
  [[nodiscard]] Future<Reply> call_async(const ClientContext& context, std::string_view service,
                                         std::string_view method, Request request) {
    auto state = std::make_shared<detail::FutureState<Reply>>();
    state->context = context;
    start_async(
        [impl = impl_.get(), state, service, method, request = std::move(request)]() mutable {
          Reply reply;
          Status status = call_on(*impl, state->context, service, method, request, reply);
          if (status.ok()) {
            state->result.emplace(std::move(reply));
          } else {
            state->result.emplace(std::unexpected(std::move(status)));
          }
          state->done.set();
        });
    return Future<Reply>(std::move(state));
  }

  // Starts the call in its own fiber and runs `done` with its outcome there.
  template <typename Reply, typename Request>
  void call_async(const ClientContext& context, std::string_view service, std::string_view method,
                  Request request, std::function<void(Result<Reply>)> done) {
    start_async([impl = impl_.get(), context = ClientContext(context), service, method,
                 request = std::move(request), done = std::move(done)]() mutable {
      Reply reply;
      Status status = call_on(*impl, context, service, method, request, reply);
      if (status.ok()) {
        done(Result<Reply>(std::move(reply)));
      } else {
        done(Result<Reply>(std::unexpected(std::move(status))));
      }
    });
  }

  // Waits until at least one connection is ready: ok, or unavailable at the deadline (or when
  // the fiber is interrupted), cancelled once the channel is closed. For a client that starts
  // with its server: calls made before a connection is ready fail at once with unavailable unless
  // their context sets wait_for_ready. From fibers of the channel's worker.
  Status wait_connected(Deadline deadline);
  // Stops reconnecting, fails the calls in flight with cancelled and closes the connections;
  // waits for the asynchronous calls it started. Idempotent.
  void close();

  ChannelStats stats() const;
  // The endpoints ("127.0.0.1:5000") calls go to now, after resolution.
  std::vector<std::string> endpoints() const;
  // Every endpoint's health, breaker state, load and zone. From fibers of the channel's worker.
  std::vector<EndpointStatus> endpoint_status() const;

  struct Impl;

 private:
  explicit Channel(std::unique_ptr<Impl> impl) noexcept;
  // Runs body in a fiber the channel waits for when it closes.
  void start_async(std::move_only_function<void()> body);
  static Status call_on(Impl& impl, ClientContext& context, std::string_view service,
                        std::string_view method, const google::protobuf::MessageLite& request,
                        google::protobuf::MessageLite& reply);
  // A connection for a single attempt (a one-way call, a stream's opening), waited for until
  // `deadline` through a gate that context.cancel() closes; nullptr with `why` set when none
  // came or the context was cancelled (`why` then says `cancelled`).
  static detail::ClientConnection* connection_for_one_attempt(Impl& impl, ClientContext& context,
                                                              Deadline deadline,
                                                              std::string_view cancelled,
                                                              Status& why);

  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::rpc
