#!/usr/bin/env bash
# Runs tern's micro benchmarks from a build directory, stores the raw results in bench/results/
# and prints a summary against the project's targets (bench/micro/summarize.py).
#
#   bash bench/micro/run.sh BUILD_DIR
#
# Environment: REPETITIONS (default 3; the summary quotes medians), MIN_TIME (seconds per
# repetition, default 0.5), FIBERS (for fiber_memory, default 100000), BENCHMARK_FILTER.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: bash bench/micro/run.sh BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin="$build/bench/micro"
for program in switch_bench fiber_bench fiber_memory; do
  if [[ ! -x "$bin/$program" ]]; then
    echo "run.sh: $bin/$program is missing; configure with -DTERN_BUILD_BENCH=ON and build" >&2
    exit 1
  fi
done

repetitions=${REPETITIONS:-3}
min_time=${MIN_TIME:-0.5}
fibers=${FIBERS:-100000}
filter=${BENCHMARK_FILTER:-.}
results="$repo/bench/results"
mkdir -p "$results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
prefix="$results/micro-$stamp"

# Machine facts for the summary (the JSON files carry Google Benchmark's own context too).
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
export TERN_BENCH_CPU
TERN_BENCH_CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
TERN_BENCH_CPU="$TERN_BENCH_CPU (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo |
  head -n 1), model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -n 1))"
export TERN_BENCH_CORES
TERN_BENCH_CORES="$(nproc) usable, $(grep -c '^processor' /proc/cpuinfo) online"
export TERN_BENCH_KERNEL
TERN_BENCH_KERNEL="$(uname -sr) $(uname -m)"
export TERN_BENCH_COMPILER
TERN_BENCH_COMPILER="$(basename "$(readlink -f "${cxx:-c++}")"): $("${cxx:-c++}" --version |
  head -n 1) ($build_type)"
export TERN_BENCH_LOAD
TERN_BENCH_LOAD=$(cut -d ' ' -f 1-3 /proc/loadavg)

echo "== tern micro benchmarks: $stamp, $repetitions repetitions, results in $results"
for program in switch_bench fiber_bench; do
  echo "== $program"
  "$bin/$program" --benchmark_filter="$filter" --benchmark_repetitions="$repetitions" \
    --benchmark_min_time="$min_time" --benchmark_display_aggregates_only=true \
    --benchmark_out="$prefix-$program.json" --benchmark_out_format=json
done

echo "== fiber_memory"
"$bin/fiber_memory" --fibers "$fibers" --json "$prefix-fiber_memory.json"

echo
python3 "$repo/bench/micro/summarize.py" --switch "$prefix-switch_bench.json" \
  --fiber "$prefix-fiber_bench.json" --memory "$prefix-fiber_memory.json" |
  tee "$prefix-summary.md"
echo "(summary saved as $prefix-summary.md)"
