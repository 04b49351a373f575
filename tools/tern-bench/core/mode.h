#pragma once

#include <functional>
#include <memory>

#include "core/options.h"
#include "core/report.h"

namespace CLI {
class App;
}

// What every subcommand of tern-bench does around its own load: registering itself on the app
// with options that live as long as the app, and ending with its report printed and its exit
// status handed to main. Each mode file calls add_mode once with its specifics (how it adds its
// options, how it runs) and ends its run with conclude.
namespace tern::bench {

// Makes `command`'s callback call run() and end with its status as the process's exit status:
// 0 returns normally, anything else throws CLI::RuntimeError(status), which main returns. From
// main, before parsing.
void on_chosen(CLI::App& command, std::function<int()> run);

// Registers a mode: makes its options (kept alive by the callback, so as long as the app), adds
// the subcommand through add_options and, when the subcommand is chosen, runs run(options) and
// exits with the status it returns (0 verified, 1 failed its checks). From main, before parsing.
template <typename Options>
CLI::App* add_mode(CLI::App& app, CLI::App* (*add_options)(CLI::App&, Options&),
                   int (*run)(const Options&)) {
  auto options = std::make_shared<Options>();
  CLI::App* command = add_options(app, *options);
  on_chosen(*command, [options, run] { return run(*options); });
  return command;
}

// The end of every report: marks it verified when it counted no error and `checks_passed` (the
// mode's own end-of-run checks), prints it on stdout (one JSON line with output.json, else text)
// and returns its exit status (0 verified, 1 otherwise). From the thread that ran the mode.
int conclude(Report& report, const OutputOptions& output, bool checks_passed = true);

}  // namespace tern::bench
