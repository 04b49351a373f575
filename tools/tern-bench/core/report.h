#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cpu.h"

namespace tern::bench {

// JSON with the keys kept in insertion order, so every report prints its fields the same way.
using Json = nlohmann::ordered_json;

// The outcome of one run: its parameters, its figures (names carry their units: _us, _per_s,
// _bytes, _pct) and whether the work was verified. Printed as exactly one JSON line or as
// text. Built and printed by one thread.
struct Report {
  static constexpr std::size_t kMaxErrorMessages = 5;

  std::string mode;    // traffic, pingpong, sessions, ttcp, switch
  std::string target;  // the server's name (tern, asio, go, ...) or the variant measured
  Json params = Json::object();
  Json figures = Json::object();
  std::uint64_t errors = 0;
  bool verified = false;
  std::optional<double> client_cpu_pct;     // % of one CPU over the run
  std::optional<double> server_cpu_pct;     // only with --server-pid
  std::optional<MachineSplit> machine_cpu;  // how all the machine's CPUs spent the run
  std::vector<std::string> error_messages;  // the first kMaxErrorMessages errors
  std::vector<std::string> notes;           // what the reader must know about the run
  std::vector<std::string> summary;         // the text output's headline lines

  // Counts one error and keeps its message if fewer than kMaxErrorMessages are kept.
  void add_error(std::string message);
  // The report as a JSON object (see docs/tern-bench.md for the field names).
  Json to_json() const;
  // to_json() on one line, without a trailing newline.
  std::string json_line() const;
  // The report for people: summary, figures, CPU, verdict; ends with a newline.
  std::string text() const;
  // 0 when verified without errors, 1 otherwise.
  int exit_status() const { return verified && errors == 0 ? 0 : 1; }
};

// value rounded to `decimals` decimal places (for figures: keeps JSON lines short). Any thread.
double round_to(double value, int decimals = 3);

// Prints the report on stdout, as one JSON line or as text; returns its exit status. Any thread.
int print_report(const Report& report, bool json);

}  // namespace tern::bench
