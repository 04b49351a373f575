#include "server_call.h"

#include <google/protobuf/message_lite.h>

#include <exception>

#include "codec.h"
#include "server_connection.h"
#include "server_state.h"
#include "stream_core.h"

namespace tern::rpc {

bool ServerContext::cancelled() const noexcept {
  return cancelled_ || (connection_closed_ != nullptr && *connection_closed_) ||
         (deadline_ != kNoDeadline && Clock::now() >= deadline_);
}

Status Next::operator()(ServerContext& /*context*/) const { return call_->run_from(index_); }

namespace detail {

ServerCall::ServerCall(ServerConnection& connection, const Server& server, Start start,
                       std::string body, MetadataEntries metadata, std::shared_ptr<Stream> stream)
    : connection_(connection),
      server_(server),
      start_(start),
      body_(std::move(body)),
      stream_(stream ? StreamCall(std::move(stream), false) : StreamCall(Status())) {
  context_.service_ = start.service->service_name();
  context_.method_ = start.method->name;
  context_.deadline_ = start.deadline;
  context_.one_way_ = start.one_way;
  context_.call_id_ = start.call_id;
  context_.peer_identity_ = connection.peer_identity();
  context_.connection_closed_ = connection.closed_flag();
  context_.connection_ = &connection;
  context_.metadata_ = std::move(metadata);
}

std::span<const std::byte> ServerCall::request() const noexcept { return as_bytes(body_); }

void ServerCall::reply(const google::protobuf::MessageLite& message) {
  message.SerializeToString(&reply_);
  replied_ = true;
}

Status ServerCall::run_from(std::size_t index) {
  const std::vector<Interceptor>& chain = server_.state_->interceptors;
  if (index < chain.size()) return chain[index](context_, Next(this, index + 1));
  if (start_.stream) return start_.method->invoke_stream(*start_.service, context_, stream_);
  return start_.method->invoke(*start_.service, context_, *this);
}

void ServerCall::run() {
  Status status;
  try {
    status = run_from(0);
  } catch (const std::exception& e) {
    status = Status(StatusCode::internal, std::string("handler threw: ") + e.what());
  } catch (...) {
    status = Status(StatusCode::internal, "handler threw a non-exception");
  }
  Server::State& state = *server_.state_;
  if (!status.ok()) state.failed_calls.fetch_add(1, std::memory_order_relaxed);
  if (start_.stream) {
    if (status.ok() && start_.deadline != kNoDeadline && Clock::now() >= start_.deadline) {
      status = Status(StatusCode::deadline_exceeded, "the handler finished after the deadline");
    }
    connection_.finish_stream(start_.call_id, status, context_.reply_metadata());
    return;
  }
  if (!start_.one_way) {
    if (status.ok() && start_.deadline != kNoDeadline && Clock::now() >= start_.deadline) {
      status = Status(StatusCode::deadline_exceeded, "the handler finished after the deadline");
    }
    const bool with_body = status.ok() && replied_;
    connection_.send_reply(start_.call_id, status,
                           with_body ? as_bytes(reply_) : std::span<const std::byte>{},
                           context_.reply_metadata(), start_.compressed);
  }
}

}  // namespace detail
}  // namespace tern::rpc
