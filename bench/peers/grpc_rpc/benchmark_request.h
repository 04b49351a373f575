#pragma once

#include <cstddef>
#include <string>

#include "benchmark_message.pb.h"

namespace grpc_rpc {

// The 57-byte ASCII string of the request's seven string fields (bench/proto/README.md).
inline constexpr char kPayloadText[] = "tern rpc benchmark payload, fifty-seven bytes of ASCII...";

// The encoded size of the request fill_request builds.
inline constexpr std::size_t kRequestBytes = 583;

// Fills `request` exactly as bench/proto/README.md says. Any thread.
void fill_request(tern::bench::BenchmarkMessage& request);

// Sets the two fields the server changes (field1 = "OK", field2 = 100). Any thread.
void answer(tern::bench::BenchmarkMessage& message);

// Why `reply` is not the server's answer to the request (an empty string when it is): field1
// must be "OK", field2 100 and the untouched field3 still 100000. Any thread.
std::string check_reply(const tern::bench::BenchmarkMessage& reply);

}  // namespace grpc_rpc
