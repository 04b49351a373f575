#pragma once

// The common part of the corpus checks: every seed of a target's corpus directory goes through the
// target's fuzz entry point and a check of the outcome the seed was written for. Main thread.

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>

namespace tern::fuzz {

// Checks one seed (its path and bytes); returns whether the outcome is the expected one and may
// describe it in `note`.
using SeedCheck = std::function<bool(const std::filesystem::path& seed,
                                     std::span<const std::byte> bytes, std::string& note)>;

// Runs `check` on every file of the corpus directories argv[1..] in name order, printing a line
// per seed and a total. Returns the exit status: 0 when every seed passed (and there was one).
int run_corpus_check(int argc, char** argv, const SeedCheck& check);

// The outcome a seed was written for: its file name up to the first '-' ("ok-ipv4" -> "ok").
std::string seed_outcome(const std::filesystem::path& seed);

}  // namespace tern::fuzz
