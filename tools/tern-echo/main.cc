// tern-echo: one server for every benchmark report's load pattern (docs/benchmark-methods.md;
// see --help). main parses the command line (command_line.h), checks it into a configuration
// (config.h) and serves it (serve.h); each mode's connection handler is in handlers.h.
#include <cstdio>
#include <optional>
#include <string>

#include "command_line.h"
#include "config.h"
#include "serve.h"

int main(int argc, char** argv) {
  tern::echo::EchoOptions options;
  if (const std::optional<int> status = tern::echo::parse_command_line(argc, argv, options))
    return *status;
  std::string why;
  const std::optional<tern::echo::EchoConfig> config = tern::echo::validate_options(options, why);
  if (!config) {
    std::fprintf(stderr, "tern-echo: %s\n", why.c_str());
    return 2;
  }
  return tern::echo::serve(*config);
}
