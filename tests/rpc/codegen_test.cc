// What protoc-gen-tern generates from rpc/protos/codegen_test.proto: service names, method tables
// in .proto order, dispatch through Method::invoke (parse, handler, encode), the answers of
// methods a service does not override and of malformed requests, and the client's signatures.
// No network: calls go through a UnaryCall of the test's own.
#include "codegen_test.tern.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "types/codegen_types.tern.h"

namespace {

namespace codegen = tern::test::codegen;
namespace rpc = tern::rpc;
using tern::test::types::Numbers;
using tern::test::types::Numbers_Sum;

// A call as the server hands it to a method: a fixed request body; the reply is kept encoded.
class TestCall final : public rpc::UnaryCall {
 public:
  explicit TestCall(std::string body) : body_(std::move(body)) {}

  std::span<const std::byte> request() const noexcept override {
    return std::as_bytes(std::span(body_.data(), body_.size()));
  }
  void reply(const google::protobuf::MessageLite& message) override {
    ++replies_;
    ASSERT_TRUE(message.SerializeToString(&reply_));
  }

  int replies() const { return replies_; }
  const std::string& encoded_reply() const { return reply_; }

 private:
  std::string body_;
  std::string reply_;
  int replies_ = 0;
};

// Greeter with Say and Count overridden; Shout keeps the generated answer.
class Greeter final : public codegen::GreeterBase {
 public:
  rpc::Status Say(rpc::ServerContext& context, const codegen::HelloRequest& request,
                  codegen::HelloReply& reply) override {
    ++handled_;
    seen_.push_back({&request, &reply, request.ByteSizeLong(), reply.ByteSizeLong(),
                     request.name().capacity()});
    context.add_reply_metadata("greeted", request.name());
    reply.set_text("hello, " + request.name());
    reply.set_length(static_cast<std::uint32_t>(request.name().size()));
    return {};
  }

  rpc::Status Count(rpc::ServerContext&, const Numbers& request, Numbers_Sum& reply) override {
    ++handled_;
    if (request.values().empty()) return {rpc::StatusCode::invalid_argument, "nothing to count"};
    for (std::int64_t value : request.values()) reply.set_total(reply.total() + value);
    reply.set_count(static_cast<std::uint32_t>(request.values_size()));
    return {};
  }

  int handled() const { return handled_; }

  // The messages one call of Say was handed, as they were when it started.
  struct Seen {
    const void* request;
    const void* reply;
    std::size_t request_bytes;
    std::size_t reply_bytes;
    std::size_t name_capacity;
  };
  const std::vector<Seen>& seen() const { return seen_; }

 private:
  int handled_ = 0;
  std::vector<Seen> seen_;
};

std::vector<std::string_view> method_names(const rpc::Service& service) {
  std::vector<std::string_view> names;
  for (const rpc::Method& method : service.methods()) names.push_back(method.name);
  return names;
}

// Runs `method` of `service` the way the server does: through its Method entry.
rpc::Status invoke(rpc::Service& service, std::string_view method, rpc::ServerContext& context,
                   TestCall& call) {
  for (const rpc::Method& entry : service.methods()) {
    if (entry.name == method) return entry.invoke(service, context, call);
  }
  ADD_FAILURE() << service.service_name() << " has no method " << method;
  return {rpc::StatusCode::internal, "no such method in the test"};
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

template <typename Message>
std::string encode(const Message& message) {
  std::string body;
  EXPECT_TRUE(message.SerializeToString(&body));
  return body;
}

TEST(CodegenTest, ServiceNamesAreFullProtoNames) {
  static_assert(codegen::GreeterBase::kServiceName == "tern.test.codegen.Greeter");
  static_assert(codegen::AdminBase::kServiceName == "tern.test.codegen.Admin");
  Greeter greeter;
  codegen::AdminBase admin;
  codegen::QuietBase quiet;
  EXPECT_EQ(greeter.service_name(), "tern.test.codegen.Greeter");
  EXPECT_EQ(admin.service_name(), "tern.test.codegen.Admin");
  EXPECT_EQ(quiet.service_name(), "tern.test.codegen.Quiet");
}

TEST(CodegenTest, MethodsComeInProtoOrder) {
  Greeter greeter;
  codegen::AdminBase admin;
  codegen::QuietBase quiet;
  EXPECT_EQ(method_names(greeter), (std::vector<std::string_view>{"Say", "Shout", "Count"}));
  EXPECT_EQ(method_names(admin), (std::vector<std::string_view>{"Ping", "Echo"}));
  EXPECT_TRUE(quiet.methods().empty());
  for (const rpc::Method& method : greeter.methods()) EXPECT_NE(method.invoke, nullptr);
  // One static table per service, not one per call.
  EXPECT_EQ(greeter.methods().data(), Greeter().methods().data());
}

TEST(CodegenTest, InvokeParsesRunsTheOverrideAndEncodesTheReply) {
  Greeter greeter;
  codegen::HelloRequest request;
  request.set_name("tern");
  TestCall call(encode(request));
  rpc::ServerContext context;

  rpc::Service& service = greeter;
  const rpc::Status status = invoke(service, "Say", context, call);

  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(greeter.handled(), 1);
  ASSERT_EQ(call.replies(), 1);
  codegen::HelloReply reply;
  ASSERT_TRUE(reply.ParseFromString(call.encoded_reply()));
  EXPECT_EQ(reply.text(), "hello, tern");
  EXPECT_EQ(reply.length(), 4u);
  EXPECT_EQ(context.metadata("greeted"), std::nullopt);  // request metadata: untouched
  ASSERT_EQ(context.reply_metadata().size(), 1u);
  EXPECT_EQ(context.reply_metadata()[0].first, "greeted");
  EXPECT_EQ(context.reply_metadata()[0].second, "tern");
}

TEST(CodegenTest, TypesFromAnotherPackageAndNestedMessages) {
  Greeter greeter;
  Numbers numbers;
  for (std::int64_t value : {5, -2, 40}) numbers.add_values(value);
  TestCall call(encode(numbers));
  rpc::ServerContext context;

  ASSERT_TRUE(invoke(greeter, "Count", context, call).ok());

  Numbers_Sum sum;
  ASSERT_TRUE(sum.ParseFromString(call.encoded_reply()));
  EXPECT_EQ(sum.total(), 43);
  EXPECT_EQ(sum.count(), 3u);
}

TEST(CodegenTest, FailedHandlerSendsNoReply) {
  Greeter greeter;
  TestCall call(encode(Numbers()));
  rpc::ServerContext context;

  const rpc::Status status = invoke(greeter, "Count", context, call);

  EXPECT_EQ(status, rpc::StatusCode::invalid_argument);
  EXPECT_EQ(status.message(), "nothing to count");
  EXPECT_EQ(greeter.handled(), 1);
  EXPECT_EQ(call.replies(), 0);
}

TEST(CodegenTest, MethodNotOverriddenAnswersUnimplemented) {
  Greeter greeter;
  codegen::HelloRequest request;
  request.set_name("tern");
  TestCall call(encode(request));
  rpc::ServerContext context;

  const rpc::Status status = invoke(greeter, "Shout", context, call);

  EXPECT_EQ(status, rpc::StatusCode::unimplemented);
  EXPECT_TRUE(contains(status.message(), "tern.test.codegen.Greeter")) << status.message();
  EXPECT_TRUE(contains(status.message(), "Shout")) << status.message();
  EXPECT_EQ(greeter.handled(), 0);
  EXPECT_EQ(call.replies(), 0);

  // The generated base alone serves nothing; google.protobuf.Empty parses from no bytes.
  codegen::AdminBase admin;
  TestCall ping("");
  const rpc::Status ping_status = invoke(admin, "Ping", context, ping);
  EXPECT_EQ(ping_status, rpc::StatusCode::unimplemented);
  EXPECT_TRUE(contains(ping_status.message(), "tern.test.codegen.Admin")) << ping_status.message();
  EXPECT_TRUE(contains(ping_status.message(), "Ping")) << ping_status.message();
}

TEST(CodegenTest, MalformedRequestIsInvalidArgument) {
  Greeter greeter;
  // Field 1 (name), length-delimited, says 10 bytes and has 3.
  TestCall truncated(
      std::string("\x0a\x0a"
                  "abc",
                  5));
  rpc::ServerContext context;

  const rpc::Status status = invoke(greeter, "Say", context, truncated);

  EXPECT_EQ(status, rpc::StatusCode::invalid_argument);
  EXPECT_TRUE(contains(status.message(), "tern.test.codegen.HelloRequest")) << status.message();
  EXPECT_EQ(greeter.handled(), 0);
  EXPECT_EQ(truncated.replies(), 0);
}

TEST(CodegenTest, EveryCallGetsClearedMessagesThatKeepTheirMemory) {
  Greeter greeter;
  rpc::ServerContext context;
  codegen::HelloRequest first;
  first.set_name("the first caller, with a name longer than a short string");
  TestCall first_call(encode(first));
  ASSERT_TRUE(invoke(greeter, "Say", context, first_call).ok());
  // An empty request: nothing of the first call's name may show through.
  TestCall second_call("");
  ASSERT_TRUE(invoke(greeter, "Say", context, second_call).ok());

  ASSERT_EQ(greeter.seen().size(), 2u);
  const Greeter::Seen& second = greeter.seen()[1];
  EXPECT_EQ(second.request_bytes, 0u);
  EXPECT_EQ(second.reply_bytes, 0u);
  codegen::HelloReply reply;
  ASSERT_TRUE(reply.ParseFromString(second_call.encoded_reply()));
  EXPECT_EQ(reply.text(), "hello, ");
  EXPECT_EQ(reply.length(), 0u);
  // The same objects served both calls, and the name's buffer stayed allocated.
  EXPECT_EQ(second.request, greeter.seen()[0].request);
  EXPECT_EQ(second.reply, greeter.seen()[0].reply);
  EXPECT_GE(second.name_capacity, first.name().size());

  // Count adds to the reply's total: a reply that was not cleared would carry the last sum.
  Numbers numbers;
  for (std::int64_t value : {5, -2, 40}) numbers.add_values(value);
  for (int round = 0; round < 3; ++round) {
    TestCall call(encode(numbers));
    ASSERT_TRUE(invoke(greeter, "Count", context, call).ok());
    Numbers_Sum sum;
    ASSERT_TRUE(sum.ParseFromString(call.encoded_reply()));
    EXPECT_EQ(sum.total(), 43) << "round " << round;
    EXPECT_EQ(sum.count(), 3u) << "round " << round;
  }
}

TEST(CodegenTest, ALargeCallsMessagesAreFreedNotKept) {
  Greeter greeter;
  rpc::ServerContext context;
  codegen::HelloRequest large;
  large.set_name(std::string(rpc::detail::kSpareMessageBytes + 1, 'x'));
  TestCall large_call(encode(large));
  ASSERT_TRUE(invoke(greeter, "Say", context, large_call).ok());
  codegen::HelloRequest small;
  small.set_name("tern");
  TestCall small_call(encode(small));
  ASSERT_TRUE(invoke(greeter, "Say", context, small_call).ok());

  ASSERT_EQ(greeter.seen().size(), 2u);
  // The next call's request did not inherit the large name's buffer.
  EXPECT_LT(greeter.seen()[1].name_capacity, rpc::detail::kSpareMessageBytes);
  codegen::HelloReply reply;
  ASSERT_TRUE(reply.ParseFromString(small_call.encoded_reply()));
  EXPECT_EQ(reply.text(), "hello, tern");
}

TEST(CodegenTest, SpareMessagesHoldAtMostTheirLimitAndComeBackCleared) {
  using Pool = rpc::detail::SpareMessages<codegen::HelloRequest>;
  Pool& pool = Pool::here();
  while (pool.size() > 0) (void)pool.take();
  EXPECT_EQ(&pool, &Pool::here());  // one pool per thread and type

  std::unique_ptr<codegen::HelloRequest> named = pool.take();
  named->set_name("kept");
  const codegen::HelloRequest* const address = named.get();
  pool.give(std::move(named), 6);
  ASSERT_EQ(pool.size(), 1u);
  std::unique_ptr<codegen::HelloRequest> again = pool.take();
  EXPECT_EQ(again.get(), address);
  EXPECT_TRUE(again->name().empty());
  EXPECT_EQ(pool.size(), 0u);

  pool.give(std::move(again), rpc::detail::kSpareMessageBytes + 1);  // too large: freed
  EXPECT_EQ(pool.size(), 0u);
  for (std::size_t i = 0; i < rpc::detail::kSpareMessages + 5; ++i) {
    pool.give(std::make_unique<codegen::HelloRequest>(), 0);
  }
  EXPECT_EQ(pool.size(), rpc::detail::kSpareMessages);
  while (pool.size() > 0) (void)pool.take();

  // Another thread has a pool of its own.
  std::size_t other_size = 1;
  std::thread([&] { other_size = Pool::here().size(); }).join();
  EXPECT_EQ(other_size, 0u);
}

// The client's calls need a connected Channel (the channel's tests make them); here each form
// docs/rpc.md promises must exist with exactly its signature: taking its address as that type
// picks it out of the overload set, or fails to compile.
using codegen::HelloReply;
using codegen::HelloRequest;
using Client = codegen::GreeterClient;
[[maybe_unused]] constexpr rpc::Result<HelloReply> (Client::*kSay)(
    rpc::ClientContext&, const HelloRequest&) = &Client::Say;
[[maybe_unused]] constexpr rpc::Result<HelloReply> (Client::*kSayDefaultContext)(
    const HelloRequest&) = &Client::Say;
[[maybe_unused]] constexpr rpc::Status (Client::*kSayInto)(rpc::ClientContext&, const HelloRequest&,
                                                           HelloReply&) = &Client::Say;
[[maybe_unused]] constexpr rpc::Future<HelloReply> (Client::*kSayAsync)(
    const rpc::ClientContext&, const HelloRequest&) = &Client::SayAsync;
[[maybe_unused]] constexpr void (Client::*kSayAsyncCallback)(
    const rpc::ClientContext&, const HelloRequest&,
    std::function<void(rpc::Result<HelloReply>)>) = &Client::SayAsync;
[[maybe_unused]] constexpr rpc::Status (Client::*kSayOneWay)(
    rpc::ClientContext&, const HelloRequest&) = &Client::SayOneWay;
[[maybe_unused]] constexpr rpc::Result<Numbers_Sum> (Client::*kCount)(const Numbers&) =
    &Client::Count;
static_assert(!std::is_default_constructible_v<Client>);
static_assert(!std::is_convertible_v<rpc::Channel&, Client>);  // the constructor is explicit
static_assert(std::is_constructible_v<Client, rpc::Channel&>);

}  // namespace
