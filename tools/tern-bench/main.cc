// tern-bench: tern's load tool; one subcommand per benchmark report of docs/benchmark-methods.md
// (see --help and docs/tern-bench.md). Exit status: 0 verified, 1 the run failed its checks, 2 bad
// command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "core/run_support.h"
#include "modes/modes.h"

int main(int argc, char** argv) {
  tern::bench::raise_file_limit();
  CLI::App app{
      "tern-bench: reproduces the load of each benchmark report in docs/benchmark-methods.md "
      "against tern and its peers, checks that the work was done, and reports figures with their "
      "units (text, or one JSON line with --json). Exit status: 0 verified, 1 failed checks or "
      "errors, 2 bad command line."};
  app.require_subcommand(1);
  tern::bench::add_traffic_command(app);
  tern::bench::add_pingpong_command(app);
  tern::bench::add_sessions_command(app);
  tern::bench::add_ttcp_command(app);
  tern::bench::add_switch_command(app);
  tern::bench::add_log_command(app);
  tern::bench::add_rpc_command(app);
  tern::bench::add_failover_command(app);
  tern::bench::add_soak_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help exits 0; a bad command line exits 2
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tern-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
