// A standalone (GoogleTest-free) check of the raw context switch, small enough to cross-build
// statically and run under qemu (scripts/cross-aarch64); ctest also runs it natively. It runs the
// checks of context_checks.h and ends with "context_check: N passed, M failed". Exits non-zero
// when a check fails. Arguments, if any, name the checks to run.

#include <cstdio>
#include <cstring>
#include <string>

#include "context_checks.h"

// True when `name` is among the checks named on the command line, or none are named.
bool selected(const char* name, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return true;
  }
  return argc < 2;
}

int main(int argc, char** argv) {
  using namespace tern::test;
  // One named check; needs_asm: only meaningful on the assembly switch.
  struct Check {
    const char* name;
    std::string (*run)();
    bool needs_asm;
  };
  const Check checks[] = {
      {"ping_pong", &check_ping_pong, false},
      {"registers", &check_registers, true},
      {"creator_fp_control", &check_creator_fp_control, true},
      {"stack_alignment", &check_stack_alignment, false},
      {"floating_point", &check_floating_point, false},
  };
  int passed = 0;
  int failed = 0;
  for (const Check& check : checks) {
    if (!selected(check.name, argc, argv)) continue;
    if (check.needs_asm && !TERN_TEST_CONTEXT_ASM) {
      std::printf("SKIP %s (needs the assembly context switch)\n", check.name);
      continue;
    }
    const std::string error = check.run();
    if (error.empty()) {
      ++passed;
      std::printf("PASS %s\n", check.name);
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", check.name, error.c_str());
    }
  }
  std::printf("context_check: %d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
