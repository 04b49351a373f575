#include "seed_files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace tern::fuzz {

int write_seed_files(int argc, char** argv, const std::vector<Seed>& seeds) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::fprintf(stderr, "%s: %s\n", dir.c_str(), error.message().c_str());
    return 1;
  }
  bool ok = true;
  for (const auto& [name, bytes] : seeds) {
    const std::filesystem::path path = dir / name;
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    file.close();
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      ok = false;
      continue;
    }
    std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
  }
  return ok ? 0 : 1;
}

}  // namespace tern::fuzz
