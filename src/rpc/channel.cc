#include "tern/rpc/channel.h"

#include <google/protobuf/message_lite.h>

#include <fmt/format.h>
#include <algorithm>

#include "client_connection.h"
#include "cluster.h"
#include "load_balancer.h"
#include "naming.h"
#include "protobuf_log.h"
#include "tern/fiber/detail/parked_node.h"
#include "tern/fiber/runtime.h"
#include "tern/net/address.h"
#include "tern/rpc/server_context.h"

namespace tern::rpc {

namespace {

// Debug builds: a channel used from a worker other than the one that opened it aborts, naming
// the call (its connections, waiters and counters live on that worker and have no lock).
void check_worker([[maybe_unused]] const Channel::Impl* impl,
                  [[maybe_unused]] const char* operation) {
#if TERN_DEBUG_CHECKS
  if (impl == nullptr) return;
  const std::size_t here = this_worker::index();
  if (here != impl->owner_worker) {
    TERN_FATAL(
        "tern::rpc::Channel::{} called on worker {}, but the channel was opened on worker {}: a "
        "Channel is used only from fibers of the worker that opened it (open one channel per "
        "worker, or post the call to worker {})",
        operation, here, impl->owner_worker, impl->owner_worker);
  }
#endif
}

// A call's records (its reply, context, wait) live on the calling fiber's stack and the
// connection's reader fills them while it is parked: never on a shared stack, whose bytes move.
void check_own_stack(const char* operation) {
  if (tern::detail::parks_off_stack()) {
    TERN_FATAL(
        "tern::rpc::Channel::{} called from a shared-stack fiber (StackMode::shared): a call's "
        "state lives on the caller's stack while the reply arrives; call from a fiber with a "
        "stack of its own (docs/guide.md, \"Shared stacks\")",
        operation);
  }
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

namespace {

// A channel's shared state with `options` applied, before it has endpoints.
std::unique_ptr<Channel::Impl> new_channel(ChannelOptions options) {
  if (Runtime::current() == nullptr) {
    TERN_FATAL(
        "tern::rpc::Channel::open called outside a tern::Runtime: call it from a fiber (inside "
        "Runtime::run)");
  }
  detail::route_protobuf_logs();
  auto impl = std::make_unique<Channel::Impl>();
  impl->owner_worker = this_worker::index();
  impl->limits.max_frame_size = options.max_frame_size;
  impl->limits.max_metadata_size = options.max_metadata_size;
  if (options.connections_per_endpoint == 0) options.connections_per_endpoint = 1;
  impl->retry_budget = detail::RetryBudget(options.retry_budget);
  impl->options = std::move(options);
  impl->tls = impl->options.tls;
  if (!impl->options.bearer_token.empty())
    impl->authorization = "Bearer " + impl->options.bearer_token;
  impl->authorizes = !impl->authorization.empty();
  return impl;
}

// Takes "tls://" off the targets; if one had it and the options hold no TLS context, gives the
// channel one trusting the system's CA bundle. Fails for a server context.
Result<void> set_up_tls(Channel::Impl& impl, std::vector<EndpointSpec>& targets) {
  constexpr std::string_view kTls = "tls://";
  bool asked = false;
  for (EndpointSpec& spec : targets) {
    if (!spec.address.starts_with(kTls)) continue;
    spec.address.erase(0, kTls.size());
    asked = true;
  }
  if (impl.tls.is_valid() && impl.tls.is_server()) {
    return std::unexpected(Status(StatusCode::invalid_argument,
                                  "ChannelOptions::tls holds a server context, not a client one"));
  }
  if (asked && !impl.tls.is_valid()) {
    tern::Result<tls::TlsContext> context = tls::TlsContext::client({});
    if (!context) {
      return std::unexpected(
          Status(StatusCode::unavailable, "no TLS client context: " + context.error().message()));
    }
    impl.tls = std::move(*context);
  }
  return {};
}

}  // namespace

Result<Channel> Channel::open(std::string_view targets, ChannelOptions options) {
  if (targets.starts_with("etcd://")) {
    std::unique_ptr<Impl> impl = new_channel(std::move(options));
    Result<detail::EtcdTarget> target =
        detail::parse_etcd_target(targets, impl->options.etcd_prefix);
    if (!target) return std::unexpected(target.error());
    auto client = std::make_unique<detail::EtcdClient>(target->etcd, impl->options.etcd_timeout);
    Result<detail::EtcdRange> listed = client->range_prefix(target->key_prefix);
    if (!listed) {
      return std::unexpected(Status(
          listed.error().code(),
          fmt::format("listing '{}' in etcd: {}", target->service, listed.error().message())));
    }
    detail::register_channel(*impl);
    detail::set_endpoints(*impl, detail::endpoints_of(listed->kvs));
    client->set_stop_flag(&impl->closing);
    detail::start_reaper(*impl);
    impl->naming = spawn(
        [channel = impl.get(), client = std::move(client), target = std::move(*target),
         revision = listed->revision, kvs = std::move(listed->kvs)]() mutable {
          detail::follow_etcd(*channel, *client, target, revision, std::move(kvs));
        },
        {.name = "rpc etcd naming"});
    return Channel(std::move(impl));
  }
  std::vector<EndpointSpec> specs;
  std::string_view rest = targets;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view target = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (target.empty()) continue;
    specs.push_back({.address = std::string(target)});
  }
  if (specs.empty()) {
    return std::unexpected(
        Status(StatusCode::invalid_argument, fmt::format("no endpoint in '{}'", targets)));
  }
  return open(specs, std::move(options));
}

Result<Channel> Channel::open(std::span<const EndpointSpec> specs, ChannelOptions options) {
  std::unique_ptr<Impl> impl = new_channel(std::move(options));
  std::vector<EndpointSpec> targets(specs.begin(), specs.end());
  for (EndpointSpec& spec : targets) spec.address = std::string(trim(spec.address));
  if (Result<void> tls = set_up_tls(*impl, targets); !tls) return std::unexpected(tls.error());
  Result<std::vector<detail::ResolvedEndpoint>> found =
      detail::resolve_targets(targets, impl->options.resolver);
  if (!found) return std::unexpected(found.error());
  if (found->empty()) {
    return std::unexpected(Status(StatusCode::invalid_argument, "no endpoint given"));
  }
  detail::register_channel(*impl);
  detail::set_endpoints(*impl, std::move(*found));
  const bool named = std::any_of(targets.begin(), targets.end(), [](const EndpointSpec& spec) {
    return spec.address.starts_with("dns://");
  });
  if (named && impl->options.dns_refresh_interval.count() > 0) {
    detail::start_reaper(*impl);
    impl->naming = spawn(
        [channel = impl.get(), targets = std::move(targets)]() mutable {
          detail::follow_dns(*channel, std::move(targets));
        },
        {.name = "rpc dns naming"});
  }
  return Channel(std::move(impl));
}

Channel::Channel(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
Channel::Channel(Channel&&) noexcept = default;
Channel& Channel::operator=(Channel&& other) noexcept {
  if (this != &other) {
    close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
Channel::~Channel() { close(); }

void Channel::close() {
  if (!impl_ || impl_->closing) return;
  TERN_ASSERT(this_worker::index() == impl_->owner_worker,
              "rpc::Channel closed from another worker than the one that opened it");
  impl_->closing = true;
  detail::stop_naming(*impl_);
  detail::unregister_channel(*impl_);
  detail::stop_health_checks(*impl_);
  const Status closed(StatusCode::cancelled, "the channel was closed");
  for (auto& endpoint : impl_->endpoints) {
    for (auto& connection : endpoint->connections) connection->close(closed);
  }
  while (!impl_->async_calls.wait()) this_fiber::yield();
}

void Channel::start_async(std::move_only_function<void()> body) {
  check_worker(impl_.get(), "call_async");
  impl_->async_calls.add();
  spawn([impl = impl_.get(), body = std::move(body)]() mutable {
    body();
    impl->async_calls.done();
  }).detach();
}

namespace {

bool is_excluded(std::span<detail::Endpoint* const> excluded, const detail::Endpoint* endpoint) {
  return std::find(excluded.begin(), excluded.end(), endpoint) != excluded.end();
}

// A wait-for-ready call's wait: until a connection to an endpoint not in `excluded` is ready, the
// deadline passes (deadline_exceeded), the call is cancelled through `call` or its fiber is
// interrupted, or the channel closes (cancelled). Connections changing state wake `call.done`.
detail::ClientConnection* wait_until_ready(Channel::Impl& impl, const ClientContext& context,
                                           std::span<detail::Endpoint* const> excluded,
                                           Deadline deadline, detail::PendingCall& call,
                                           Status& why) {
  impl.ready_waiters.push_back(&call.done);
  struct Unregister {
    Channel::Impl& impl;
    Event& done;
    ~Unregister() {
      std::erase(impl.ready_waiters, &done);
      done.reset();
    }
  } unregister{impl, call.done};
  for (;;) {
    call.done.reset();
    if (detail::ClientConnection* c =
            detail::pick_connection(impl, context.call_key_hash(), excluded)) {
      return c;
    }
    if (impl.closing) {
      why = Status(StatusCode::cancelled, "the channel was closed");
      return nullptr;
    }
    if (call.cancelled) {
      why = Status(StatusCode::cancelled, "the call was cancelled");
      return nullptr;
    }
    tern::Result<void> woken = call.done.wait_until(deadline);
    if (woken) continue;
    if (woken.error() != std::errc::timed_out) {
      why = Status(StatusCode::cancelled, "the calling fiber was interrupted");
      return nullptr;
    }
    std::string last_error;
    for (auto& endpoint : impl.endpoints) {
      if (is_excluded(excluded, endpoint.get())) continue;
      for (auto& c : endpoint->connections) {
        if (!c->last_error().empty()) last_error = c->last_error();
      }
    }
    why = Status(
        StatusCode::deadline_exceeded,
        last_error.empty()
            ? std::string("no connection became ready before the deadline")
            : fmt::format("no connection became ready before the deadline ({})", last_error));
    return nullptr;
  }
}

// Waits for a ready connection: a wait-for-ready call until its deadline (while some endpoint is
// left to try), any other while some endpoint is still making its first attempt.
detail::ClientConnection* wait_for_connection(Channel::Impl& impl, const ClientContext& context,
                                              std::span<detail::Endpoint* const> excluded,
                                              Deadline deadline, detail::PendingCall& call,
                                              Status& why) {
  if (context.wait_for_ready() &&
      std::any_of(impl.endpoints.begin(), impl.endpoints.end(),
                  [&](const auto& endpoint) { return !is_excluded(excluded, endpoint.get()); })) {
    return wait_until_ready(impl, context, excluded, deadline, call, why);
  }
  // Set only once no connection is ready (most calls find one at once).
  Deadline give_up = kNoDeadline;
  bool give_up_set = false;
  for (;;) {
    if (detail::ClientConnection* c =
            detail::pick_connection(impl, context.call_key_hash(), excluded)) {
      return c;
    }
    if (!give_up_set) {
      give_up = std::min(deadline, deadline_after(impl.options.reconnect.attempt_timeout));
      give_up_set = true;
    }
    bool connecting = false;
    std::string last_error;
    for (auto& endpoint : impl.endpoints) {
      if (std::find(excluded.begin(), excluded.end(), endpoint.get()) != excluded.end()) continue;
      connecting = connecting || endpoint->connecting();
      for (auto& c : endpoint->connections) {
        if (!c->last_error().empty()) last_error = c->last_error();
      }
    }
    if (impl.closing) {
      why = Status(StatusCode::cancelled, "the channel was closed");
      return nullptr;
    }
    if (!connecting || Clock::now() >= give_up) {
      why = Status(StatusCode::unavailable,
                   last_error.empty() ? std::string("no connection is ready") : last_error);
      return nullptr;
    }
    impl.state_changed.reset();
    if (detail::pick_connection(impl, context.call_key_hash(), excluded) != nullptr) continue;
    if (!impl.state_changed.wait_until(give_up)) {
      if (Clock::now() < give_up) {
        why = Status(StatusCode::cancelled, "the calling fiber was interrupted");
        return nullptr;
      }
    }
  }
}

// The metadata of the request this thread is sending. A call fills and encodes it without a
// suspension in between, so the fibers of one worker share one, which stays in cache however
// many channels the worker has.
wire::Metadata& request_metadata() {
  thread_local wire::Metadata metadata;
  return metadata;
}

void fill_request_metadata(wire::Metadata& metadata, const ClientContext& context,
                           std::string_view service, std::string_view method, Deadline deadline,
                           const std::string* authorization) {
  metadata.Clear();
  metadata.set_service(service.data(), service.size());
  metadata.set_method(method.data(), method.size());
  if (deadline != kNoDeadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
    metadata.set_timeout_us(left > 0 ? static_cast<std::uint64_t>(left) : 1);
  }
  bool authorized = authorization == nullptr;
  for (const auto& [key, value] : context.metadata()) {
    wire::MetadataEntry* entry = metadata.add_entries();
    entry->set_key(key);
    entry->set_value(value);
    authorized = authorized || key == "authorization";
  }
  if (!authorized) {
    wire::MetadataEntry* entry = metadata.add_entries();
    entry->set_key("authorization");
    entry->set_value(*authorization);
  }
}

Deadline call_deadline(const Channel::Impl& impl, const ClientContext& context) {
  if (context.deadline() != kNoDeadline) return context.deadline();
  if (impl.options.default_timeout.count() > 0) {
    return deadline_after(impl.options.default_timeout);
  }
  return kNoDeadline;
}

}  // namespace

Status Channel::call(ClientContext& context, std::string_view service, std::string_view method,
                     const google::protobuf::MessageLite& request,
                     google::protobuf::MessageLite& reply) {
  check_worker(impl_.get(), "call");
  check_own_stack("call");
  return call_on(*impl_, context, service, method, request, reply);
}

namespace {

// One request of a call in flight: the first, a retry or a hedge.
struct Attempt {
  detail::PendingCall call;
  detail::ClientConnection* connection = nullptr;
  Clock::time_point sent{};
  std::unique_ptr<google::protobuf::MessageLite> own_reply;  // a hedge's, until it wins
  bool ended = false;  // its endpoint has been told how it went
};

void end_attempt(Channel::Impl& impl, Attempt& attempt, detail::AttemptOutcome outcome) {
  if (attempt.ended) return;
  attempt.ended = true;
  if (!attempt.call.finished) attempt.connection->forget(attempt.call);
  detail::attempt_ended(impl, attempt.connection->endpoint(), attempt.sent, outcome);
}

// Sends `attempt` on `connection`; false when the connection closed first.
bool send_attempt(Channel::Impl& impl, ClientContext& context, Attempt& attempt,
                  detail::ClientConnection& connection, std::string_view service,
                  std::string_view method, const google::protobuf::MessageLite& request,
                  Deadline deadline) {
  wire::Metadata& metadata = request_metadata();
  fill_request_metadata(metadata, context, service, method, deadline,
                        impl.authorizes ? &impl.authorization : nullptr);
  if (!connection.send(&attempt.call, detail::FrameType::request, metadata, request,
                       context.compression())) {
    return false;
  }
  attempt.connection = &connection;
  attempt.sent = detail::attempt_sent(impl, connection.endpoint());
  return true;
}

}  // namespace

Status Channel::call_on(Impl& impl, ClientContext& context, std::string_view service,
                        std::string_view method, const google::protobuf::MessageLite& request,
                        google::protobuf::MessageLite& reply) {
  ++impl.stats.calls;
  context.reply_metadata_.clear();
  context.attempts_ = 0;
  const Deadline deadline = call_deadline(impl, context);
  const bool cluster = impl.endpoints.size() > 1;
  if (cluster) impl.retry_budget.on_call(Clock::now());
  // A handler's call to another service is cancelled with the handler's own call.
  ServerContext* parent = context.parent();
  if (parent != nullptr) parent->add_downstream(context);
  std::vector<detail::Endpoint*> excluded;
  // A call that is not idempotent is sent again only when it never ran (refused or left unanswered
  // past a stopping server's goaway) or was never sent.
  bool unprocessed = false;
  const HedgingOptions& hedging = impl.options.hedging;
  // A hedged call sends a backup after `delay` (none while it is 0).
  const std::chrono::nanoseconds delay = cluster && context.idempotent() && hedging.max_hedges > 0
                                             ? detail::hedge_delay(hedging, impl.latencies)
                                             : std::chrono::nanoseconds(0);
  const bool hedged = delay.count() > 0;
  Status status;
  // The options are read only for a second attempt (most calls end after the first).
  for (unsigned attempt = 0; attempt == 0 || attempt < 1 + impl.options.max_retries; ++attempt) {
    if (attempt > 0 && !context.idempotent() && !unprocessed) break;
    unprocessed = false;
    if (context.cancelled_ || (context.parent() != nullptr && context.parent()->cancelled())) {
      context.cancelled_ = true;
      status = Status(StatusCode::cancelled, "the call was cancelled");
      break;
    }
    if (impl.closing) {
      status = Status(StatusCode::cancelled, "the channel was closed");
      break;
    }
    if (attempt > 0 && cluster && !impl.retry_budget.try_spend(Clock::now())) {
      ++impl.stats.retries_throttled;
      detail::cluster_metrics().retries_throttled.add();
      break;  // the last attempt's status stands
    }
    Attempt first;
    first.call.reply = &reply;
    first.call.context = &context;
    context.active_ = &first.call;  // context.cancel() reaches the call from here on
    detail::ClientConnection* connection =
        wait_for_connection(impl, context, excluded, deadline, first.call, status);
    if (connection != nullptr && first.call.cancelled) {  // while it waited for the connection
      connection = nullptr;
      status = Status(StatusCode::cancelled, "the call was cancelled");
    }
    if (connection == nullptr) {
      context.active_ = nullptr;
      break;
    }
    ++context.attempts_;
    if (attempt > 0) {
      ++impl.stats.retries;
      detail::cluster_metrics().retries.add();
    }
    context.peer_ = connection->endpoint().name;
    if (!send_attempt(impl, context, first, *connection, service, method, request, deadline)) {
      context.active_ = nullptr;
      status = Status(StatusCode::unavailable, "the connection closed before the call was sent");
      excluded.push_back(&connection->endpoint());
      unprocessed = true;  // never sent: another endpoint may take it, idempotent or not
      continue;
    }
    // Waits for the first reply; a hedged call sends a backup each time `delay` passes without
    // one, and all its requests wake `any`.
    Event any;
    std::vector<std::unique_ptr<Attempt>> backups;
    if (hedged) first.call.also = &any;
    Clock::time_point next_hedge = hedged ? Clock::now() + delay : Clock::time_point::max();
    Attempt* winner = nullptr;
    bool interrupted = false;
    auto each = [&](auto&& body) {
      body(first);
      for (auto& backup : backups) body(*backup);
    };
    for (;;) {
      if (hedged) any.reset();
      // A request whose connection broke while another is still waiting does not end the call.
      each([&](Attempt& a) {
        if (winner != nullptr || a.ended || !a.call.finished) return;
        bool others_waiting = false;
        each([&](Attempt& b) { others_waiting = others_waiting || (&b != &a && !b.ended); });
        if (a.call.transport_failure && others_waiting) {
          excluded.push_back(&a.connection->endpoint());
          end_attempt(impl, a, detail::AttemptOutcome::failure);
          return;
        }
        winner = &a;
      });
      if (winner != nullptr || first.call.cancelled) break;
      const bool may_hedge = hedged && backups.size() < hedging.max_hedges;
      const Deadline wake = may_hedge ? std::min(deadline, next_hedge) : deadline;
      tern::Result<void> woken = (hedged ? any : first.call.done).wait_until(wake);
      if (woken) continue;
      if (woken.error() != std::errc::timed_out) {
        interrupted = true;
        break;
      }
      if (!may_hedge || Clock::now() >= deadline) break;
      // No reply within the hedging delay: the same call to another endpoint.
      next_hedge = Clock::time_point::max();
      if (!impl.retry_budget.try_spend(Clock::now())) {
        ++impl.stats.retries_throttled;
        detail::cluster_metrics().retries_throttled.add();
        continue;
      }
      std::vector<detail::Endpoint*> busy = excluded;
      each([&](Attempt& a) { busy.push_back(&a.connection->endpoint()); });
      detail::ClientConnection* other =
          detail::pick_connection(impl, context.call_key_hash(), busy);
      if (other == nullptr) continue;
      auto backup = std::make_unique<Attempt>();
      backup->call.context = &context;
      backup->call.also = &any;
      backup->own_reply.reset(reply.New());
      backup->call.reply = backup->own_reply.get();
      if (!send_attempt(impl, context, *backup, *other, service, method, request, deadline)) {
        continue;
      }
      ++impl.stats.hedges;
      detail::cluster_metrics().hedges.add();
      ++context.attempts_;
      backups.push_back(std::move(backup));
      next_hedge = Clock::now() + delay;
    }
    context.active_ = nullptr;
    // The requests that lost (or all of them, at the deadline or on cancellation) are
    // withdrawn; the server is told.
    const bool gave_up = winner == nullptr && !first.call.cancelled && !interrupted;
    each([&](Attempt& a) {
      if (&a == winner) return;
      if (a.call.finished && !a.ended) {
        end_attempt(impl, a, detail::outcome_of(a.call.status));
      } else {
        end_attempt(impl, a,
                    gave_up ? detail::AttemptOutcome::failure : detail::AttemptOutcome::abandoned);
      }
    });
    if (winner != nullptr) {
      status = std::move(winner->call.status);
      end_attempt(impl, *winner,
                  winner->call.transport_failure ? detail::AttemptOutcome::failure
                                                 : detail::outcome_of(status));
      if (winner != &first) {
        ++impl.stats.hedge_wins;
        detail::cluster_metrics().hedge_wins.add();
        context.peer_ = winner->connection->endpoint().name;
        if (status.ok()) {
          reply.Clear();
          reply.CheckTypeAndMergeFrom(*winner->own_reply);
        }
      }
      // A broken connection, or a server that answers unavailable (it is stopping or cannot
      // serve): another endpoint may serve the call.
      if (status == StatusCode::unavailable) {
        excluded.push_back(&winner->connection->endpoint());
        unprocessed = winner->call.unprocessed;
        continue;  // retried while attempts remain (idempotent calls, or refused unrun)
      }
      break;
    }
    if (first.call.cancelled || interrupted) {
      context.cancelled_ = true;
      status = Status(StatusCode::cancelled, "the call was cancelled");
    } else {
      status = Status(StatusCode::deadline_exceeded,
                      fmt::format("no reply from {} before the deadline", context.peer_));
    }
    break;
  }
  if (parent != nullptr) parent->remove_downstream(context);
  if (!status.ok()) ++impl.stats.failed_calls;
  return status;
}

detail::ClientConnection* Channel::connection_for_one_attempt(Impl& impl, ClientContext& context,
                                                              Deadline deadline,
                                                              std::string_view cancelled,
                                                              Status& why) {
  detail::PendingCall gate;  // context.cancel() ends a wait for a connection through it
  context.active_ = &gate;
  detail::ClientConnection* connection =
      wait_for_connection(impl, context, {}, deadline, gate, why);
  context.active_ = nullptr;
  if (connection != nullptr && (gate.cancelled || context.cancelled_)) {
    why = Status(StatusCode::cancelled, std::string(cancelled));
    return nullptr;
  }
  if (connection != nullptr) context.peer_ = connection->endpoint().name;
  return connection;
}

Status Channel::notify(ClientContext& context, std::string_view service, std::string_view method,
                       const google::protobuf::MessageLite& request) {
  check_worker(impl_.get(), "notify");
  check_own_stack("notify");
  Impl& impl = *impl_;
  ++impl.stats.calls;
  Status status;
  const Deadline deadline = call_deadline(impl, context);
  detail::ClientConnection* connection =
      connection_for_one_attempt(impl, context, deadline, "the call was cancelled", status);
  if (connection == nullptr) {
    ++impl.stats.failed_calls;
    return status;
  }
  wire::Metadata& metadata = request_metadata();
  fill_request_metadata(metadata, context, service, method, deadline,
                        impl.authorizes ? &impl.authorization : nullptr);
  if (!connection->send(nullptr, detail::FrameType::one_way, metadata, request,
                        context.compression())) {
    ++impl.stats.failed_calls;
    return Status(StatusCode::unavailable, "the connection closed before the call was sent");
  }
  return Status();
}

StreamCall Channel::open_stream(ClientContext& context, std::string_view service,
                                std::string_view method) {
  check_worker(impl_.get(), "open_stream");
  check_own_stack("open_stream");
  Impl& impl = *impl_;
  ++impl.stats.streams;
  Status status;
  const Deadline deadline = call_deadline(impl, context);
  detail::ClientConnection* connection = connection_for_one_attempt(
      impl, context, deadline, "the stream was cancelled before it opened", status);
  if (connection == nullptr) return StreamCall(std::move(status));
  wire::Metadata& metadata = request_metadata();
  fill_request_metadata(metadata, context, service, method, deadline,
                        impl.authorizes ? &impl.authorization : nullptr);
  std::shared_ptr<detail::Stream> stream = connection->open_stream(metadata, deadline);
  if (!stream) {
    return StreamCall(
        Status(StatusCode::unavailable, "the connection closed before the stream opened"));
  }
  return StreamCall(std::move(stream), true);
}

Status Channel::wait_connected(Deadline deadline) {
  check_worker(impl_.get(), "wait_connected");
  check_own_stack("wait_connected");
  for (;;) {
    if (impl_->closing) return Status(StatusCode::cancelled, "the channel was closed");
    impl_->state_changed.reset();
    if (detail::pick_connection(*impl_, std::nullopt, {}) != nullptr) return Status();
    if (!impl_->state_changed.wait_until(deadline)) {
      return Status(StatusCode::unavailable, "no connection became ready before the deadline");
    }
  }
}

ChannelStats Channel::stats() const {
  check_worker(impl_.get(), "stats");
  ChannelStats stats = impl_->stats;
  stats.connected = 0;
  stats.ejected = detail::ejected_endpoints(*impl_);
  for (auto& endpoint : impl_->endpoints) {
    if (!endpoint->healthy) ++stats.unhealthy;
    for (auto& connection : endpoint->connections) {
      if (connection->state() == detail::ClientConnection::State::ready) ++stats.connected;
    }
  }
  return stats;
}

std::vector<EndpointStatus> Channel::endpoint_status() const {
  check_worker(impl_.get(), "endpoint_status");
  return detail::endpoint_status(*impl_);
}

std::vector<std::string> Channel::endpoints() const {
  check_worker(impl_.get(), "endpoints");
  std::vector<std::string> names;
  for (auto& endpoint : impl_->endpoints) names.push_back(endpoint->name);
  return names;
}

}  // namespace tern::rpc
