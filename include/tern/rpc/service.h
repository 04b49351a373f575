#pragma once

#include <google/protobuf/arena.h>
#include <tern/rpc/server_context.h>
#include <tern/rpc/status.h>

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace google::protobuf {
class MessageLite;
}

namespace tern::rpc {

class Service;

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

// A method of a service: its name as in the .proto file and how to invoke it.
struct Method {
  std::string_view name;
  MethodInvoker invoke;
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

// Bytes of the fiber's stack that a call's messages are allocated from before the heap.
inline constexpr std::size_t kCallArenaBytes = 4096;

// The invoker of a unary method, for generated code: Request and Reply are protobuf messages,
// Handler the service's member function `Status (ServerContext&, const Request&, Reply&)`. Both
// messages live on an arena whose first block is on the handler fiber's stack, so a call's
// strings and submessages cost no malloc or free up to kCallArenaBytes.
template <typename ServiceClass, typename Request, typename Reply,
          Status (ServiceClass::*Handler)(ServerContext&, const Request&, Reply&)>
Status invoke_unary(Service& service, ServerContext& context, UnaryCall& call) {
  alignas(std::max_align_t) char first_block[kCallArenaBytes];
  google::protobuf::ArenaOptions options;
  options.initial_block = first_block;
  options.initial_block_size = sizeof first_block;
  google::protobuf::Arena arena(options);
  const std::span<const std::byte> body = call.request();
  Request& request = *google::protobuf::Arena::CreateMessage<Request>(&arena);
  if (!request.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    return invalid_request(request.GetTypeName(), body.size());
  }
  Reply& reply = *google::protobuf::Arena::CreateMessage<Reply>(&arena);
  Status status = (static_cast<ServiceClass&>(service).*Handler)(context, request, reply);
  if (status.ok() && !context.one_way()) call.reply(reply);
  return status;
}

}  // namespace tern::rpc
