// Runs every seed of the admin_http corpus through the fuzz entry point once and checks that the
// whole text ends in the state its name says: "complete-*", "incomplete-*", "malformed-*" or
// "too_large-*". Registered with ctest in every build.
#include <cstddef>
#include <cstdint>
#include <string>

#include "admin_http_parse.h"
#include "corpus_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using tern::admin::detail::HeadState;

const char* state_name(HeadState state) {
  switch (state) {
    case HeadState::incomplete:
      return "incomplete";
    case HeadState::complete:
      return "complete";
    case HeadState::malformed:
      return "malformed";
    case HeadState::too_large:
      return "too_large";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  return tern::fuzz::run_corpus_check(
      argc, argv,
      [](const std::filesystem::path& seed, std::span<const std::byte> bytes, std::string& note) {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
        const tern::fuzz::HeadArrivals arrivals = tern::fuzz::parse_head_arrivals(bytes);
        note = std::string(state_name(arrivals.state)) + " after " +
               std::to_string(arrivals.parses) + " parses";
        return bytes.size() >= 2 && tern::fuzz::seed_outcome(seed) == state_name(arrivals.state);
      });
}
