// libFuzzer entry point: arbitrary bytes through the admin endpoint's request-head parser as they
// arrive (admin_http_parse.h). Built with -fsanitize=fuzzer when TERN_FUZZ is on;
// admin_http_corpus_check calls it without.
#include <cstddef>
#include <cstdint>
#include <span>

#include "admin_http_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::parse_head_arrivals(std::as_bytes(std::span(data, size)));
  return 0;
}
