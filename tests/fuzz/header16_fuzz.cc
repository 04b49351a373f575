// libFuzzer entry point: arbitrary bytes through the 16-byte-header framing (header16_parse.h).
// Built with -fsanitize=fuzzer when TERN_FUZZ is on; header16_corpus_check calls it without.
#include <cstddef>
#include <cstdint>
#include <span>

#include "header16_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::serve_frame16_bytes(std::as_bytes(std::span(data, size)));
  return 0;
}
