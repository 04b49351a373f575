// Code that protoc-gen-tern generated through tern_add_proto, in a project outside tern's tree:
// the service answers one call handed to it the way the server would (no network).
#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <utility>

#include "hello.tern.h"

namespace {

// Says hello.
class Hello final : public consumer::HelloBase {
 public:
  tern::rpc::Status Say(tern::rpc::ServerContext&, const consumer::HelloRequest& request,
                        consumer::HelloReply& reply) override {
    reply.set_text("hello, " + request.name());
    return {};
  }
};

// One call: a fixed request body in, the encoded reply out.
class Call final : public tern::rpc::UnaryCall {
 public:
  explicit Call(std::string body) : body_(std::move(body)) {}
  std::span<const std::byte> request() const noexcept override {
    return std::as_bytes(std::span(body_.data(), body_.size()));
  }
  void reply(const google::protobuf::MessageLite& message) override {
    message.SerializeToString(&reply_);
  }
  const std::string& encoded_reply() const { return reply_; }

 private:
  std::string body_;
  std::string reply_;
};

}  // namespace

int main() {
  Hello hello;
  consumer::HelloRequest request;
  request.set_name("consumer");
  Call call(request.SerializeAsString());
  tern::rpc::ServerContext context;
  const tern::rpc::Status status = hello.methods()[0].invoke(hello, context, call);
  consumer::HelloReply reply;
  if (!status.ok() || !reply.ParseFromString(call.encoded_reply()) ||
      reply.text() != "hello, consumer" || hello.service_name() != "consumer.Hello") {
    std::fprintf(stderr, "rpc_consumer: unexpected answer (%s)\n", status.to_string().c_str());
    return 1;
  }
  std::printf("rpc_consumer: %s answered \"%s\"\n", std::string(hello.service_name()).c_str(),
              reply.text().c_str());
  return 0;
}
