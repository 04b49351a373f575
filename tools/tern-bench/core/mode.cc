#include "core/mode.h"

#include <CLI/CLI.hpp>
#include <utility>

namespace tern::bench {

void on_chosen(CLI::App& command, std::function<int()> run) {
  command.callback([run = std::move(run)] {
    if (const int status = run(); status != 0) throw CLI::RuntimeError(status);
  });
}

int conclude(Report& report, const OutputOptions& output, bool checks_passed) {
  report.verified = report.errors == 0 && checks_passed;
  return print_report(report, output.json);
}

}  // namespace tern::bench
