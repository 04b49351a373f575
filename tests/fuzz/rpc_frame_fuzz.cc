// libFuzzer entry point: arbitrary bytes through the RPC frame parser (rpc_frame_parse.h).
// Built with -fsanitize=fuzzer when TERN_FUZZ is on; rpc_frame_corpus_check calls it without.
#include <cstddef>
#include <cstdint>
#include <span>

#include "rpc_frame_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::parse_frame_stream(std::as_bytes(std::span(data, size)));
  return 0;
}
