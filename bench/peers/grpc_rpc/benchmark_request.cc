#include "benchmark_request.h"

#include <cstdint>

namespace grpc_rpc {

namespace {

constexpr std::int32_t kNumber = 100000;

}  // namespace

void fill_request(tern::bench::BenchmarkMessage& request) {
  request.Clear();
  request.set_field1(kPayloadText);
  request.set_field9(kPayloadText);
  request.set_field18(kPayloadText);
  request.set_field4(kPayloadText);
  request.set_field7(kPayloadText);
  request.set_field102(kPayloadText);
  request.set_field103(kPayloadText);

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

  request.set_field22(5000000000LL);
  for (std::uint64_t value = 1; value <= 4; ++value) request.add_field5(value);

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

void answer(tern::bench::BenchmarkMessage& message) {
  message.set_field1("OK");
  message.set_field2(100);
}

std::string check_reply(const tern::bench::BenchmarkMessage& reply) {
  if (reply.field1() != "OK") return "reply field1 is not \"OK\"";
  if (reply.field2() != 100) return "reply field2 is not 100";
  if (reply.field3() != kNumber) return "reply field3 is not 100000";
  return {};
}

}  // namespace grpc_rpc
