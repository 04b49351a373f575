#include "rpc_message.h"

#include <fmt/format.h>

namespace tern::bench {

namespace {

constexpr std::int32_t kNumber = 100000;

}  // namespace

void fill_rpc_request(BenchmarkMessage& request) {
  request.Clear();
  request.set_field1(kRpcPayloadText);
  request.set_field9(kRpcPayloadText);
  request.set_field18(kRpcPayloadText);
  request.set_field4(kRpcPayloadText);
  request.set_field7(kRpcPayloadText);
  request.set_field102(kRpcPayloadText);
  request.set_field103(kRpcPayloadText);

  request.set_field2(kNumber);
  request.set_field3(kNumber);
  request.set_field280(kNumber);
  request.set_field6(kNumber);
  request.set_field16(kNumber);
  request.set_field130(kNumber);
  request.set_field104(kNumber);
  request.set_field100(kNumber);
  request.set_field101(kNumber);
  request.set_field29(kNumber);
  request.set_field60(kNumber);
  request.set_field150(kNumber);
  request.set_field23(kNumber);
  request.set_field25(kNumber);
  request.set_field67(kNumber);
  request.set_field68(kNumber);
  request.set_field128(kNumber);
  request.set_field131(kNumber);
  request.set_field271(kNumber);
  request.set_field272(kNumber);

  request.set_field22(5'000'000'000);
  for (std::uint64_t v = 1; v <= 4; ++v) request.add_field5(v);

  request.set_field80(true);
  request.set_field81(true);
  request.set_field59(true);
  request.set_field12(true);
  request.set_field17(true);
  request.set_field13(true);
  request.set_field14(true);
  request.set_field30(true);
  request.set_field24(true);
  request.set_field78(true);
}

void answer_rpc_request(BenchmarkMessage& message) {
  message.set_field1("OK");
  message.set_field2(100);
}

std::string check_rpc_reply(const BenchmarkMessage& reply) {
  if (reply.field1() != "OK") {
    return fmt::format("reply field1 is '{}', not 'OK'", reply.field1().substr(0, 64));
  }
  if (reply.field2() != 100) return fmt::format("reply field2 is {}, not 100", reply.field2());
  if (reply.field3() != kNumber) {
    return fmt::format("reply field3 is {}, not the {} sent", reply.field3(), kNumber);
  }
  return {};
}

}  // namespace tern::bench
