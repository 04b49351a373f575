#!/usr/bin/env python3
"""tern's reliability soak (issue 7): tern-bench soak against tern-echo and tern-rpc-server.

Scenarios, each against a fresh server on 127.0.0.1 with its admin endpoint on, the server on the
first CPU and the load on the second:
  echo   10,000 connections doing request/echo round trips for --seconds
  idle   10,000 idle connections: the server's RSS per connection (target <= 8 KiB)
  idle-shared  the same with tern-echo --stack-mode shared (connection fibers on the shared
         stack): bound 3 KiB per connection, which stacks of their own (about 4.2 KB) exceed;
         Release builds measure about 1.4 KiB, Debug builds (larger frames) about 2.3 KiB
  flood  50 ping-pong clients while 20,000 connects hit --max-connections 1000
  rpc    1,000 callers of BenchmarkService/Say for --seconds
  abusive  --abusive-callers callers of BenchmarkService/Say for --seconds while --abusers
         clients of each abusive kind attack the same server: zstd bombs, ping floods that never
         read, calls that are never read, pipelines reset mid-way; the callers' p99 latency must
         stay under --abusive-p99-ms and the server's RSS under --abusive-rss-mib
Every scenario must end with zero errors, its RSS and descriptor trends flat and the server's
fibers and timers back to their baseline (tern-bench soak checks each and exits non-zero).
Prints a summary table; --out writes every report as a JSON line. Exit status 1 if any failed.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import machine
import servers

ADMIN = re.compile(r"admin (\S+:\d+)")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build/release",
                        help="build directory with tools/tern-echo, tools/tern-rpc-server and "
                        "tools/tern-bench/tern-bench (default: build/release)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="seconds of load in the echo and rpc scenarios (default 60)")
    parser.add_argument("--connections", type=int, default=10000,
                        help="echo and idle connections (default 10000)")
    parser.add_argument("--callers", type=int, default=1000, help="rpc callers (default 1000)")
    parser.add_argument("--abusive-callers", type=int, default=50,
                        help="well-behaved callers of the abusive scenario (default 50)")
    parser.add_argument("--abusers", type=int, default=2,
                        help="abusive clients of each kind in the abusive scenario (default 2)")
    parser.add_argument("--abusive-p99-ms", type=float, default=250.0,
                        help="the bound on the callers' p99 call latency in the abusive "
                        "scenario, in milliseconds (default 250)")
    parser.add_argument("--abusive-rss-mib", type=float, default=256.0,
                        help="the bound on the server's RSS during the abusive scenario, in MiB "
                        "(default 256)")
    parser.add_argument("--only", action="append",
                        choices=["echo", "idle", "idle-shared", "flood", "rpc", "abusive"],
                        help="run only this scenario (repeatable)")
    parser.add_argument("--io", choices=["epoll", "uring"], default="epoll",
                        help="I/O backend of the servers and the load (default epoll)")
    parser.add_argument("--out", help="append every report to this file as a JSON line")
    return parser.parse_args()


def scenarios(args):
    """(name, server command tail, tern-bench soak arguments) of each scenario; the arguments
    name the tern-bench soak scenario that runs it."""
    load = ["--duration", str(args.seconds), "--warmup", str(min(5.0, args.seconds / 3))]
    echo = ["--mode", "echo"]
    return [
        ("echo", "tern-echo", echo, ["--scenario", "echo", "-c", str(args.connections)] + load),
        ("idle", "tern-echo", echo,
         ["--scenario", "idle", "-c", str(args.connections), "--max-idle-bytes", "8192"]),
        ("idle-shared", "tern-echo", echo + ["--stack-mode", "shared"],
         ["--scenario", "idle", "-c", str(args.connections), "--max-idle-bytes", "3072"]),
        ("flood", "tern-echo", echo + ["--max-connections", "1000"],
         ["--scenario", "flood", "-c", "50"]),
        ("rpc", "tern-rpc-server", [], ["--scenario", "rpc", "-c", str(args.callers)] + load),
        ("abusive", "tern-rpc-server", [],
         ["--scenario", "rpc", "-c", str(args.abusive_callers), "--abusers", str(args.abusers),
          "--max-p99-ms", str(args.abusive_p99_ms),
          "--max-server-rss-mib", str(args.abusive_rss_mib)] + load),
    ]


def run_one(args, name, server, server_args, soak_args):
    tools = os.path.join(args.build, "tools")
    binary = os.path.join(tools, server)
    command = [binary, "--threads", "1", "--io", args.io, "--port", "0",
               "--admin", "127.0.0.1:0"] + server_args
    cpus = machine.placement(1, 1)
    running = servers.RunningServer(server, command, cpus[0])
    try:
        admin = ADMIN.search(running.log())
        if admin is None:
            raise RuntimeError(f"{server} printed no admin address: {running.log()[-400:]}")
        bench = os.path.join(tools, "tern-bench", "tern-bench")
        load = [bench, "soak", f"tcp://127.0.0.1:{running.port}",
                "--server-pid", str(running.pid), "--admin", admin.group(1), "--io", args.io,
                "--json"] + soak_args
        print(f"soak {name}: {' '.join(load)}", file=sys.stderr, flush=True)
        # Stderr (the per-second progress) passes through; the report is the last stdout line.
        result = subprocess.run(machine.taskset(cpus[1], load), stdout=subprocess.PIPE, text=True,
                                timeout=args.seconds * 3 + 300, check=False)
    finally:
        status = running.stop()
    report = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else {
        "scenario": name, "error": "no report on stdout"}
    report["exit_status"] = result.returncode
    report["server_exit_status"] = status
    return report


SUMMARY_KEYS = ("connections_open", "round_trips_per_s", "calls_per_s", "rss_slope_kib_per_s",
                "fds_slope_per_s", "rss_per_idle_connection_bytes", "server_fibers_before",
                "server_fibers_after", "server_timers_before", "server_timers_after",
                "server_rejected", "call_p99_us", "server_rss_load_max_mib", "abuse_bombs", "abuse_pings",
                "abuse_unread_calls", "abuse_resets", "abuse_server_closes")


def summary_line(report):
    figures = report.get("figures", {})
    shown = ", ".join(f"{key} {figures[key]}" for key in SUMMARY_KEYS if key in figures)
    verdict = "ok" if report["exit_status"] == 0 else f"FAILED (exit {report['exit_status']})"
    return f"{report.get('scenario', '?'):7} {verdict}, errors {report.get('errors')}: {shown}"


def main():
    args = parse_args()
    failed = 0
    reports = []
    for name, server, server_args, soak_args in scenarios(args):
        if args.only and name not in args.only:
            continue
        report = run_one(args, name, server, server_args, soak_args)
        report["scenario"] = name
        reports.append(report)
        failed += report["exit_status"] != 0
        print(summary_line(report), flush=True)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as out:
            for report in reports:
                out.write(json.dumps(report) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
