#!/usr/bin/env python3
"""Turns the raw results of bench/suite/io.sh into one JSON file and a markdown report.

  io_report.py --cell CLIENT_JSON_LINE     (one line about one pingpong result)
  io_report.py --wait-quiet SECONDS        (wait for an idle machine)
  io_report.py --proc-stat                 (the /proc/stat CPU counters, JSON)
  io_report.py --machine M.json --ttcp T.json --pingpong P.jsonl --json OUT.json --markdown OUT.md

Targets (from the I/O issue): ttcp tern >= 0.98x blocking; pingpong tern >= 1.2x asio in every
cell on both backends. Cells repeated over several rounds report the median.
"""

import argparse
import json
import os
import statistics
import sys
import time

TTCP_TARGET = 0.98
PINGPONG_TARGET = 1.2


def load_json(path):
    if not path or not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path) as f:
        return json.load(f)


def load_lines(path):
    if not path or not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def pingpong_cells(runs):
    """{(threads, sessions): {server: {"mb": median MB/s, "mib": ..., "ok": bool, ...}}}"""
    cells = {}
    for run in runs:
        key = (run["server_threads"], run["sessions"])
        entry = cells.setdefault(key, {}).setdefault(
            run["server"], {"mb": [], "mib": [], "ok": True, "errors": [], "placement": ""})
        client = run["client"]
        entry["placement"] = run["placement"]
        if "stat_before" in run and "client_cpu_user_s" in client:
            own = run["server_cpu_s"] + client["client_cpu_user_s"] + client["client_cpu_sys_s"]
            pct = others_cpu(run["stat_before"], run["stat_after"], own, run.get("cpus", 1))
            if pct is not None:
                entry.setdefault("others", []).append(pct)
        if client.get("verified") and "mb_per_s" in client:
            entry["mb"].append(client["mb_per_s"])
            entry["mib"].append(client["mib_per_s"])
        else:
            entry["ok"] = False
            entry["errors"].append(client.get("error", "no result"))
    for servers in cells.values():
        for entry in servers.values():
            values = entry["mb"]
            entry["spread"] = ((max(values) - min(values)) / statistics.median(values)
                               if len(values) > 1 else None)
            entry["mb"] = statistics.median(entry["mb"]) if entry["mb"] else None
            entry["mib"] = statistics.median(entry["mib"]) if entry["mib"] else None
            entry["others"] = max(entry["others"]) if entry.get("others") else None
    return cells


def ratio(a, b):
    return a / b if a and b else None


def fmt(value, spec=".1f"):
    return "-" if value is None else format(value, spec)


def verdict(value, target):
    if value is None:
        return "n/a"
    return "ok" if value >= target else "MISSED"


def proc_stat_cpu():
    """The aggregate 'cpu' line of /proc/stat: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                return [int(v) for v in line.split()[1:9]]
    return [0] * 8


def wait_quiet(limit):
    """Waits up to `limit` seconds for the machine to be at least 90% idle over half a second
    (another build or benchmark running makes these numbers meaningless); says how it went."""
    start = time.monotonic()
    while True:
        before = proc_stat_cpu()
        time.sleep(0.5)
        after = proc_stat_cpu()
        delta = [b - a for a, b in zip(before, after)]
        idle = (delta[3] + delta[4]) / max(1, sum(delta))
        waited = time.monotonic() - start
        if idle >= 0.9:
            return f"quiet ({idle:.0%} idle) after {waited:.0f} s"
        if waited >= limit:
            return f"BUSY: only {idle:.0%} idle after waiting {waited:.0f} s"


def others_cpu(before, after, own_seconds, cpus):
    """Percent of the machine's CPU time (all CPUs) used by other processes between two
    /proc/stat snapshots, given the CPU seconds the benchmark's own processes used. Interrupt
    and softirq time (the loopback's receive path) counts as the benchmark's."""
    tick = os.sysconf("SC_CLK_TCK")
    delta = [b - a for a, b in zip(before, after)]
    total = sum(delta)
    if total <= 0:
        return None
    busy = total - delta[3] - delta[4] - delta[5] - delta[6] - delta[7]
    others = max(0.0, busy - own_seconds * tick)
    return 100.0 * others / total


def describe_cell(line):
    """One line about one pingpong client result (the JSON it printed)."""
    client = json.loads(line)
    if "mb_per_s" not in client:
        return "FAILED: " + client.get("error", "no result")
    text = f"{client['mb_per_s']:.1f} MB/s ({client['mib_per_s']:.1f} MiB/s)"
    return text if client.get("verified") else text + " FAILED: " + client.get("error", "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", help="print one line about one client result and exit")
    parser.add_argument("--wait-quiet", type=float, metavar="SECONDS",
                        help="wait until the machine is idle (at most SECONDS), say how it went")
    parser.add_argument("--proc-stat", action="store_true",
                        help="print the /proc/stat cpu counters as a JSON list")
    parser.add_argument("--machine")
    parser.add_argument("--ttcp")
    parser.add_argument("--pingpong")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if args.wait_quiet is not None:
        print(wait_quiet(args.wait_quiet))
        return 0
    if args.proc_stat:
        print(json.dumps(proc_stat_cpu()))
        return 0
    if args.cell is not None:
        print(describe_cell(args.cell))
        return 0
    if not args.machine:
        parser.error("--machine is required")

    machine = load_json(args.machine) or {}
    ttcp = load_json(args.ttcp)
    runs = load_lines(args.pingpong)
    cells = pingpong_cells(runs)

    out = []
    out.append(f"# tern I/O benchmarks, {machine.get('stamp', '?')}")
    out.append("")
    out.append(f"- machine: {machine.get('cpu', '?')}, {machine.get('cpus_usable', '?')} usable "
               f"CPUs, {machine.get('kernel', '?')}; load before: "
               f"{machine.get('load_before', '?')}")
    out.append(f"- build: {machine.get('compiler', '?')}; peer: {machine.get('asio', '?')}")
    out.append("")

    summary = {"machine": machine, "ttcp": ttcp, "pingpong": [], "targets": {}}
    misses = []

    if ttcp:
        out.append(f"## ttcp (SEEDS 002): {ttcp['messages']} messages x {ttcp['length']} bytes, "
                   f"stop-and-wait over 127.0.0.1, median of {ttcp['repeat']} runs")
        out.append("")
        out.append("| variant | placement | MiB/s | us/message | vs blocking (same placement) | "
                   "target >= 0.98x |")
        out.append("|---|---|---:|---:|---:|---|")
        for v in ttcp["variants"]:
            is_tern = v["name"].startswith("tern")
            r = v["ratio_vs_blocking"] or None
            mark = verdict(r, TTCP_TARGET) if is_tern else ""
            if is_tern and mark == "MISSED":
                misses.append(f"ttcp {v['name']} ({v.get('placement', '?')}): {r:.3f}x blocking")
            out.append(f"| {v['name']} | {v.get('placement', '-')} | {v['median_mib_per_s']:.2f} | "
                       f"{v['usec_per_message']:.2f} | {fmt(r, '.3f')}x | {mark} |")
        out.append("")
        out.append("blocking: a server thread and a client thread on blocking sockets; tern-X-1: "
                   "the server and the client fiber on one worker (the seed's single-thread "
                   "coroutine setup); tern-X-2: server fiber on worker 0, client fiber on worker 1. "
                   "Placement split: server thread on the first CPU, client thread on the second; "
                   "same: both on the first CPU.")
        out.append("")
        if not ttcp.get("verified", False):
            out.append("**ttcp: a run FAILED its verification**")
            out.append("")

    if cells:
        block = machine.get("block", 16384)
        out.append(f"## pingpong (SEEDS 003): {block // 1024} KiB blocks, "
                   f"{machine.get('pingpong_seconds', '?')} s per cell, "
                   f"{machine.get('pingpong_rounds', 1)} round(s), MB/s = 10^6 B/s (MiB/s)")
        out.append("")
        out.append("| server threads | sessions | tern epoll | tern uring | asio | epoll/asio | "
                   "uring/asio | faster tern backend | target >= 1.2x | spread | others' CPU |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|")
        placements = {}
        for (threads, sessions) in sorted(cells):
            servers = cells[(threads, sessions)]
            epoll = servers.get("tern-epoll", {})
            uring = servers.get("tern-uring", {})
            asio = servers.get("asio", {})
            r_epoll = ratio(epoll.get("mb"), asio.get("mb"))
            r_uring = ratio(uring.get("mb"), asio.get("mb"))
            if epoll.get("mb") and uring.get("mb"):
                faster = "epoll" if epoll["mb"] >= uring["mb"] else "uring"
                faster += f" ({max(epoll['mb'], uring['mb']) / min(epoll['mb'], uring['mb']):.2f}x)"
            else:
                faster = "-"
            marks = []
            for name, r in (("epoll", r_epoll), ("uring", r_uring)):
                mark = verdict(r, PINGPONG_TARGET)
                marks.append(f"{name} {mark}")
                if mark != "ok":
                    misses.append(f"pingpong threads {threads} sessions {sessions} {name}: "
                                  f"{fmt(r, '.2f')}x asio")

            def cell(entry):
                if not entry:
                    return "-"
                if not entry.get("ok", True) and entry.get("mb") is None:
                    return "FAILED"
                text = f"{fmt(entry.get('mb'))} ({fmt(entry.get('mib'))})"
                return text if entry.get("ok", True) else text + " FAILED"

            noise = [e.get("others") for e in (epoll, uring, asio) if e.get("others") is not None]
            spreads = [e.get("spread") for e in (epoll, uring, asio) if e.get("spread") is not None]
            spread_text = f"{max(spreads):.0%}" if spreads else "-"
            out.append(f"| {threads} | {sessions} | {cell(epoll)} | {cell(uring)} | {cell(asio)} | "
                       f"{fmt(r_epoll, '.2f')}x | {fmt(r_uring, '.2f')}x | {faster} | "
                       f"{', '.join(marks)} | {spread_text} | "
                       f"{fmt(max(noise) if noise else None, '.0f')}% |")
            placements[threads] = (epoll or uring or asio).get("placement", "")
            summary["pingpong"].append({
                "server_threads": threads, "sessions": sessions,
                "tern_epoll_mb_per_s": epoll.get("mb"), "tern_epoll_mib_per_s": epoll.get("mib"),
                "tern_uring_mb_per_s": uring.get("mb"), "tern_uring_mib_per_s": uring.get("mib"),
                "asio_mb_per_s": asio.get("mb"), "asio_mib_per_s": asio.get("mib"),
                "ratio_epoll_vs_asio": r_epoll, "ratio_uring_vs_asio": r_uring,
                "others_cpu_pct": max(noise) if noise else None,
                "round_spread": max(spreads) if spreads else None,
                "verified": all(e.get("ok", True) for e in (epoll, uring, asio)),
                "errors": sum((e.get("errors", []) for e in (epoll, uring, asio)), []),
            })
        out.append("")
        for threads, placement in sorted(placements.items()):
            out.append(f"- server threads {threads} (client threads {threads}): {placement}")
        out.append(f"- client: tern pingpong_client, --io {machine.get('client_io', '?')}; "
                   "servers: tern-echo --io epoll|uring, asio_echo (an io_context per thread)")
        out.append("- spread: the largest (max - min) / median over the rounds among the three "
                   "servers of that row (run-to-run noise)")
        out.append("- others' CPU: the largest share of the machine's CPU time that processes "
                   "other than the server and the client used during a cell of that row (noise)")
        out.append("")

    out.append("## targets")
    out.append("")
    if misses:
        out.append("Missed:")
        out.extend(f"- {m}" for m in misses)
    else:
        out.append("Every target met.")
    out.append("")
    summary["targets"] = {"ttcp_min_ratio": TTCP_TARGET, "pingpong_min_ratio": PINGPONG_TARGET,
                          "missed": misses}
    summary["pingpong_runs"] = runs

    text = "\n".join(out)
    with open(args.markdown, "w") as f:
        f.write(text)
    with open(args.json, "w") as f:
        json.dump(summary, f, indent=1)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
