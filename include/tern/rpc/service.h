#pragma once

#include <tern/rpc/server_context.h>
#include <tern/rpc/status.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc {

class Service;
class StreamCall;

// One call as the server hands it to a method: the request bytes in, the reply out. The server
// implements it; generated code uses it. Handler fiber only.
class UnaryCall {
 public:
  // The request body (decompressed), valid until the call ends.
  virtual std::span<const std::byte> request() const noexcept = 0;
  // Encodes the reply; called at most once, while `message` is alive.
  virtual void reply(const google::protobuf::MessageLite& message) = 0;

 protected:
  ~UnaryCall() = default;
};

// Parses the request, runs the handler and encodes its reply.
using MethodInvoker = Status (*)(Service& service, ServerContext& context, UnaryCall& call);

// Runs a streaming method on its stream (<tern/rpc/stream.h>); the status ends the stream.
using StreamInvoker = Status (*)(Service& service, ServerContext& context, StreamCall& call);

// A method of a service: its name as in the .proto file and how to invoke it: `invoke` for a
// unary method, `invoke_stream` for a streaming one (the other is null).
struct Method {
  std::string_view name;
  MethodInvoker invoke;
  StreamInvoker invoke_stream = nullptr;
};

// A service a Server can host: a name ("package.Service") and its methods. protoc-gen-tern
// generates one subclass per .proto service with a virtual function per method; override those.
// Handlers run in fibers on the worker of the connection, many at once: a service must be safe
// to call from several fibers and, with several workers, from several threads.
class Service {
 public:
  virtual ~Service() = default;
  // The full name, "package.Service".
  virtual std::string_view service_name() const noexcept = 0;
  // Every method, in the order of the .proto file.
  virtual std::span<const Method> methods() const noexcept = 0;
};

// The status of a request body that does not parse as `type_name`. Any thread.
Status invalid_request(std::string_view type_name, std::size_t size);

// The status a generated handler returns when the service does not override it. Any thread.
Status unimplemented_method(std::string_view service, std::string_view method);

namespace detail {

// Messages larger than this when a call ends (encoded) are freed rather than kept for the next
// call, so one large request does not pin its memory in the pool.
inline constexpr std::size_t kSpareMessageBytes = 64 * 1024;
// Spare messages each worker keeps per message type. A handler that does not block holds its
// messages only while it runs, so a few cover a steady stream of calls; the cap bounds what a
// burst of blocked calls leaves behind (at most 64 × 64 KiB encoded per type and worker).
inline constexpr std::size_t kSpareMessages = 64;

// A worker's spare messages of one type. A call takes one and gives it back cleared, so its
// strings and submessages keep their memory for the next call: a steady stream of calls parses
// and builds its messages without malloc or free. Fibers of one worker (the pool is per thread,
// and a fiber never leaves its worker).
template <typename Message>
class SpareMessages {
 public:
  // The calling worker's pool.
  static SpareMessages& here() {
    thread_local SpareMessages pool;
    return pool;
  }
  // A cleared message: a spare one, or a new one when there is none.
  std::unique_ptr<Message> take() {
    if (spare_.empty()) return std::make_unique<Message>();
    std::unique_ptr<Message> message = std::move(spare_.back());
    spare_.pop_back();
    return message;
  }
  // Spare messages held now.
  std::size_t size() const noexcept { return spare_.size(); }
  // Clears message and keeps it for a later take(), unless it is `bytes` long encoded, more than
  // kSpareMessageBytes, or the pool is full (then it is freed).
  void give(std::unique_ptr<Message> message, std::size_t bytes) {
    if (bytes > kSpareMessageBytes || spare_.size() >= kSpareMessages) return;
    message->Clear();
    spare_.push_back(std::move(message));
  }

 private:
  std::vector<std::unique_ptr<Message>> spare_;
};

}  // namespace detail

// The invoker of a unary method, for generated code: Request and Reply are protobuf messages,
// Handler the service's member function `Status (ServerContext&, const Request&, Reply&)`. Both
// messages come from the worker's spare ones (detail::SpareMessages) and go back cleared when
// the call ends, so a call's strings and submessages reuse the memory of the calls before it.
template <typename ServiceClass, typename Request, typename Reply,
          Status (ServiceClass::*Handler)(ServerContext&, const Request&, Reply&)>
Status invoke_unary(Service& service, ServerContext& context, UnaryCall& call) {
  detail::SpareMessages<Request>& requests = detail::SpareMessages<Request>::here();
  const std::span<const std::byte> body = call.request();
  std::unique_ptr<Request> request = requests.take();
  if (!request->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    Status status = invalid_request(request->GetTypeName(), body.size());
    requests.give(std::move(request), body.size());
    return status;
  }
  detail::SpareMessages<Reply>& replies = detail::SpareMessages<Reply>::here();
  std::unique_ptr<Reply> reply = replies.take();
  Status status = (static_cast<ServiceClass&>(service).*Handler)(context, *request, *reply);
  const bool encoded = status.ok() && !context.one_way();
  if (encoded) call.reply(*reply);
  // reply() computed the encoded size; an unsent reply is measured here.
  const std::size_t reply_bytes =
      encoded ? static_cast<std::size_t>(reply->GetCachedSize()) : reply->ByteSizeLong();
  requests.give(std::move(request), body.size());
  replies.give(std::move(reply), reply_bytes);
  return status;
}

}  // namespace tern::rpc
