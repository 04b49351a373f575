#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "tern/base/result.h"

namespace tern::bench {

// The whole text of a small file such as /proc/PID/stat; `missing` when it cannot be opened
// (the process is gone, or /proc is not mounted). Any thread.
inline Result<std::string> read_whole_file(const std::string& path, std::errc missing) {
  std::ifstream file(path);
  if (!file) return fail(missing);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

}  // namespace tern::bench
