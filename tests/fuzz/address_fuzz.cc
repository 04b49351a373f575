// libFuzzer entry point: arbitrary text through tern::net::Address::parse (address_parse.h).
// Built with -fsanitize=fuzzer when TERN_FUZZ is on; address_corpus_check calls it without.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "address_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)tern::fuzz::parse_address_text(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
