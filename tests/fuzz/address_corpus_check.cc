// Runs every seed of the address corpus through the fuzz entry point once and checks the answer
// its name promises: "ok-*" parses, "bad-*" is rejected. Registered with ctest in every build.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "address_parse.h"
#include "corpus_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  return tern::fuzz::run_corpus_check(
      argc, argv,
      [](const std::filesystem::path& seed, std::span<const std::byte> bytes, std::string& note) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const tern::fuzz::AddressSummary summary = tern::fuzz::parse_address_text(
            std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        note = summary.parsed ? "parsed, family " + std::to_string(summary.family) : "rejected";
        const std::string outcome = tern::fuzz::seed_outcome(seed);
        return (outcome == "ok" && summary.parsed) || (outcome == "bad" && !summary.parsed);
      });
}
