// Resident memory of sleeping fibers: spawns N fibers (default 100,000) on one worker, each of
// which sleeps for an hour, and reports how much VmRSS grew per fiber against the target (8 KiB
// with stacks of their own, 1 KiB with --stack-mode shared, where a sleeping fiber keeps only its
// control block and the copy of the stack it used). Also prints VmPTE (page tables, not part of
// VmRSS) and the number of memory mappings against vm.max_map_count, so a reader sees that neither
// limits the fiber count. The fibers are canceled by the runtime's shutdown (their sleep ends with
// operation_canceled), so the program stops by itself and exits 0.
//
//   fiber_memory [--fibers N] [--stack-mode own|shared] [--json PATH]

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "tern/fiber/fiber.h"
#include "tern/fiber/runtime.h"

namespace {

constexpr double kTargetKibOwnStack = 8.0;
constexpr double kTargetKibSharedStack = 1.0;

void usage(const char* program, std::FILE* out) {
  std::fprintf(out,
               "usage: %s [--fibers N] [--stack-mode own|shared] [--json PATH]\n"
               "Spawns N fibers (default 100000) that sleep, and reports the resident memory\n"
               "(VmRSS) and page tables (VmPTE) they added per fiber. --stack-mode shared runs\n"
               "them on the worker's shared stack (FiberOptions::stack_mode).\n",
               program);
}

// A field of /proc/self/status in KiB ("VmRSS:  1234 kB"), or -1 if it is missing.
long status_kib(const char* field) {
  std::ifstream status("/proc/self/status");
  const std::size_t length = std::strlen(field);
  for (std::string line; std::getline(status, line);) {
    if (line.compare(0, length, field) == 0 && line.size() > length && line[length] == ':')
      return std::strtol(line.c_str() + length + 1, nullptr, 10);
  }
  return -1;
}

// The number of lines of a file (for /proc/self/maps: the number of mappings).
long line_count(const char* path) {
  std::ifstream in(path);
  long lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

// The first line of a small file, or "?".
std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return "?";
  return line;
}

struct Snapshot {
  long rss_kib = 0;
  long pte_kib = 0;
  long maps = 0;
};

Snapshot snapshot() {
  return {status_kib("VmRSS"), status_kib("VmPTE"), line_count("/proc/self/maps")};
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t fibers = 100'000;
  const char* json_path = nullptr;
  tern::StackMode stack_mode = tern::StackMode::own;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(argv[0], stdout);
      return 0;
    } else if (std::strcmp(argv[i], "--fibers") == 0 && i + 1 < argc) {
      fibers = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--stack-mode") == 0 && i + 1 < argc) {
      const std::string mode = argv[++i];
      if (mode == "own") {
        stack_mode = tern::StackMode::own;
      } else if (mode == "shared") {
        stack_mode = tern::StackMode::shared;
      } else {
        std::fprintf(stderr, "fiber_memory: --stack-mode is own or shared, not '%s'\n",
                     mode.c_str());
        return 2;
      }
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      usage(argv[0], stderr);
      return 2;
    }
  }
  if (fibers == 0) fibers = 1;
  const bool shared = stack_mode == tern::StackMode::shared;
  const double target_kib = shared ? kTargetKibSharedStack : kTargetKibOwnStack;
  const char* const mode_name = shared ? "shared" : "own";

  std::size_t sleeping = 0;  // fibers that reached their sleep
  std::size_t canceled = 0;  // fibers whose sleep ended with operation_canceled
  Snapshot before;
  Snapshot after;
  double spawn_seconds = 0;
  const std::size_t progress_step = fibers >= 10 ? fibers / 10 : 1;

  tern::Runtime runtime(tern::RuntimeOptions{.workers = 1});
  const auto total_start = std::chrono::steady_clock::now();
  runtime.run([&] {
    before = snapshot();
    std::printf(
        "fiber_memory: %zu fibers, one worker, %s stacks; before: VmRSS %ld KiB, VmPTE %ld KiB, "
        "%ld mappings\n",
        fibers, mode_name, before.rss_kib, before.pte_kib, before.maps);
    std::fflush(stdout);
    const auto spawn_start = std::chrono::steady_clock::now();
    const tern::FiberOptions options{.name = "sleeper", .stack_mode = stack_mode};
    for (std::size_t i = 0; i < fibers; ++i) {
      tern::spawn(
          [&sleeping, &canceled] {
            ++sleeping;
            tern::Result<void> slept = tern::this_fiber::sleep_for(std::chrono::hours(1));
            if (!slept && slept.error() == std::errc::operation_canceled) ++canceled;
          },
          options)
          .detach();
      if ((i + 1) % progress_step == 0) {
        std::printf("  spawned %zu\n", i + 1);
        std::fflush(stdout);
      }
    }
    // Let every fiber run up to its sleep (they run in spawn order, before this one resumes).
    while (sleeping < fibers) tern::this_fiber::yield();
    spawn_seconds = seconds_since(spawn_start);
    after = snapshot();
    std::printf("  all %zu fibers asleep after %.2f s; shutting down (cancels the sleeps)\n",
                sleeping, spawn_seconds);
    std::fflush(stdout);
  });
  const double total_seconds = seconds_since(total_start);

  const double per_fiber_kib =
      static_cast<double>(after.rss_kib - before.rss_kib) / static_cast<double>(fibers);
  const double pte_per_fiber_bytes =
      static_cast<double>(after.pte_kib - before.pte_kib) * 1024.0 / static_cast<double>(fibers);
  const long max_map_count =
      std::strtol(first_line("/proc/sys/vm/max_map_count").c_str(), nullptr, 10);
  const bool target_met = per_fiber_kib <= target_kib;
  const bool all_canceled = canceled == fibers;

  std::printf("after:  VmRSS %ld KiB, VmPTE %ld KiB, %ld mappings\n", after.rss_kib, after.pte_kib,
              after.maps);
  std::printf("RSS per sleeping fiber (%s stacks): %.2f KiB (target <= %.0f KiB): %s\n", mode_name,
              per_fiber_kib, target_kib, target_met ? "MET" : "MISSED");
  std::printf("page tables per fiber: %.0f bytes (VmPTE, not counted in VmRSS)\n",
              pte_per_fiber_bytes);
  std::printf("mappings: %ld of vm.max_map_count %ld (%ld added for %zu fibers)\n", after.maps,
              max_map_count, after.maps - before.maps, fibers);
  std::printf("transparent hugepages: %s\n",
              first_line("/sys/kernel/mm/transparent_hugepage/enabled").c_str());
  std::printf("shutdown: %zu of %zu sleeps canceled; total %.2f s\n", canceled, fibers,
              total_seconds);

  if (json_path != nullptr) {
    std::FILE* out = std::fopen(json_path, "w");
    if (out == nullptr) {
      std::perror(json_path);
      return 1;
    }
    std::fprintf(out,
                 "{\"fibers\": %zu, \"stack_mode\": \"%s\", \"rss_before_kib\": %ld, "
                 "\"rss_after_kib\": %ld, "
                 "\"rss_per_fiber_kib\": %.3f, \"pte_before_kib\": %ld, \"pte_after_kib\": %ld, "
                 "\"maps_before\": %ld, \"maps_after\": %ld, \"max_map_count\": %ld, "
                 "\"spawn_seconds\": %.3f, \"total_seconds\": %.3f, \"canceled\": %zu, "
                 "\"target_kib\": %.1f, \"target_met\": %s}\n",
                 fibers, mode_name, before.rss_kib, after.rss_kib, per_fiber_kib, before.pte_kib,
                 after.pte_kib, before.maps, after.maps, max_map_count, spawn_seconds,
                 total_seconds, canceled, target_kib, target_met ? "true" : "false");
    std::fclose(out);
  }
  if (!all_canceled) {
    std::fprintf(stderr, "fiber_memory: only %zu of %zu fibers were canceled\n", canceled, fibers);
    return 1;
  }
  return 0;
}
