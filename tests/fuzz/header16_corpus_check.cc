// Runs every seed of the header16 corpus through the fuzz entry point once and checks the outcome
// its name promises: "ok-*" whole messages only, "partial-*" messages and then an incomplete one,
// "oversized-*" and "bad_header-*" a closed connection. Registered with ctest in every build.
#include <cstddef>
#include <cstdint>
#include <string>

#include "corpus_check.h"
#include "header16_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using tern::fuzz::Frame16Close;

const char* close_name(Frame16Close close) {
  switch (close) {
    case Frame16Close::none:
      return "open";
    case Frame16Close::oversized:
      return "closed: oversized";
    case Frame16Close::bad_header:
      return "closed: bad header";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  return tern::fuzz::run_corpus_check(
      argc, argv,
      [](const std::filesystem::path& seed, std::span<const std::byte> bytes, std::string& note) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const tern::fuzz::Frame16Summary summary = tern::fuzz::serve_frame16_bytes(bytes);
        note = std::to_string(summary.frames) + " messages (" + std::to_string(summary.echoed) +
               " echo), " + std::to_string(summary.leftover) + " bytes left, " +
               close_name(summary.close);
        const std::string outcome = tern::fuzz::seed_outcome(seed);
        if (outcome == "ok")
          return summary.frames > 0 && summary.leftover == 0 && summary.close == Frame16Close::none;
        if (outcome == "partial")
          return summary.leftover > 0 && summary.close == Frame16Close::none;
        if (outcome == "oversized") return summary.close == Frame16Close::oversized;
        if (outcome == "bad_header") return summary.close == Frame16Close::bad_header;
        return false;
      });
}
