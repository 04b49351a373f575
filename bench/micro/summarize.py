#!/usr/bin/env python3
"""Summarizes one run of tern's micro benchmarks against the project's targets.

Reads the Google Benchmark JSON files of switch_bench and fiber_bench and the JSON line of
fiber_memory (all written by bench/micro/run.sh) and prints a Markdown table: the median of the
repetitions, the spread (min..max over repetitions) and the ratios the project tracks.
Machine facts come from TERN_BENCH_* environment variables set by run.sh. Stdlib only.
"""

import argparse
import json
import os
import sys


def load_runs(path):
    """Maps run name -> {"median": counters, "reps": [counters, ...]} for one JSON file."""
    with open(path) as f:
        data = json.load(f)
    runs = {}
    for b in data.get("benchmarks", []):
        name = b.get("run_name", b["name"])
        entry = runs.setdefault(name, {"median": None, "reps": [], "error": None})
        if b.get("error_occurred"):
            entry["error"] = b.get("error_message", "error")
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median":
                entry["median"] = b
        else:
            entry["reps"].append(b)
    # With a single repetition there is no aggregate: the one run is its own median.
    for entry in runs.values():
        if entry["median"] is None and len(entry["reps"]) == 1:
            entry["median"] = entry["reps"][0]
    return data.get("context", {}), runs


class Figure:
    """One per-operation time of one benchmark, in ns: median and spread over repetitions."""

    def __init__(self, runs, name, counter):
        entry = runs.get(name)
        self.name = name
        self.error = None
        self.median = None
        self.low = self.high = None
        if entry is None:
            self.error = "not run"
            return
        if entry["error"]:
            self.error = entry["error"]
            return
        if entry["median"] is None or counter not in entry["median"]:
            self.error = "no counter " + counter
            return
        # The per_* counters are seconds per operation (kIsRate | kInvert).
        self.median = entry["median"][counter] * 1e9
        reps = [r[counter] * 1e9 for r in entry["reps"] if counter in r]
        if reps:
            self.low, self.high = min(reps), max(reps)

    def ok(self):
        return self.median is not None

    def text(self):
        if not self.ok():
            return "FAILED (%s)" % self.error
        value = fmt_ns(self.median)
        if self.low is not None and self.high is not None and self.high > self.low:
            value += " (%s..%s)" % (fmt_ns(self.low), fmt_ns(self.high))
        return value


def fmt_ns(ns):
    if ns >= 10000:
        return "%.1f us" % (ns / 1000)
    if ns >= 100:
        return "%.0f ns" % ns
    return "%.2f ns" % ns


def ratio(a, b):
    if not (a.ok() and b.ok()) or b.median == 0:
        return "-"
    return "%.2fx" % (a.median / b.median)


def verdict(met):
    if met is None:
        return "-"
    return "MET" if met else "MISSED"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--switch", required=True, help="switch_bench JSON output")
    parser.add_argument("--fiber", required=True, help="fiber_bench JSON output")
    parser.add_argument("--memory", required=True, help="fiber_memory --json output")
    args = parser.parse_args()

    context, switch_runs = load_runs(args.switch)
    _, fiber_runs = load_runs(args.fiber)
    with open(args.memory) as f:
        memory = json.load(f)

    raw = Figure(switch_runs, "BM_tern_raw_switch", "per_switch")
    boost = Figure(switch_runs, "BM_boost_fcontext_switch", "per_switch")
    ucontext = Figure(switch_runs, "BM_swapcontext_switch", "per_switch")
    round_trip = Figure(switch_runs, "BM_tern_fiber_yield", "per_round_trip")
    per_yield = Figure(switch_runs, "BM_tern_fiber_yield", "per_yield")
    same_site = Figure(switch_runs, "BM_tern_fiber_yield_same_site", "per_round_trip")
    spawn = Figure(fiber_runs, "BM_tern_spawn_join", "per_spawn_join")
    chan_same = Figure(fiber_runs, "BM_tern_channel_ping_pong_same_worker", "per_round_trip")
    chan_cross = Figure(fiber_runs, "BM_tern_channel_ping_pong_cross_worker/real_time",
                        "per_round_trip")
    mutex = Figure(fiber_runs, "BM_tern_mutex_uncontended", "per_lock_unlock")
    std_mutex = Figure(fiber_runs, "BM_std_mutex_uncontended", "per_lock_unlock")

    raw_vs_boost = raw.median / boost.median if raw.ok() and boost.ok() else None
    rss = memory.get("rss_per_fiber_kib")

    env = os.environ.get
    print("## tern micro benchmarks")
    print()
    print("- CPU: %s; cores: %s" % (env("TERN_BENCH_CPU", "?"), env("TERN_BENCH_CORES", "?")))
    print("- kernel: %s; compiler: %s" % (env("TERN_BENCH_KERNEL", "?"),
                                          env("TERN_BENCH_COMPILER", "?")))
    print("- load average at start: %s; Google Benchmark %s build, %s repetitions (median, "
          "min..max)" % (env("TERN_BENCH_LOAD", "?"), context.get("library_build_type", "?"),
                         len(switch_runs.get("BM_tern_raw_switch", {}).get("reps", [])) or "?"))
    print()
    print("| measure | tern | peer | tern/peer | target | |")
    print("|---|---|---|---|---|---|")
    print("| raw context switch, per switch | %s | boost.context %s | %s | <= 0.5x boost | %s |"
          % (raw.text(), boost.text(), ratio(raw, boost),
             verdict(None if raw_vs_boost is None else raw_vs_boost <= 0.5)))
    print("| raw context switch, per switch | %s | swapcontext %s | %s | - | |"
          % (raw.text(), ucontext.text(), ratio(raw, ucontext)))
    yield_vs_raw = per_yield.median / raw.median if per_yield.ok() and raw.ok() else None
    print("| fiber yield round trip (A->B->A) | %s | - | - | <= 16 ns | %s |"
          % (round_trip.text(), verdict(round_trip.median <= 16 if round_trip.ok() else None)))
    print("| fiber yield, per yield | %s | tern raw switch %s | %s | <= 1.5x raw | %s |"
          % (per_yield.text(), raw.text(), ratio(per_yield, raw),
             verdict(None if yield_vs_raw is None else yield_vs_raw <= 1.5)))
    print("| fiber yield, per yield | %s | boost raw switch %s | %s | - | |"
          % (per_yield.text(), boost.text(), ratio(per_yield, boost)))
    print("| fiber yield round trip, both fibers in the same code | %s | - | - | <= 16 ns | %s |"
          % (same_site.text(), verdict(same_site.median <= 16 if same_site.ok() else None)))
    print("| spawn + join (pooled stack) | %s | - | - | <= 50 ns | %s |"
          % (spawn.text(), verdict(spawn.median <= 50 if spawn.ok() else None)))
    print("| channel round trip, one worker | %s | - | - | - | |" % chan_same.text())
    print("| channel round trip, two workers | %s | - | - | - | |" % chan_cross.text())
    print("| Mutex lock+unlock, uncontended | %s | std::mutex %s | %s | - | |"
          % (mutex.text(), std_mutex.text(), ratio(mutex, std_mutex)))
    if rss is None:
        print("| RSS per sleeping fiber | FAILED | - | - | <= 8 KiB | - |")
    else:
        print("| RSS per sleeping fiber (%d fibers) | %.2f KiB | - | - | <= 8 KiB | %s |"
              % (memory["fibers"], rss, verdict(rss <= 8.0)))
        pte_bytes = (memory["pte_after_kib"] - memory["pte_before_kib"]) * 1024.0 / memory["fibers"]
        print()
        print("Sleeping fibers: page tables add %.0f bytes per fiber (VmPTE, outside VmRSS); "
              "%d memory mappings after spawning (%+d) against vm.max_map_count %d; "
              "spawning took %.2f s, the whole run with shutdown %.2f s."
              % (pte_bytes, memory["maps_after"], memory["maps_after"] - memory["maps_before"],
                 memory["max_map_count"], memory["spawn_seconds"], memory["total_seconds"]))
    failed = [f.name for f in (raw, boost, ucontext, round_trip, same_site, spawn, chan_same,
                               chan_cross, mutex, std_mutex) if not f.ok()]
    if failed:
        print()
        print("FAILED benchmarks: " + ", ".join(sorted(set(failed))))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
