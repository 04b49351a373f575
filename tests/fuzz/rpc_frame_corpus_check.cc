// Runs every file of the seed corpus directories given on the command line through the fuzz entry
// point once, and checks that each is valid: one or more whole frames, every byte consumed, no
// protocol error. Exit status 0 when all are. Registered with ctest in every build.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "rpc_frame_parse.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::byte> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto* begin = reinterpret_cast<const std::byte*>(text.data());
  return {begin, begin + text.size()};
}

// Checks one seed; prints and returns whether it is valid.
bool check_seed(const std::filesystem::path& path) {
  const std::vector<std::byte> bytes = read_file(path);
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  const tern::fuzz::FrameStreamSummary summary = tern::fuzz::parse_frame_stream(bytes);
  const bool valid = summary.frames > 0 && summary.consumed == bytes.size() && !summary.error;
  std::printf("%s %s: %zu bytes, %zu frames%s%s\n", valid ? "ok  " : "FAIL", path.c_str(),
              bytes.size(), summary.frames, summary.error ? ", " : "",
              summary.error ? summary.error.message().c_str() : "");
  return valid;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR...\n", argv[0]);
    return 2;
  }
  int seeds = 0;
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(argv[i], error)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (error) {
      std::fprintf(stderr, "%s: %s\n", argv[i], error.message().c_str());
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      ++seeds;
      if (!check_seed(file)) ++failed;
    }
  }
  std::printf("%d seeds, %d invalid\n", seeds, failed);
  return seeds > 0 && failed == 0 ? 0 : 1;
}
