#include "tern/rpc/channel.h"

#include <google/protobuf/message_lite.h>

#include <fmt/format.h>
#include <algorithm>

#include "client_connection.h"
#include "load_balancer.h"
#include "protobuf_log.h"
#include "tern/fiber/runtime.h"
#include "tern/net/address.h"

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

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The addresses `target` names: a numeric address as is, a name (with or without dns://) as
// everything it resolves to. Text that is not an address fails invalid_argument with
// Address::parse's explanation; a name that does not resolve (now) fails unavailable with the
// resolver's text.
Result<std::vector<net::Address>> addresses_of(std::string_view target) {
  constexpr std::string_view kDns = "dns://";
  if (target.starts_with(kDns)) target.remove_prefix(kDns.size());
  tern::Result<std::vector<net::Address>> found = net::resolve(target);
  if (found) return std::move(*found);
  if (found.error() == std::errc::invalid_argument) {
    // The explanation quotes the target: "bad target '1.2.3.4:99999': port '99999' is ...".
    return std::unexpected(
        Status(StatusCode::invalid_argument, "bad target " + found.error().message()));
  }
  return std::unexpected(Status(StatusCode::unavailable, found.error().message()));
}

}  // namespace

Result<Channel> Channel::open(std::string_view targets, ChannelOptions options) {
  if (Runtime::current() == nullptr) {
    TERN_FATAL(
        "tern::rpc::Channel::open called outside a tern::Runtime: call it from a fiber (inside "
        "Runtime::run)");
  }
  detail::route_protobuf_logs();
  auto impl = std::make_unique<Impl>();
  impl->owner_worker = this_worker::index();
  impl->limits.max_frame_size = options.max_frame_size;
  impl->limits.max_metadata_size = options.max_metadata_size;
  if (options.connections_per_endpoint == 0) options.connections_per_endpoint = 1;
  impl->options = std::move(options);
  std::string_view rest = targets;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    std::string_view target = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (target.empty()) continue;
    Result<std::vector<net::Address>> addresses = addresses_of(target);
    if (!addresses) return std::unexpected(addresses.error());
    for (const net::Address& address : *addresses) {
      const bool known = std::any_of(impl->endpoints.begin(), impl->endpoints.end(),
                                     [&](const auto& e) { return e->address == address; });
      if (known) continue;
      auto endpoint = std::make_unique<detail::Endpoint>();
      endpoint->address = address;
      endpoint->name = address.to_string();
      impl->endpoints.push_back(std::move(endpoint));
    }
  }
  if (impl->endpoints.empty()) {
    return std::unexpected(
        Status(StatusCode::invalid_argument, fmt::format("no endpoint in '{}'", targets)));
  }
  detail::build_ring(*impl);
  for (auto& endpoint : impl->endpoints) {
    for (std::size_t i = 0; i < impl->options.connections_per_endpoint; ++i) {
      endpoint->connections.push_back(
          std::make_unique<detail::ClientConnection>(*impl, *endpoint, i));
    }
  }
  impl->stats.endpoints = impl->endpoints.size();
  if (impl->endpoints.size() == 1 && impl->endpoints[0]->connections.size() == 1)
    impl->only_connection = impl->endpoints[0]->connections[0].get();
  for (auto& endpoint : impl->endpoints) {
    for (auto& connection : endpoint->connections) connection->start();
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
  const Deadline give_up =
      std::min(deadline, deadline_after(impl.options.reconnect.attempt_timeout));
  for (;;) {
    if (detail::ClientConnection* c =
            detail::pick_connection(impl, context.call_key_hash(), excluded)) {
      return c;
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
                           std::string_view service, std::string_view method, Deadline deadline) {
  metadata.Clear();
  metadata.set_service(service.data(), service.size());
  metadata.set_method(method.data(), method.size());
  if (deadline != kNoDeadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
    metadata.set_timeout_us(left > 0 ? static_cast<std::uint64_t>(left) : 1);
  }
  for (const auto& [key, value] : context.metadata()) {
    wire::MetadataEntry* entry = metadata.add_entries();
    entry->set_key(key);
    entry->set_value(value);
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
  return call_on(*impl_, context, service, method, request, reply);
}

Status Channel::call_on(Impl& impl, ClientContext& context, std::string_view service,
                        std::string_view method, const google::protobuf::MessageLite& request,
                        google::protobuf::MessageLite& reply) {
  ++impl.stats.calls;
  context.reply_metadata_.clear();
  context.attempts_ = 0;
  const Deadline deadline = call_deadline(impl, context);
  std::vector<detail::Endpoint*> excluded;
  const unsigned attempts = 1 + (context.idempotent() ? impl.options.max_retries : 0);
  Status status;
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    if (context.cancelled_) {
      status = Status(StatusCode::cancelled, "the call was cancelled");
      break;
    }
    if (impl.closing) {
      status = Status(StatusCode::cancelled, "the channel was closed");
      break;
    }
    detail::PendingCall call;
    call.reply = &reply;
    call.context = &context;
    context.active_ = &call;  // context.cancel() reaches the call from here on
    detail::ClientConnection* connection =
        wait_for_connection(impl, context, excluded, deadline, call, status);
    if (connection != nullptr && call.cancelled) {  // while it waited for the connection
      connection = nullptr;
      status = Status(StatusCode::cancelled, "the call was cancelled");
    }
    if (connection == nullptr) {
      context.active_ = nullptr;
      break;
    }
    ++context.attempts_;
    if (attempt > 0) ++impl.stats.retries;
    context.peer_ = connection->endpoint().name;
    wire::Metadata& metadata = request_metadata();
    fill_request_metadata(metadata, context, service, method, deadline);
    if (!connection->send(&call, detail::FrameType::request, metadata, request,
                          context.compression())) {
      context.active_ = nullptr;
      status = Status(StatusCode::unavailable, "the connection closed before the call was sent");
      excluded.push_back(&connection->endpoint());
      continue;
    }
    bool interrupted = false;
    while (!call.finished && !call.cancelled) {
      tern::Result<void> woken = call.done.wait_until(deadline);
      if (!woken) {
        interrupted = woken.error() != std::errc::timed_out;
        break;
      }
    }
    context.active_ = nullptr;
    if (call.finished) {
      status = std::move(call.status);
      if (status == StatusCode::unavailable && call.transport_failure) {
        excluded.push_back(&connection->endpoint());
        continue;  // retried only while attempts remain (idempotent calls)
      }
      break;
    }
    connection->forget(call);
    if (call.cancelled || interrupted) {
      context.cancelled_ = true;
      status = Status(StatusCode::cancelled, "the call was cancelled");
    } else {
      status = Status(StatusCode::deadline_exceeded,
                      fmt::format("no reply from {} before the deadline", context.peer_));
    }
    break;
  }
  if (!status.ok()) ++impl.stats.failed_calls;
  return status;
}

Status Channel::notify(ClientContext& context, std::string_view service, std::string_view method,
                       const google::protobuf::MessageLite& request) {
  check_worker(impl_.get(), "notify");
  Impl& impl = *impl_;
  ++impl.stats.calls;
  Status status;
  const Deadline deadline = call_deadline(impl, context);
  detail::PendingCall gate;  // context.cancel() ends a wait for a connection through it
  context.active_ = &gate;
  detail::ClientConnection* connection =
      wait_for_connection(impl, context, {}, deadline, gate, status);
  context.active_ = nullptr;
  if (connection != nullptr && gate.cancelled) {
    connection = nullptr;
    status = Status(StatusCode::cancelled, "the call was cancelled");
  }
  if (connection == nullptr) {
    ++impl.stats.failed_calls;
    return status;
  }
  context.peer_ = connection->endpoint().name;
  wire::Metadata& metadata = request_metadata();
  fill_request_metadata(metadata, context, service, method, deadline);
  if (!connection->send(nullptr, detail::FrameType::one_way, metadata, request,
                        context.compression())) {
    ++impl.stats.failed_calls;
    return Status(StatusCode::unavailable, "the connection closed before the call was sent");
  }
  return Status();
}

Status Channel::wait_connected(Deadline deadline) {
  check_worker(impl_.get(), "wait_connected");
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
  for (auto& endpoint : impl_->endpoints) {
    for (auto& connection : endpoint->connections) {
      if (connection->state() == detail::ClientConnection::State::ready) ++stats.connected;
    }
  }
  return stats;
}

std::vector<std::string> Channel::endpoints() const {
  check_worker(impl_.get(), "endpoints");
  std::vector<std::string> names;
  for (auto& endpoint : impl_->endpoints) names.push_back(endpoint->name);
  return names;
}

}  // namespace tern::rpc
