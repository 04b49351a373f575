#pragma once

// What the tern-bench end-to-end tests share about a run: the backend under test and the one
// JSON report a tool prints with --json. Used from the test's main thread only.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "tern_bench_process.h"

namespace tern::test {

// The I/O backend TERN_IO names for this ctest entry ("auto" when unset).
inline std::string backend() {
  const char* io = std::getenv("TERN_IO");
  return io != nullptr ? io : "auto";
}

// The one JSON line a run printed; fails the test if stdout holds anything else or the tool
// timed out.
inline nlohmann::json report_of(const ToolRun& run) {
  EXPECT_FALSE(run.timed_out);
  EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 1) << run.out << run.err;
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(run.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\nstdout: " << run.out << "\nstderr: " << run.err;
  }
  return parsed;
}

}  // namespace tern::test
