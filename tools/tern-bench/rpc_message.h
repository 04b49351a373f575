#pragma once

#include <cstddef>
#include <string>

#include "benchmark_message.pb.h"

// The request and the reply check of report 001 (docs/benchmark-methods.md; bench/proto/README.md),
// shared by tern-bench rpc and tern-rpc-server. Any thread.
namespace tern::bench {

// The 57 ASCII characters of each of the request's seven string fields.
inline constexpr char kRpcPayloadText[] =
    "tern rpc benchmark payload, fifty-seven bytes of ASCII...";

// The encoded size of the request fill_rpc_request builds.
inline constexpr std::size_t kRpcRequestBytes = 583;

// Fills `request` field by field as bench/proto/README.md lists them.
void fill_rpc_request(BenchmarkMessage& request);

// What the server does to the request it got: field1 = "OK", field2 = 100.
void answer_rpc_request(BenchmarkMessage& message);

// Why `reply` is not the answer to the request (empty when it is): field1 must be "OK", field2
// 100 and field3, which the server leaves alone, still 100000.
std::string check_rpc_reply(const BenchmarkMessage& reply);

}  // namespace tern::bench
