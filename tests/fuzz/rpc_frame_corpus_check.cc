// Runs every seed of the rpc_frame corpus through the fuzz entry point once and checks that each
// is valid: one or more whole frames, every byte consumed, no protocol error. Registered with
// ctest in every build.
#include <cstddef>
#include <cstdint>
#include <string>

#include "corpus_check.h"
#include "rpc_frame_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  return tern::fuzz::run_corpus_check(
      argc, argv, [](const auto&, std::span<const std::byte> bytes, std::string& note) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const tern::fuzz::FrameStreamSummary summary = tern::fuzz::parse_frame_stream(bytes);
        note = std::to_string(summary.frames) + " frames";
        if (summary.error) note += ", " + summary.error.message();
        return summary.frames > 0 && summary.consumed == bytes.size() && !summary.error;
      });
}
