#pragma once

// The common part of the seed generators: writing named seeds into a corpus directory.
// Main thread.

#include <string>
#include <utility>
#include <vector>

namespace tern::fuzz {

// A seed's file name and bytes.
using Seed = std::pair<std::string, std::string>;

// Writes each seed as a file of the directory named by argv[1] (created when missing), printing a
// line per file. Returns the exit status of a seed generator: 0 when every file was written.
int write_seed_files(int argc, char** argv, const std::vector<Seed>& seeds);

}  // namespace tern::fuzz
