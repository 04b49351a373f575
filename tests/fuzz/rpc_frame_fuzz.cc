// libFuzzer entry point: arbitrary bytes through the RPC frame parser (rpc_frame_parse.h).
// Built with -fsanitize=fuzzer when TERN_FUZZ is on; rpc_frame_corpus_check calls it without.
#include <google/protobuf/stubs/common.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "rpc_frame_parse.h"

#if GOOGLE_PROTOBUF_VERSION < 4022000
#include <google/protobuf/stubs/logging.h>
#endif

// Runs once before the first input: protobuf's log line for every malformed string field would
// otherwise cost more than the parse.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
#if GOOGLE_PROTOBUF_VERSION < 4022000
  google::protobuf::SetLogHandler(nullptr);
#endif
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::parse_frame_stream(std::as_bytes(std::span(data, size)));
  return 0;
}
