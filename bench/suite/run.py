#!/usr/bin/env python3
"""tern's benchmark suite: every table of the benchmark reports tern reproduces
(docs/benchmark-methods.md), tern and its peers side by side, in one run on this machine.
`make bench` runs the quick pass (within 8 minutes on 2 CPUs); `make bench FULL=1` the full
matrix (within 45). Writes bench/results/<UTC stamp>.json (raw: every run and the machine), then
the report and its plots (bench/suite/report.py): bench/REPORT.md for the quick pass,
bench/full/REPORT.md for the full one. Each table has a time budget (tables.TABLES); the run
prints each table's time beside it. Older results of the same pass are pruned from
bench/results (git history keeps them).

Servers listen on 127.0.0.1 port 0 and are stopped after each cell; every cell is bounded in
time. Before each round of a comparison the suite waits (at most --quiet-wait seconds, and at
most --quiet-budget seconds over the whole pass) for the machine to be 90% idle; the cells of a
round follow each other without a gap, and every cell records how much CPU other processes took
while it ran.

Exit status: 1 when a tern cell fails (tern's server or client did not do the work, or its work
was not verified), when the report cannot be written, or when the suite itself breaks; a peer that
cannot run a cell (its own limit or bug) is recorded with the reason in the results and in the
report's "Problems in this run", printed at the end, and leaves the status 0."""

import argparse
import atexit
import datetime
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import failover  # noqa: E402
import hooks  # noqa: E402
import machine  # noqa: E402
import servers  # noqa: E402
import tables  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def idle_poll_args(server_name):
    """tern-echo's, tern-rpc-server's and tern-bench's extra arguments in a cell against
    `server_name`: none for every headline server (tern runs at its defaults, which never poll);
    `--idle-poll` for the labelled polling variant (tables.IDLE_POLL_VARIANTS), server and
    tern-bench client alike."""
    poll = tables.IDLE_POLL_VARIANTS.get(server_name)
    return ["--idle-poll", poll] if poll else []


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=os.path.join(REPO, "build", "release"),
                        help="release build directory with TERN_BUILD_BENCH=ON (default: %(default)s)")
    parser.add_argument("--full", action="store_true",
                        help="the whole matrix (at most 45 minutes in three rounds; the quick "
                        "pass at most 8)")
    parser.add_argument("--only", default="",
                        help="comma-separated tables (by the start of their name): "
                        + ",".join(tables.TABLES))
    parser.add_argument("--group", action="append", default=[],
                        help="only the comparisons whose name contains this text, e.g. "
                        "'003 16384 B 2 t 10 s' (repeatable; the names are in --list's output)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds per time-bound cell (default: 2 quick, 3 full; the rates "
                        "are steady by then, docs/benchmarks.md)")
    parser.add_argument("--quiet-wait", type=float, default=2.0,
                        help="wait at most this long before each round of a comparison for an "
                        "idle machine (default: %(default)s)")
    parser.add_argument("--quiet-budget", type=float, default=None,
                        help="stop waiting for an idle machine once the pass has waited this "
                        "long in all (default: 30 quick, 120 full)")
    parser.add_argument("--results", default=os.path.join(REPO, "bench", "results"),
                        help="directory for the raw JSON results (default: %(default)s)")
    parser.add_argument("--report", default=None,
                        help="the markdown report to write (default: bench/REPORT.md, "
                        "bench/full/REPORT.md with --full)")
    parser.add_argument("--keep-results", action="store_true",
                        help="keep older results files of this pass in --results (by default "
                        "only the latest quick and the latest full pass stay)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs of every comparison (one load, each server once) in 000, 001, 003 "
                             "and 004, in a rotated server order; the report takes each server's "
                             "median (default: %(default)s)")
    parser.add_argument("--list", action="store_true", help="print the cells and exit")
    return parser.parse_args()


def children_ticks():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * machine.CLOCK_TICKS


def describe_cell(cell):
    words = ([f"[{cell['group']}]"] if cell.get("group") else []) + [cell["mode"]] + [
        a for a in cell["args"] if a not in ("--json",)]
    if cell.get("server"):
        words.append(f"vs {cell['server']}")
    if cell.get("rounds", 1) > 1:
        words.append(f"(round {cell['round']}/{cell['rounds']})")
    return " ".join(words)


def parse_json_lines(text):
    runs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                runs.append(normalized(json.loads(line)))
            except ValueError:
                pass
    return runs


def normalized(run):
    """A run in tern-bench's shape: switch_peers prints its figures at the top level."""
    if "figures" not in run:
        numbers = {k: v for k, v in run.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool)}
        run["figures"] = numbers
        run["params"] = {"switches": numbers.get("switches")}
    return run


class Suite:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.catalog = servers.Catalog(self.build)
        self.tern_bench = os.path.join(self.build, "tools", "tern-bench", "tern-bench")
        self.switch_peers = os.path.join(self.build, "bench", "switch_peers")
        # Every failed cell: {"cell": its description, "owner": "tern" or "peer", "problem"}.
        self.failures = []
        self.tls = None
        self.quiet_waited = 0.0

    def wait_for_quiet(self, cell):
        """Before the first cell of a round of a comparison, or a cell outside any: waits for an
        idle machine, at most --quiet-wait and what is left of --quiet-budget. The other cells of
        a round follow at once, so the servers of a round share its conditions. Returns the note
        the cell records ("idle 95%", ...)."""
        if not cell.get("round_start", True):
            return "in a round, right after the cell before"
        wait = min(self.args.quiet_wait, self.args.quiet_budget - self.quiet_waited)
        if wait <= 0:
            return "not checked (the pass spent its --quiet-budget)"
        started = time.monotonic()
        note = machine.wait_until_quiet(wait)
        self.quiet_waited += time.monotonic() - started
        return note

    def tls_files(self):
        """(certificate, key): a self-signed ECDSA P-256 certificate for 127.0.0.1, made once
        per run with the openssl command line in a folder removed at exit."""
        if self.tls is None:
            folder = tempfile.mkdtemp(prefix="tern-bench-tls-")
            atexit.register(shutil.rmtree, folder, True)
            cert, key = os.path.join(folder, "server.crt"), os.path.join(folder, "server.key")
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-subj",
                            "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                            "-keyout", key, "-out", cert],
                           check=True, capture_output=True)
            self.tls = (cert, key)
        return self.tls

    def program(self, cell):
        return self.switch_peers if cell.get("program") == "switch_peers" else self.tern_bench

    def record_failure(self, cell, problem):
        """Notes that `cell` failed with `problem`; returns whose failure it is ("tern" or
        "peer", tables.failure_owner)."""
        owner = tables.failure_owner(cell)
        self.failures.append({"cell": describe_cell(cell), "owner": owner, "problem": problem})
        return owner

    def run_cell(self, cell):
        """Runs one cell; returns the list of run records it produced."""
        try:
            return self.run_server_cell(cell)
        except RuntimeError as error:  # the server did not start (servers.RunningServer)
            problem = str(error)
            run = {"mode": cell["mode"], "target": cell.get("server") or cell["mode"],
                   "verified": False, "figures": {}}
            run["suite"] = {
                "table": cell["table"], "server": cell.get("server"),
                "server_threads": cell.get("server_threads", 0),
                "client_threads": cell.get("client_threads", 1), "placement": "",
                "before": "", "other_cpu_pct": 0.0, "command": "", "label": cell.get("label", ""),
                "problem": problem, "group": cell.get("group"), "round": cell.get("round", 1),
                "rounds": cell.get("rounds", 1),
                "problem_owner": self.record_failure(cell, problem)}
            return [run]

    def run_server_cell(self, cell):
        """run_cell's work; raises RuntimeError when the cell's server does not start."""
        quiet = self.wait_for_quiet(cell)
        server_name = cell.get("server")
        server_threads = cell.get("server_threads", 0)
        client_threads = cell.get("client_threads", 1)
        server_cpus, client_cpus, placement = ([], [], "one process")
        server = None
        command = [self.program(cell)]
        if cell.get("program") != "switch_peers":
            command += [cell["mode"]] + cell["args"] + ["--json", "--quiet"]
        else:
            command += cell["args"]
        if server_name:
            server_cpus, client_cpus, placement = machine.placement(server_threads,
                                                                    client_threads)
            idle_poll = idle_poll_args(server_name)
            if idle_poll:
                placement += (f"; {server_name}: tern's idle workers poll {idle_poll[1]} before "
                              "sleeping while a CPU is spare")
            server_command = self.catalog.command(server_name, server_threads,
                                                  cell.get("server_mode", "echo"),
                                                  cell.get("buf", 16384),
                                                  self.tls_files() if cell.get("tls") else None
                                                  ) + idle_poll
            server = servers.RunningServer(server_name, server_command, server_cpus)
            # The test certificate is self-signed: it is its own CA.
            tls_ca = self.tls_files()[0] if cell.get("tls_verify") else None
            if cell.get("client") == "peer":
                command = self.catalog.rpc_client_command(server_name, server.port, cell["args"],
                                                          tls_ca)
            elif cell.get("client") == "peer-stream":
                command = self.catalog.stream_client_command(server_name, server.port,
                                                             cell["args"])
            else:
                command[2:2] = [f"tcp://127.0.0.1:{server.port}", "--name", server_name,
                                "--server-pid", str(server.pid)] + idle_poll
                if tls_ca:
                    command[-2:-2] = ["--tls-ca", tls_ca]
        command = machine.taskset(client_cpus, command)

        busy0, total0 = machine.busy_and_total_ticks()
        client0 = children_ticks()
        server0 = machine.process_ticks(server.pid) if server else 0
        started = time.monotonic()
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=900)
            status, stdout, stderr = out.returncode, out.stdout, out.stderr
        except subprocess.TimeoutExpired as timeout:
            status, stdout, stderr = -1, timeout.stdout or "", "timed out after 900 s"
            if isinstance(stdout, bytes):
                stdout = stdout.decode(errors="replace")
        elapsed = time.monotonic() - started
        server_ticks = (machine.process_ticks(server.pid) or server0) - server0 if server else 0
        busy1, total1 = machine.busy_and_total_ticks()
        client_ticks = children_ticks() - client0
        server_status = server.stop() if server else 0
        other_pct = max(0.0, (busy1 - busy0) - server_ticks - client_ticks) / max(
            elapsed, 1e-9) / machine.CLOCK_TICKS * 100.0

        runs = parse_json_lines(stdout)
        problem = None
        if status != 0:
            problem = f"exit status {status}: {(stderr.strip() or failed_work(runs))[-400:]}"
        elif not runs:
            problem = f"no JSON result: {stderr.strip()[-400:]}"
        if server and server_status not in (0, None):
            problem = (problem + "; " if problem else "") + (
                f"{server_name} exited with status {server_status}: {server.log()[-400:]}")
        elif server and problem:
            said = server_said(server.log())
            if said:
                problem += f"; {server_name} said: {said[-400:]}"
        if not runs:
            runs = [{"mode": cell["mode"], "target": server_name or cell["mode"],
                     "verified": False, "figures": {}}]
        for run in runs:
            run["suite"] = {
                "table": cell["table"], "server": server_name, "server_threads": server_threads,
                "client_threads": client_threads, "placement": placement, "before": quiet,
                "other_cpu_pct": round(other_pct, 1), "command": " ".join(command),
                "label": cell.get("label", ""), "problem": problem,
                "group": cell.get("group"), "round": cell.get("round", 1),
                "rounds": cell.get("rounds", 1),
            }
            if problem:
                run["verified"] = False
            if server:  # every server's CPU over the whole cell, as the suite measures it
                run["suite"]["server_cpu_s_cell"] = round(server_ticks / machine.CLOCK_TICKS, 3)
                run["suite"]["cell_s"] = round(elapsed, 3)
            # The RPC peers' own clients do not measure the server: the suite's measurement over
            # the whole cell (start-up included) stands in, so every server gets a CPU figure.
            if server and run.get("server_cpu_pct") is None:
                run["server_cpu_pct"] = round(
                    server_ticks / max(elapsed, 1e-9) / machine.CLOCK_TICKS * 100.0, 1)
                run["suite"]["server_cpu_measured_by"] = "suite"
        if problem:
            owner = self.record_failure(cell, problem)
            for run in runs:
                run["suite"]["problem_owner"] = owner
        return runs

    def run_hook_cell(self, cell):
        """Runs a hooks-table cell that is not a tern-bench run (hooks.py); returns its runs."""
        quiet = self.wait_for_quiet(cell)
        busy0, _ = machine.busy_and_total_ticks()
        children0 = children_ticks()
        started = time.monotonic()
        try:
            if cell["kind"] == "redis":
                run = hooks.run_redis_cell(self.build, cell, children_ticks)
            else:
                run = hooks.run_micro_cell(self.build, cell)
        except (RuntimeError, OSError) as error:
            run = {"mode": cell["mode"], "target": cell.get("client", cell["mode"]),
                   "verified": False, "figures": {}, "problem": str(error), "command": ""}
        elapsed = max(time.monotonic() - started, 1e-9)
        busy1, _ = machine.busy_and_total_ticks()
        # The client and redis-server are this process's children, reaped by now.
        other_pct = max(0.0, (busy1 - busy0) - (children_ticks() - children0)) / elapsed / (
            machine.CLOCK_TICKS) * 100.0
        problem = run.pop("problem")
        run["suite"] = {
            "table": cell["table"], "server": None, "placement": "not pinned", "before": quiet,
            "other_cpu_pct": round(other_pct, 1), "command": run.pop("command"),
            "label": cell.get("label", ""), "problem": problem, "group": cell.get("group"),
            "round": cell.get("round", 1), "rounds": cell.get("rounds", 1)}
        if problem:
            run["suite"]["problem_owner"] = self.record_failure(cell, problem)
        return [run]

    def run_failover_cell(self, cell):
        """Runs a failover-table cell (failover.py: three servers, tern-bench failover); returns
        its runs."""
        quiet = self.wait_for_quiet(cell)
        busy0, _ = machine.busy_and_total_ticks()
        children0 = children_ticks()
        started = time.monotonic()
        run, command, problem = failover.run_cell(self.build, self.catalog, cell)
        elapsed = max(time.monotonic() - started, 1e-9)
        busy1, _ = machine.busy_and_total_ticks()
        other_pct = max(0.0, (busy1 - busy0) - (children_ticks() - children0)) / elapsed / (
            machine.CLOCK_TICKS) * 100.0
        if run is None:
            run = {"mode": "failover", "target": cell["server"], "verified": False,
                   "params": {"fault": cell["fault"]}, "figures": {}}
        run["suite"] = {
            "table": cell["table"], "server": cell["server"], "placement": "not pinned",
            "before": quiet, "other_cpu_pct": round(other_pct, 1), "command": command,
            "label": cell.get("label", ""), "problem": problem, "group": cell.get("group"),
            "round": cell.get("round", 1), "rounds": cell.get("rounds", 1)}
        if problem:
            run["verified"] = False
            run["suite"]["problem_owner"] = self.record_failure(cell, problem)
        return [run]

    def run(self, cells):
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        os.makedirs(self.args.results, exist_ok=True)
        path = os.path.join(self.args.results, f"{stamp}.json")
        info = machine.describe(self.build)
        info["stamp"] = stamp
        info["pass"] = "full" if self.args.full else "quick"
        info["rounds"] = self.args.rounds
        # A run of some tables or comparisons: its report sections merge into the pass's report.
        info["only"] = ",".join(filter(None, [self.args.only] + self.args.group))
        info["seconds_per_cell"] = self.args.seconds
        info["cells_planned"] = len(cells)
        budgets = {name: tables.budget_seconds(name, self.args.full)
                   for name in dict.fromkeys(c["suite_table"] for c in cells)}
        info["table_budget_s"] = budgets
        info["table_s"] = {}
        pass_started = time.monotonic()
        result = {"machine": info, "peers": self.catalog.versions,
                  "skipped": self.catalog.skipped, "runs": []}
        for kind in sorted({c["kind"] for c in cells if c.get("kind")}):
            reason = failover.missing(self.build) if kind == "failover" else hooks.missing(
                self.build, kind)
            if reason:
                self.catalog.skipped[kind_name(kind)] = reason
        for name, reason in self.catalog.skipped.items():
            print(f"suite: skip {name}: {reason}", flush=True)
        print(f"suite: {len(cells)} cells on {info['cpu']}, {info['cpus_usable']} CPUs, "
              f"{info['kernel']}; results in {path}", flush=True)
        for index, cell in enumerate(cells, 1):
            if cell.get("server") and cell["server"] in self.catalog.skipped:
                continue
            if cell.get("client") == "peer-stream" and "grpc-stream" in self.catalog.skipped:
                continue
            if cell.get("kind") and kind_name(cell["kind"]) in self.catalog.skipped:
                continue
            started = time.monotonic()
            if cell.get("kind") == "failover":
                runs = self.run_failover_cell(cell)
            elif cell.get("kind"):
                runs = self.run_hook_cell(cell)
            else:
                runs = self.run_cell(cell)
            seconds = time.monotonic() - started
            for run in runs:
                run["suite"]["suite_table"] = cell["suite_table"]
                run["suite"]["cell_s"] = round(seconds, 2)
            table_s = info["table_s"]
            table_s[cell["suite_table"]] = round(table_s.get(cell["suite_table"], 0) + seconds, 1)
            info["pass_s"] = round(time.monotonic() - pass_started, 1)
            result["runs"].extend(runs)
            with open(path, "w") as f:
                json.dump(result, f, indent=1)
            print(f"[{index}/{len(cells)}] {describe_cell(cell)}: "
                  f"{'; '.join(summarize(r) for r in runs)} "
                  f"({seconds:.1f} s, {runs[0]['suite']['before']})",
                  flush=True)
            following = cells[index] if index < len(cells) else None
            if not following or following["suite_table"] != cell["suite_table"]:
                name = cell["suite_table"]
                for line in budget_lines({name: table_s[name]}, {name: budgets[name]}):
                    print(f"suite: {line}", flush=True)
        info["loadavg_after"] = machine.read_sysctl("loadavg", root="/proc")
        info["quiet_waited_s"] = round(self.quiet_waited, 1)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)
        print(f"suite: {info['pass']} pass took {info.get('pass_s', 0):.0f} s "
              f"({self.quiet_waited:.0f} s of it waiting for an idle machine); load average "
              f"before {info['loadavg_before']}, after {info['loadavg_after']}", flush=True)
        for line in budget_lines(info["table_s"], budgets):
            print(f"suite: {line}", flush=True)
        return path


def failed_work(runs):
    """What a client that exited non-zero without a word on stderr (--quiet) reported: its first
    error messages and how many of its sessions or calls failed."""
    parts = []
    for run in runs:
        figures = run.get("figures", {})
        failed = figures.get("failed", run.get("errors"))
        done = figures.get("sessions", figures.get("calls"))
        if isinstance(failed, (int, float)) and failed and isinstance(done, (int, float)):
            unit = "sessions" if "sessions" in figures else "calls"
            parts.append(f"{failed:g} failed, {done:g} {unit} verified")
        parts.extend(run.get("error_messages", [])[:3])
    return "; ".join(parts)


# A server's last line when it stops with nothing to say ("grpc_rpc_server: stopped").
BARE_STOP_LINE = re.compile(r"^\S+: stopped$")


def server_said(log):
    """The lines a server printed besides its start line and a bare stop line (a peer saying why
    it refused work, tern-echo's counts as it stops)."""
    lines = [line for line in log.splitlines()
             if line.strip() and not servers.START_LINE.search(line)
             and not BARE_STOP_LINE.match(line.strip())]
    return " / ".join(lines[-5:])


def exit_status(failures, report_status):
    """run.py's exit status: 1 when a tern cell failed or the report was not written (the suite is
    broken), 0 when only peers failed (recorded and reported, not tern's failure)."""
    if report_status != 0 or any(f["owner"] == "tern" for f in failures):
        return 1
    return 0


def default_report(full):
    """Where a pass writes its report: bench/REPORT.md (quick) or bench/full/REPORT.md."""
    return os.path.join(REPO, "bench", *(["full"] if full else []), "REPORT.md")


def budget_lines(table_seconds, budgets):
    """One line per table: its wall time in this pass beside its budget (tables.TABLES)."""
    lines = []
    for name, budget in budgets.items():
        spent = table_seconds.get(name)
        if spent is None:
            continue
        over = f", {spent - budget:.0f} s OVER" if round(spent) > budget else ""
        lines.append(f"table {name}: {spent:.0f} s of its {budget} s budget{over}")
    return lines


# A results file of this suite: bench/results/<UTC stamp>.json.
RESULTS_NAME = re.compile(r"^\d{8}T\d{6}Z\.json$")


def results_to_prune(directory, latest):
    """The results files in `directory` that the latest pass `latest` (a results file just
    written) makes obsolete: every other whole pass of the same kind (quick or full), and every
    run of some tables (--only) older than the newest whole quick pass. Kept: the newest whole
    quick pass, the newest whole full pass, and the runs of some tables made since the newest
    whole quick pass (their sections are merged into bench/REPORT.md). Files of other tools and
    files that are not results of this suite are never touched."""
    passes = []
    for name in sorted(os.listdir(directory)):
        if not RESULTS_NAME.match(name):
            continue
        try:
            with open(os.path.join(directory, name)) as f:
                info = json.load(f).get("machine", {})
        except (OSError, ValueError):
            continue
        kind = "part" if info.get("only") else info.get("pass", "quick")
        passes.append((name, kind))
    newest = {}
    for name, kind in passes:
        newest[kind] = name  # sorted by stamp
    prune = []
    for name, kind in passes:
        if os.path.abspath(os.path.join(directory, name)) == os.path.abspath(latest):
            continue
        if kind in ("quick", "full") and name != newest[kind]:
            prune.append(name)
        elif kind == "part" and name < newest.get("quick", ""):
            prune.append(name)
    return [os.path.join(directory, name) for name in prune]


def kind_name(kind):
    """The name under which cells of `kind` are reported skipped."""
    return "failover" if kind == "failover" else f"hooks ({kind})"


def summarize(run):
    """One short line for a run record."""
    figures = run.get("figures", {})
    keys = ["mb_per_s", "pkg_per_s", "sessions_per_s", "mib_per_s", "ns_per_switch",
            "calls_per_s", "tps", "rps", "fiber_extra_ns", "p99_us", "first_retry_ms",
            "idempotent_lost", "non_idempotent_status", "p99_window_ms",
            "peak_buffered_bytes_max", "server_rss_growth_kib"]
    parts = [f"{k}={figures[k]:.6g}" for k in keys if isinstance(figures.get(k), (int, float))]
    if not run.get("verified", False):
        parts.append("NOT VERIFIED")
    name = run.get("suite", {}).get("server") or run.get("target", "?")
    return f"{name}: " + " ".join(parts)


def main():
    args = parse_args()
    args.seconds = seconds = args.seconds or (3.0 if args.full else 2.0)
    if args.quiet_budget is None:
        args.quiet_budget = 120.0 if args.full else 30.0
    if args.report is None:
        args.report = default_report(args.full)
    only = [o.strip() for o in args.only.split(",") if o.strip()]
    if args.rounds < 1:
        print(f"suite: --rounds {args.rounds}: expected 1 or more", file=sys.stderr)
        return 2
    cells = tables.all_cells(args.full, seconds, only)
    if args.group:
        cells = [c for c in cells if any(g in (c.get("group") or "") for g in args.group)]
    cells = tables.in_rounds(cells, args.rounds)
    if args.list:
        for cell in cells:
            print(describe_cell(cell))
        estimates = tables.estimated_seconds(cells)
        for name, estimate in estimates.items():
            print(f"table {name}: about {estimate:.0f} s of its "
                  f"{tables.budget_seconds(name, args.full)} s budget")
        print(f"{'full' if args.full else 'quick'} pass: about {sum(estimates.values()):.0f} s")
        return 0
    # Headline columns run tern at its defaults: a TERN_IDLE_POLL inherited from the caller would
    # make every tern process poll.
    if os.environ.pop("TERN_IDLE_POLL", None) is not None:
        print("suite: TERN_IDLE_POLL is ignored: tern runs at its defaults, and only the labelled "
              "idle-poll column polls", flush=True)
    # Every server and client inherits the hard descriptor limit (10,000 sessions in flight).
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    suite = Suite(args)
    programs = {suite.program(c) for c in cells}
    if any(c.get("server_mode") == "rpc" or c.get("kind") == "failover" for c in cells):
        programs.add(suite.catalog.rpc_servers["tern"])
    for program in programs:
        if not os.access(program, os.X_OK):
            print(f"suite: {program} is missing: build with -DTERN_BUILD_BENCH=ON", file=sys.stderr)
            return 1
    path = suite.run(cells)
    if not args.keep_results:
        for old in results_to_prune(args.results, path):
            os.remove(old)
            print(f"suite: pruned {os.path.relpath(old, REPO)} (git history keeps it)",
                  flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.report)), exist_ok=True)
    # A run of some tables (--only) replaces their sections of the report and keeps the others.
    report = [sys.executable, os.path.join(REPO, "bench", "suite", "report.py"), path,
              "--output", args.report] + (["--merge"] if only or args.group else [])
    report_status = subprocess.run(report, check=False).returncode
    if report_status != 0:
        print(f"suite: report.py exited with status {report_status}", file=sys.stderr)
    peers = [f for f in suite.failures if f["owner"] == "peer"]
    if peers:
        print("suite: peers that could not run a cell (recorded in the report; the pass goes on):",
              file=sys.stderr)
        for failure in peers:
            print(f"  {failure['cell']}: {failure['problem']}", file=sys.stderr)
    ours = [f for f in suite.failures if f["owner"] == "tern"]
    if ours:
        print("suite: tern cells that failed or were not verified:", file=sys.stderr)
        for failure in ours:
            print(f"  {failure['cell']}: {failure['problem']}", file=sys.stderr)
    return exit_status(suite.failures, report_status)


if __name__ == "__main__":
    sys.exit(main())
