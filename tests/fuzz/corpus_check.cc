#include "corpus_check.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

namespace tern::fuzz {

namespace {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

int run_corpus_check(int argc, char** argv, const SeedCheck& check) {
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
      const std::string text = read_file(file);
      const std::span<const std::byte> bytes = std::as_bytes(std::span(text));
      std::string note;
      const bool passed = check(file, bytes, note);
      std::printf("%s %s: %zu bytes%s%s\n", passed ? "ok  " : "FAIL", file.c_str(), bytes.size(),
                  note.empty() ? "" : ", ", note.c_str());
      ++seeds;
      if (!passed) ++failed;
    }
  }
  std::printf("%d seeds, %d failed\n", seeds, failed);
  return seeds > 0 && failed == 0 ? 0 : 1;
}

std::string seed_outcome(const std::filesystem::path& seed) {
  const std::string name = seed.filename().string();
  return name.substr(0, name.find('-'));
}

}  // namespace tern::fuzz
