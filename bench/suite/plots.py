#!/usr/bin/env python3
"""Draws the report's plots from a results document on stdin (run with the plotting
virtualenv's python: bench/suite/venv.sh). Prints the names of the PNG files it wrote.

    build/bench-venv/bin/python bench/suite/plots.py --output bench/plots < RESULTS.json
"""

import argparse
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from report import PEER_ORDER as ORDER, VARIANTS, label  # noqa: E402


def server_of(run):
    return run.get("suite", {}).get("server") or run.get("target", "?")


def series(runs, x_key, y_key):
    """{server: sorted [(x, y)]} over the runs that have both values."""
    out = defaultdict(list)
    for r in runs:
        x = r.get("params", {}).get(x_key)
        y = r.get("figures", {}).get(y_key)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)):
            out[server_of(r)].append((x, y))
    return {s: sorted(v) for s, v in out.items()}


def line_plot(ax, data, title, xlabel, ylabel, logy=False):
    for server in sorted(data, key=lambda s: ORDER.index(s) if s in ORDER else 99):
        xs, ys = zip(*data[server])
        # Headline tern solid, its labelled variants dotted, the peers dashed.
        style = ":^" if server in VARIANTS else "-o" if server.startswith("tern") else "--s"
        ax.plot(xs, ys, style, label=label(server),
                linewidth=2 if server.startswith("tern") else 1)
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def pingpong(runs, output):
    runs = [r for r in runs if r.get("suite", {}).get("table") == "003"]
    blocks = sorted({r.get("params", {}).get("block_bytes") for r in runs} - {None})
    if not blocks:
        return None
    fig, axes = plt.subplots(1, len(blocks), figsize=(5 * len(blocks), 4), squeeze=False)
    for ax, block in zip(axes[0], blocks):
        chosen = [r for r in runs if r["params"].get("block_bytes") == block
                  and r["params"].get("threads") == 1]
        line_plot(ax, series(chosen, "sessions", "mb_per_s"),
                  f"pingpong, {block // 1024} KiB blocks, 1 thread", "sessions", "MB/s")
    fig.tight_layout()
    name = "pingpong_throughput.png"
    fig.savefig(os.path.join(output, name), dpi=110)
    return name


def sessions(runs, output):
    runs = [r for r in runs if r.get("suite", {}).get("table") == "004"]
    if not runs:
        return []
    names = []
    fig, ax = plt.subplots(figsize=(6, 4))
    line_plot(ax, series(runs, "in_flight", "sessions_per_s"),
              "short sessions: throughput", "sessions in flight", "sessions/s")
    fig.tight_layout()
    names.append("sessions_throughput.png")
    fig.savefig(os.path.join(output, names[-1]), dpi=110)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    line_plot(axes[0], series(runs, "in_flight", "mean_us"), "short sessions: mean latency",
              "sessions in flight", "µs", logy=True)
    line_plot(axes[1], series(runs, "in_flight", "p99_us"), "short sessions: p99 latency",
              "sessions in flight", "µs", logy=True)
    fig.tight_layout()
    names.append("sessions_latency.png")
    fig.savefig(os.path.join(output, names[-1]), dpi=110)
    return names


def rpc(runs, output):
    runs = [r for r in runs if r.get("suite", {}).get("table") == "001"]
    if not runs:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    line_plot(axes[0], series(runs, "concurrency", "tps"), "RPC (report 001): throughput",
              "clients (a connection each)", "calls/s")
    line_plot(axes[1], series(runs, "concurrency", "p99_us"), "RPC (report 001): p99 latency",
              "clients (a connection each)", "µs", logy=True)
    fig.tight_layout()
    name = "rpc_throughput_latency.png"
    fig.savefig(os.path.join(output, name), dpi=110)
    return name


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", required=True, help="directory for the PNG files")
    args = parser.parse_args()
    results = json.load(sys.stdin)
    os.makedirs(args.output, exist_ok=True)
    runs = results.get("runs", [])
    written = [pingpong(runs, args.output)] + sessions(runs, args.output) + [rpc(runs, args.output)]
    print(" ".join(n for n in written if n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
