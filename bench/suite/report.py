#!/usr/bin/env python3
"""Turns a results file of bench/suite/run.py into bench/REPORT.md: one table per benchmark report
tern reproduces (docs/benchmark-methods.md), in that report's own layout, tern and each peer side
by side, ratios to the best peer, the machine and the versions; plots are drawn by plots.py with
the plotting virtualenv's python (bench/suite/venv.sh) when it is there.

    python3 bench/suite/report.py RESULTS.json [--output bench/REPORT.md] [--plot-python PY]
                                  [--merge]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections import defaultdict

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TERN = ("tern", "tern-uring")
# Labelled variants of tern shown beside the headline columns but left out of every ratio,
# neither counted as tern nor as a peer: tern polling when idle (tables.IDLE_POLL_VARIANTS), and
# table 000's tern-echo in plain echo mode (its own ratio is shown on its row), and
# tern-rpc-server without TLS beside its TLS columns (table tls-rpc: what TLS costs tern).
VARIANTS = {"tern-idle-poll": "tern (idle-poll 200us)", "tern-plain-echo": "tern (plain echo)",
            "tern-plaintext": "tern plaintext"}
PEER_ORDER = ["tern", "tern-plain-echo", "tern-uring", "tern-plaintext", "tern-idle-poll",
              "otechod", "mtserver",
              "asio", "go", "tokio", "grpc-sync", "grpc-callback", "rpcx", "erpc"]


def fig(run, key):
    value = run.get("figures", {}).get(key)
    return value if isinstance(value, (int, float)) else None


def fmt(value, digits=3):
    if value is None:
        return "–"
    # From 100 up, whole numbers: three significant digits would print 999.7 as "1e+03".
    if isinstance(value, int) or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a is not None and b not in (None, 0) else "–"


def ratio_value(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def spread(ratios):
    """" (0.98–1.15)": the lowest and the highest of the rounds' ratios, and how many rounds had
    none (a failed run); "" for a comparison that ran once."""
    values = [r for r in ratios if r is not None]
    if len(ratios) < 2:
        return ""
    failed = len(ratios) - len(values)
    note = f"; {failed} of {len(ratios)} rounds failed" if failed else ""
    if not values:
        return " (every round failed)"
    return f" ({min(values):.2f}–{max(values):.2f}{note})"


# A target counts as met when the median of the rounds' ratios meets it and no round is below
# this share of it.
ROUND_TOLERANCE = 0.95
SPREAD_NOTE = ("A ratio is the median of the rounds' own ratios (each round measures every "
               "server once, one after another), followed by the lowest and the highest of them "
               "in brackets; the servers' columns show each server's median round, so a ratio "
               "can differ from the quotient of two columns. A target counts as met when the "
               "median of the rounds' ratios meets it and no round is below 0.95× of it.\n")


def verdict(ratios, target):
    """"≥ 1.1×: met", or "≥ 1.1×: missed (median 1.05, lowest round 0.98)", by the report's
    rule: met when the median of the rounds' ratios meets the target and no round is below
    ROUND_TOLERANCE × target; "–" when a round has no ratio (it failed)."""
    head = f"≥ {target:.1f}×"
    if not ratios or any(r is None for r in ratios):
        return f"{head}: –"
    median, lowest = statistics.median(ratios), min(ratios)
    if median >= target and lowest >= ROUND_TOLERANCE * target:
        return f"{head}: met"
    return f"{head}: missed (median {median:.2f}, lowest round {lowest:.2f})"


def verdict_at_most(ratios, target):
    """verdict() for a ratio that must stay low: "≤ 1.5×: met" when the median of the rounds'
    ratios is at most `target` and no round is above target / ROUND_TOLERANCE."""
    head = f"≤ {target:.1f}×"
    if not ratios or any(r is None for r in ratios):
        return f"{head}: –"
    median, highest = statistics.median(ratios), max(ratios)
    if median <= target and highest <= target / ROUND_TOLERANCE:
        return f"{head}: met"
    return f"{head}: missed (median {median:.2f}, highest round {highest:.2f})"


def best_tern(values):
    """The better tern backend's figure in {server: figure}."""
    return tern_and_best_peer(values)[0]


def best_peer(values):
    """The best peer's figure in {server: figure}."""
    return tern_and_best_peer(values)[1]


def figure_of(name):
    """A picker of server `name`'s figure from {server: figure}."""
    return lambda values: values.get(name)


# The figure by which a comparison table picks each server's median round.
ROUND_FIGURE = {"switch": "ns_per_switch", "000": "pkg_per_s", "001": "tps", "003": "mb_per_s",
                "004": "sessions_per_s", "hook-redis": "rps", "hook-pingpong": "mb_per_s",
                "hook-rpc": "tps",
                "tls-pingpong": "mb_per_s", "tls-handshakes": "sessions_per_s", "tls-rpc": "tps",
                "failover": "p99_window_ms", "stream": "tps"}


def round_key(run):
    """(comparison group, server) for a run of a pass with rounds, else None."""
    suite = run.get("suite", {})
    if suite.get("rounds", 1) <= 1 or not suite.get("group"):
        return None
    return (suite["group"], server_of(run))


def median_of(rounds):
    """One server's rounds of a comparison as one run: the round with the median figure (the
    lower middle one of an even count), or the first unverified round if there is one, so that a
    failure is never hidden behind a good round. It keeps every round's figure in
    suite.round_figures, in the order they ran."""
    name = ROUND_FIGURE.get(rounds[0]["suite"].get("table"))
    failed = [r for r in rounds if not r.get("verified") or fig(r, name) is None]
    pick = failed[0] if failed else sorted(rounds, key=lambda r: fig(r, name))[
        (len(rounds) - 1) // 2]
    suite = dict(pick["suite"], round_figures=[fig(r, name) for r in rounds])
    if rounds[0]["suite"].get("table") == "tls-handshakes":
        # The server's CPU per session of every round, and the client's CPU: the round with the
        # median rate need not be the one with the median CPU.
        suite["round_cpu_us"] = [cpu_us_per_session(r) for r in rounds]
        suite["round_client_cpu_pct"] = [r.get("client_cpu_pct") for r in rounds]
    return dict(pick, suite=suite)


def median_rounds(runs):
    """The runs with each server's rounds of a comparison (run.py --rounds) replaced by their
    median_of, where the first of those rounds was."""
    members = defaultdict(list)
    for run in runs:
        if round_key(run) is not None:
            members[round_key(run)].append(run)
    chosen = []
    for run in runs:
        key = round_key(run)
        if key is None:
            chosen.append(run)
        elif members[key][0] is run:
            chosen.append(median_of(members[key]))
    return chosen


def per_cpu_second(rate, cpu_pct):
    """A rate per second of CPU, given the CPU % (of one CPU) it took; None when unknown."""
    if rate is None or not cpu_pct:
        return None
    return rate / (cpu_pct / 100.0)


def label(server):
    """A server's name as the tables show it."""
    return VARIANTS.get(server, server)


def is_peer(server):
    """Whether a server counts as a peer in the ratios (not tern, not one of tern's variants)."""
    return server not in TERN and server not in VARIANTS


def tern_and_best_peer(values):
    """From {server: figure} (None where missing), the better tern backend's figure and the best
    peer's (None when there is none); the labelled variants count as neither."""
    def best(names):
        return max([v for s, v in values.items() if s in names and v is not None], default=None)
    return best(TERN), best([s for s in values if is_peer(s)])


def cpu_us_per_session(run):
    """The server's CPU time per session of a sessions run, in µs."""
    cpu, elapsed, sessions = run.get("server_cpu_pct"), fig(run, "elapsed_s"), fig(run, "sessions")
    if not (cpu and elapsed and sessions):
        return None
    return cpu / 100.0 * elapsed / sessions * 1e6


def median_cpu_us_per_session(run):
    """(median, rounds): the median of the server's CPU per session over a comparison's rounds
    and every round's figure in the order they ran (one round: that round's figure)."""
    rounds = [v for v in run.get("suite", {}).get("round_cpu_us") or [] if v is not None]
    if not rounds:
        one = cpu_us_per_session(run)
        return one, [one] if one is not None else []
    return statistics.median(rounds), rounds


def client_cpu_sentence(runs):
    """What the handshake cells' client used of its CPU, lowest and highest round of each kind,
    and what that means for the sessions per second."""
    parts = []
    for kind in ("full", "resumed"):
        values = [v for r in runs
                  if bool(r.get("params", {}).get("tls_resume")) == (kind == "resumed")
                  for v in (r.get("suite", {}).get("round_client_cpu_pct")
                            or [r.get("client_cpu_pct")]) if v is not None]
        if values:
            parts.append(f"{kind} handshakes {fmt(min(values))} to {fmt(max(values))} %")
    if not parts:
        return "its CPU was not measured."
    return ("its CPU in the cells: " + ", ".join(parts) + " of one CPU. A client near 100 % sets "
            "the sessions per second for every server alike (a full handshake costs the client "
            "more than the server: it also verifies the signature); the CPU per session is then "
            "the figure that tells the servers apart.")


def ran_in_rounds(runs):
    """Whether these runs came from a pass with more than one round per comparison."""
    return any(r["suite"].get("rounds", 1) > 1 for r in runs)


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def server_of(run):
    return run["suite"].get("server") or run.get("target", "?")

def by_param(runs, name):
    """The servers of PEER_ORDER that ran, and the runs keyed by their parameter `name` (in
    ascending order, runs without it left out), then by server."""
    servers = [s for s in PEER_ORDER if any(server_of(r) == s for r in runs)]
    cells = defaultdict(dict)
    for r in runs:
        cells[r.get("params", {}).get(name)][server_of(r)] = r
    return servers, {k: cells[k] for k in sorted(k for k in cells if k is not None)}



def kib_text(kib):
    """A size in KiB as the tables show it: KiB below 10 MiB, MiB from there; "–" unknown."""
    if kib is None:
        return "–"
    if abs(kib) >= 10 * 1024:
        return f"{kib / 1024:+,.1f} MiB"
    return f"{kib:+,.0f} KiB"


def mark(run):
    """A suffix that flags a run whose result was not verified."""
    return "" if run.get("verified") else " ✗"


# The throughput figure of each table that a "per server CPU-second" figure divides by the
# server's CPU: what a server delivers for one second of its own CPU, which shows the cost of
# the framework even where the client or the machine sets the rate.
PER_CPU_FIGURE = {"000": "pkg_per_s", "001": "tps", "003": "mb_per_s", "004": "sessions_per_s",
                  "tls-pingpong": "mb_per_s", "tls-handshakes": "sessions_per_s", "tls-rpc": "tps",
                  "stream": "tps"}


# Tables whose peers are driven by clients of their own (RPC and streams), which do not measure
# the server: there every server, tern's included, is measured the same way, by the suite over the
# whole cell (start-up and connecting included), and its figure per CPU-second is the cell's
# verified calls or messages ÷ those CPU-seconds. tern-bench's own measurement covers only its
# timed window and would leave out what connecting costs tern.
WHOLE_CELL_CPU_TABLES = ("001", "tls-rpc", "stream")


def whole_cell_cpu(run):
    """For a table of WHOLE_CELL_CPU_TABLES: the run's server CPU over the whole cell as
    (CPU-seconds, % of one CPU), or (None, None) when the suite did not measure it."""
    suite = run.get("suite", {})
    cpu_s, cell_s = suite.get("server_cpu_s_cell"), suite.get("cell_s")
    if cpu_s is None or not cell_s:
        return None, None
    return cpu_s, round(cpu_s / cell_s * 100.0, 1)


def add_per_server_cpu_second(runs):
    """Gives every run of a throughput table with a known server CPU the figure
    per_server_cpu_s (its PER_CPU_FIGURE per second of server CPU; in WHOLE_CELL_CPU_TABLES the
    cell's calls per second of the server's CPU over the whole cell)."""
    for run in runs:
        table_name = run.get("suite", {}).get("table")
        key = PER_CPU_FIGURE.get(table_name)
        if not key:
            continue
        if table_name in WHOLE_CELL_CPU_TABLES:
            cpu_s, _ = whole_cell_cpu(run)
            calls = fig(run, "calls")
            value = calls / cpu_s if calls is not None and cpu_s else None
        else:
            value = per_cpu_second(fig(run, key), run.get("server_cpu_pct"))
        if value is not None:
            run.setdefault("figures", {})["per_server_cpu_s"] = value



def problem_owner(run):
    """Whose failure a failed run is ("tern" or "peer"), as run.py recorded it; for results
    written before run.py recorded it, a server not named tern* makes it the peer's."""
    suite = run.get("suite", {})
    if "problem_owner" in suite:
        return suite["problem_owner"]
    server = suite.get("server")
    return "peer" if server and not server.startswith("tern") else "tern"


def one_line(run):
    """A run's problem on one line (a client's own report spans several)."""
    return " ".join(str(run["suite"]["problem"]).split())


def where(run):
    """"004 10000 in flight, mtserver, round 1 of 3: " for a problem's line."""
    suite = run.get("suite", {})
    parts = [suite.get("group") or f"table {suite.get('table')}"]
    if suite.get("server"):
        parts.append(suite["server"])
    if suite.get("rounds", 1) > 1:
        parts.append(f"round {suite.get('round')} of {suite.get('rounds')}")
    return ", ".join(parts) + ": "

class Report:
    def __init__(self, results):
        self.all_runs = results["runs"]
        add_per_server_cpu_second(self.all_runs)
        self.runs = median_rounds(self.all_runs)
        self.results = dict(results, runs=self.runs)
        self.out = []

    def by_table(self, name):
        return [r for r in self.runs if r.get("suite", {}).get("table") == name]

    def rounds_of(self, group, figure):
        """[{server: figure}] of each round of comparison `group`, in round order; [] when it
        ran once."""
        by_round = defaultdict(dict)
        for r in self.all_runs:
            suite = r.get("suite", {})
            if group and suite.get("group") == group and suite.get("rounds", 1) > 1:
                by_round[suite.get("round")][server_of(r)] = fig(r, figure)
        return [by_round[n] for n in sorted(by_round)]

    def per_round(self, group, figure, top, bottom):
        """The ratio top(values) / bottom(values) in each round of comparison `group` (values:
        {server: figure} of that round; see best_tern, best_peer, figure_of), in round order; []
        when the comparison ran once."""
        return [ratio_value(top(v), bottom(v)) for v in self.rounds_of(group, figure)]

    def ratio_cell(self, group, figure, top, bottom, medians):
        """A ratio as the tables print it: the median of the rounds' ratios top / bottom, then
        the lowest and the highest of them: "1.09× (0.98–1.15)". A comparison that ran once (or
        had a round fail) shows top / bottom of `medians` ({server: figure} of the runs shown)."""
        rounds = self.per_round(group, figure, top, bottom)
        if rounds and None not in rounds:
            return f"{statistics.median(rounds):.2f}×" + spread(rounds)
        return ratio(top(medians), bottom(medians)) + spread(rounds)

    def target_cell(self, group, figure, top, bottom, medians, target, judge=None):
        """Whether top / bottom meets `target` by verdict()'s rule (or `judge`'s, such as
        verdict_at_most), over the rounds of `group` (or the one run's ratio when it ran once)."""
        ratios = self.per_round(group, figure, top, bottom) or [
            ratio_value(top(medians), bottom(medians))]
        return (judge or verdict)(ratios, target)

    def client_backends(self):
        """Which I/O backend tern-bench's clients ran on, from the runs' params: `auto` (the
        machine's choice) in the tables whose client does not follow the server's backend."""
        follows_server = ("001", "002-ttcp", "hook-pingpong", "hook-rpc")
        auto = set()
        for r in self.all_runs:
            suite = r.get("suite", {})
            io = r.get("params", {}).get("io")
            if (r.get("tool") == "tern-bench" and suite.get("server") and
                    io in ("epoll", "uring") and suite.get("table") not in follows_server):
                auto.add(io)
        names = {"epoll": "epoll", "uring": "io_uring"}
        text = "tern-bench clients on the tern server's backend in 001, ttcp and hooks"
        if auto:
            text += (", elsewhere on " + " and ".join(names[io] for io in sorted(auto)) +
                     " (`--io auto`)")
        return text

    def write(self, text=""):
        self.out.append(text)

    # -- sections -------------------------------------------------------------------------
    def machine(self):
        m = self.results["machine"]
        self.write(f"# tern benchmark report ({m.get('pass', 'quick')} pass, {m['stamp']})\n")
        command = "make bench FULL=1" if m.get("pass") == "full" else "make bench"
        self.write(f"Generated by `{command}` (bench/suite/run.py, then report.py) from "
                   f"`bench/results/{m['stamp']}.json`. Every figure below was measured in this "
                   "one run, on this machine; ratios compare tern with peers of the same run. "
                   "✗ marks a run whose result could not be verified. Each table reproduces one "
                   "of the reports described in docs/benchmark-methods.md (report 000 to report "
                   "004).\n")
        rows = [["CPU", m["cpu"]], ["CPUs usable / online", f"{m['cpus_usable']} / {m['cpus_online']}"],
                ["memory", f"{m.get('memory_gib', '?')} GiB"], ["kernel", m["kernel"]],
                ["compiler", m["compiler"]], ["build type", m["build_type"]],
                ["tern I/O backend", "epoll (`tern`) and io_uring (`tern-uring`) servers; "
                 + self.client_backends()],
                ["io_uring", m.get("io_uring", "?")],
                ["load average before", m.get("loadavg_before", "?")]]
        if m.get("loadavg_after"):
            rows.append(["load average after", m["loadavg_after"]])
        busy = sorted(r["suite"].get("other_cpu_pct", 0) for r in self.all_runs
                      if r.get("suite"))
        if busy:
            rows.append(["other processes' CPU during the cells",
                         f"median {busy[len(busy) // 2]:.0f}%, max {busy[-1]:.0f}% of one CPU "
                         "(`other_cpu_pct` per cell in the raw results)"])
        if m.get("pass_s") is not None:
            rows.append(["wall time", f"{m['pass_s'] / 60:.1f} minutes, "
                         f"{m.get('quiet_waited_s', 0):.0f} s of it waiting for an idle "
                         f"machine; {m.get('seconds_per_cell', '?')} s per time-bound cell"])
        for name, peer in sorted(self.results.get("peers", {}).items()):
            version = ", ".join(str(peer[k]) for k in ("library", "toolchain") if peer.get(k))
            rows.append([f"peer {name}", version])
        self.write(table(["", ""], rows))
        if "loadavg_after" not in m:
            # run.py writes the load average after the pass only when its last cell is done.
            planned = m.get("cells_planned")
            self.write(f"\n**Incomplete pass**: it stopped after {len(self.all_runs)} runs"
                       + (f" of {planned} cells" if planned else "") + " (the results file "
                       "ends there); the tables below hold only what ran, and every table after "
                       "them is missing.\n")
        for name, reason in sorted(self.results.get("skipped", {}).items()):
            self.write(f"- **skipped peer {name}**: {reason}")
        placements = sorted({r["suite"]["placement"] for r in self.runs if r["suite"].get("server")})
        if placements:
            self.write("\nPlacement of server and client (per cell, in the raw results):\n")
            for p in placements:
                self.write(f"- {p}")
        text = ("\ntern runs at its defaults in every headline column and every ratio: its idle "
                "workers sleep, as the peers' do.")
        if any(server_of(r) == "tern-idle-poll" for r in self.runs if r.get("suite")):
            text += (" The column `tern (idle-poll 200us)` is tern on epoll whose server and "
                     "tern-bench client poll 200 µs before they sleep (`--idle-poll 200us`, "
                     "docs/guide.md, \"Idle polling\"): shown beside the others, it counts "
                     "neither as tern nor as a peer in any ratio.")
        self.write(text)
        rounds = max((r["suite"].get("rounds", 1) for r in self.all_runs), default=1)
        if rounds > 1:
            self.write(f"\nEvery comparison (one load, each server once) ran {rounds} times: "
                       "each round runs every server once, starting one server later than the "
                       "round before. They show each server's median round (by pkg/s, TPS, MB/s "
                       "or sessions/s; its other columns come from that same round); the raw "
                       "results keep every round.")
        self.time_budget(m)
        noisy = [r for r in self.all_runs if r["suite"].get("other_cpu_pct", 0) > 20]
        if noisy:
            self.write(f"\n{len(noisy)} cell(s) ran while other processes used more than 20% of "
                       "a CPU (column `other_cpu_pct` in the raw results); treat them with care.")
        self.write("")

    def time_budget(self, m):
        """Each table's wall time in this pass beside its budget (bench/suite/tables.py)."""
        spent, budgets = m.get("table_s"), m.get("table_budget_s", {})
        if not spent:
            return
        rows = [[name, f"{seconds:.0f}", budgets.get(name, "–")]
                for name, seconds in spent.items()]
        rows.append(["all", f"{sum(spent.values()):.0f}",
                     sum(b for n, b in budgets.items() if n in spent)])
        self.write("\nTime per table (seconds of wall time, waits included) and its budget:\n")
        self.write(table(["table", "seconds", "budget"], rows))

    def switch(self):
        runs = self.by_table("switch")
        if not runs:
            return
        self.write("## Context switch (report 004, part B)\n")
        self.write("ns per switch (lower is better) and switches per second; every variant counts "
                   "its switches on both sides, so none can skip the work (report 004's libco "
                   "variant never switched, and its 'M/s' column was µs per switch). "
                   "`batch median`: tern-bench times its switches in batches of 10,000 round "
                   "trips and gives the median batch, which an interruption of the process does "
                   "not move.\n")
        rows = [[r.get("target", "?") + mark(r), fmt(fig(r, "ns_per_switch")),
                 fmt(fig(r, "batch_p50_ns_per_switch")) if fig(r, "batch_p50_ns_per_switch")
                 else "–", fmt(fig(r, "switches_per_s")),
                 r.get("params", {}).get("switches", "–")]
                for r in runs]
        self.write(table(["implementation", "ns/switch", "batch median ns/switch", "switches/s",
                          "switches"], rows))
        fiber, context = figure_of("tern-fiber"), figure_of("tern-context")
        ratio_rows = []
        for label, figure in (("whole runs", "ns_per_switch"),
                              ("batch medians", "batch_p50_ns_per_switch")):
            medians = {server_of(r): fig(r, figure) for r in runs}
            ratio_rows.append([label, self.ratio_cell("switch", figure, fiber, context, medians),
                               self.target_cell("switch", figure, fiber, context, medians, 1.5,
                                                judge=verdict_at_most)])
        self.write("A tern fiber's switch (through the scheduler) against its raw context switch, "
                   "both measured in each round by one tern-bench run; the median of the rounds' "
                   "ratios, then the lowest and highest. tern's target: at most 1.5×.\n")
        self.write(table(["tern-fiber ÷ tern-context", "ratio", "target"], ratio_rows))

    def traffic(self):
        runs = self.by_table("000")
        if not runs:
            return
        self.write("## 000: bServer traffic (testBenchmark -S / -A)\n")
        self.write("Packets of 16-byte header + payload; MB = 10^6 bytes of payload per second. "
                   "Servers run one thread (mtserver: a thread per connection); tern-echo runs "
                   "its frame16 mode (parses each header, answers with ack = syn); the peers echo "
                   "bytes. The labelled row `tern (plain echo)` is tern-echo `--mode echo`, which "
                   "echoes bytes as the peers do, so the framework's cost shows apart from the "
                   "parser's; it is not counted as tern in any other table's ratio. Every reply's "
                   "header and payload are checked.\n")
        groups = defaultdict(list)
        for r in runs:
            p = r.get("params", {})
            key = ("-S" if p.get("sync") else "-A", p.get("threads"), p.get("payload_bytes"),
                   p.get("cmd"))
            groups[key].append(r)
        rows = []
        for (flag, threads, size, cmd), group in groups.items():
            name = group[0]["suite"].get("group")
            rates = {server_of(r): fig(r, "pkg_per_s") for r in group}
            per_cpu = {server_of(r): fig(r, "per_server_cpu_s") for r in group}
            for r in sorted(group, key=lambda r: PEER_ORDER.index(server_of(r))
                            if server_of(r) in PEER_ORDER else 99):
                s = server_of(r)
                is_tern = s in TERN or s == "tern-plain-echo"
                case = f"{flag} t={threads} {size} B" + (" discard" if cmd == 2 else "")
                row = [case, label(s) + mark(r), fmt(fig(r, "packets")),
                       fmt(fig(r, "pkg_per_s")), fmt(fig(r, "mb_per_s")),
                       fmt(fig(r, "p50_us")), fmt(fig(r, "p99_us")),
                       fmt(r.get("server_cpu_pct")), fmt(r.get("client_cpu_pct")),
                       fmt(fig(r, "per_server_cpu_s"))]
                if is_tern and cmd != 2:
                    row += [self.ratio_cell(name, "pkg_per_s", figure_of(s), best_peer, rates),
                            self.ratio_cell(name, "pkg_per_s", figure_of(s),
                                            figure_of("otechod"), rates),
                            self.ratio_cell(name, "per_server_cpu_s", figure_of(s), best_peer,
                                            per_cpu)]
                else:
                    row += ["", "", ""]
                if s == "tern" and cmd != 2:
                    row.append(self.target_cell(name, "pkg_per_s", figure_of(s), best_peer,
                                                rates, 1.0) + "; per CPU-s " +
                               self.target_cell(name, "per_server_cpu_s", figure_of(s),
                                                best_peer, per_cpu, 1.2))
                else:
                    row.append("")
                rows.append(row)
        self.write(table(["case", "server", "packets", "pkg/s", "MB/s", "p50 µs", "p99 µs",
                          "server CPU %", "client CPU %", "packets per server CPU-second",
                          "÷ best peer", "÷ otechod", "per CPU-s ÷ best peer", "target"], rows))
        self.write(SPREAD_NOTE)

    def ttcp(self):
        runs = self.by_table("002-ttcp")
        if not runs:
            return
        self.write("## 002: ttcp (stop-and-wait, 81,920 × 1000-byte payload, loopback)\n")
        self.write("MiB/s of payload (median of the repeated runs: 1 in the quick pass, 3 in the full one); report 002's rows were sync "
                   "sysapi 11.94, fcontext 11.84, ucontext 11.21 MiB/s.\n")
        def blocking(in_process):
            return next((fig(r, "mib_per_s") for r in runs
                         if r.get("params", {}).get("client") == "blocking"
                         and bool(r.get("params", {}).get("in_process")) == in_process), None)
        rows = [[r["suite"].get("label") or r.get("target"), fmt(fig(r, "mib_per_s")) + mark(r),
                 fmt(fig(r, "rtt_p50_us")), fmt(fig(r, "rtt_p99_us")),
                 ratio(fig(r, "mib_per_s"),
                       blocking(bool(r.get("params", {}).get("in_process"))))] for r in runs]
        self.write(table(["variant", "MiB/s", "rtt p50 µs", "rtt p99 µs",
                          "÷ blocking (same setup)"], rows))

    def log(self):
        runs = self.by_table("002-log")
        if not runs:
            return
        self.write("## 002: log speed (1,000,000 calls, ~100-character message with prefix)\n")
        spdlog = {r.get("params", {}).get("threads"): fig(r, "calls_per_s")
                  for r in runs if "spdlog" in str(r.get("target"))}
        rows = []
        for r in runs:
            threads = r.get("params", {}).get("threads")
            rows.append([r.get("target", "?") + mark(r), threads, fmt(fig(r, "calls_per_s")),
                         fmt(fig(r, "mib_per_s")), fmt(fig(r, "call_p50_ns")),
                         fmt(fig(r, "call_p99_ns")), fmt(fig(r, "call_p999_ns")),
                         ratio(fig(r, "calls_per_s"), spdlog.get(threads))
                         if "spdlog" not in str(r.get("target")) else ""])
        self.write(table(["logger", "threads", "calls/s", "MiB/s", "caller p50 ns",
                          "caller p99 ns", "caller p99.9 ns", "÷ spdlog"], rows))
        timer = next((r for r in runs if fig(r, "timer_p50_ns") is not None), None)
        if timer is not None:
            text = ("Caller latency is two TSC reads around each call, the timer's own cost "
                    f"included: two reads around nothing take {fmt(fig(timer, 'timer_p50_ns'))} ns "
                    "at p50")
            step = fig(timer, "clock_step_ns")
            if step is not None:
                text += (f", and the TSC advances in steps of {fmt(step)} ns, so latencies come "
                         "in steps of that size")
            self.write(text + ".\n")

    def cpu_tables(self, head, cells, servers, unit, what, whole_cell=False):
        """The two tables every throughput comparison ends with, one row per key of `cells`
        ({row key: {server: median run}}; head(key) gives the row's first columns, `what` their
        names): each server's CPU (% of one CPU over its run), then its rate per second of its
        own CPU ("per_server_cpu_s", in `unit`) and the better tern backend's ratio to the best
        peer's, with the rounds' spread. `whole_cell`: the table is one of
        WHOLE_CELL_CPU_TABLES, whose CPU figures cover the whole cell for every server."""
        if whole_cell:
            self.write("**Server CPU** (% of one CPU over the whole cell: start-up, connecting and "
                       "the calls). The peers' own clients do not measure the server, so the "
                       "suite measures every server here, tern's too, from its process's CPU "
                       "time. tern runs at its defaults: its idle workers sleep, as the peers' "
                       "do.\n")
        else:
            self.write("**Server CPU** (% of one CPU over the run). tern runs at its defaults: "
                       "its idle workers sleep, as the peers' do; a labelled idle-poll column "
                       "polls before it sleeps, so that server shows near 100% even while it "
                       "waits.\n")

        def cpu_pct(run):
            return whole_cell_cpu(run)[1] if whole_cell else run.get("server_cpu_pct")

        names = what + [label(s) for s in servers]
        self.write(table(names, [head(key) + [fmt(cpu_pct(cells[key][s]))
                                              if s in cells[key] else "–" for s in servers]
                                 for key in cells]))
        if whole_cell:
            self.write(f"**{unit} per second of server CPU** (the cell's verified {unit.lower()} "
                       "÷ the server's CPU-seconds over the whole cell, connecting included): "
                       "the cost of each server's work, whoever sets the rate.\n")
        else:
            self.write(f"**{unit} per second of server CPU** (the rate ÷ the server's CPU share): "
                       "the cost of each server's work, whoever sets the rate.\n")
        rows = []
        for key, here in cells.items():
            values = {s: fig(r, "per_server_cpu_s") for s, r in here.items()}
            group = next(iter(here.values()))["suite"].get("group")
            rows.append(head(key) + [fmt(values.get(s)) if s in here else "–" for s in servers] +
                        [self.ratio_cell(group, "per_server_cpu_s", best_tern, best_peer,
                                         values)])
        self.write(table(names + ["tern ÷ best peer"], rows))

    def pingpong(self):
        runs = self.by_table("003")
        if not runs:
            return
        self.write("## 003: pingpong throughput (asio's performance test)\n")
        self.write("MB/s (10^6 bytes) read by the client per second; server and client both run "
                   "`Threads` threads; every session's bytes are checked at the end. tern's "
                   "target: ≥ 1.0× the best peer in every cell.\n")
        servers = [s for s in PEER_ORDER if any(server_of(r) == s for r in runs)]
        cells = defaultdict(dict)
        for r in runs:
            p = r.get("params", {})
            key = (p.get("block_bytes"), p.get("threads"), p.get("sessions"))
            cells[key][server_of(r)] = r
        cells = {k: cells[k] for k in sorted(cells, key=lambda k: tuple(x or 0 for x in k))}
        rows = []
        for key, here in cells.items():
            rates = {s: fig(r, "mb_per_s") for s, r in here.items()}
            group = next(iter(here.values()))["suite"].get("group")
            row = [f"{key[0]} B", key[1], key[2]] + [
                fmt(rates[s]) + mark(here[s]) if s in here else "–" for s in servers]
            row += [fmt(best_peer(rates)),
                    self.ratio_cell(group, "mb_per_s", best_tern, best_peer, rates),
                    self.ratio_cell(group, "mb_per_s", best_tern, figure_of("asio"), rates),
                    self.target_cell(group, "mb_per_s", best_tern, best_peer, rates, 1.0)]
            rows.append(row)
        # tern's pingpong target was once stated against asio (docs/benchmarks.md): its column.
        self.write(table(["Buffer", "Threads", "Sessions"] + [label(s) for s in servers] +
                         ["best peer", "tern ÷ best peer", "tern ÷ asio", "target"], rows))
        self.write(SPREAD_NOTE)
        self.cpu_tables(lambda k: [f"{k[0]} B", k[1], k[2]], cells, servers, "MB",
                        ["Buffer", "Threads", "Sessions"])

    def sessions(self):
        runs = self.by_table("004")
        if not runs:
            return
        self.write("## 004: concurrent short sessions (NeTest)\n")
        self.write("Each session: connect, 3 × (8-byte request, 8-byte reply), close; one "
                   "single-thread client; servers run one thread (mtserver: a thread per "
                   "connection). Latency is per session, connect to last reply, in µs. tern's "
                   "target: ≥ 1.1× the best of asio, Go and tokio at every in-flight count, with "
                   "no failed session.\n")
        servers, cells = by_param(runs, "in_flight")
        with_otechod = "otechod" in servers  # the quick pass leaves it to the full pass

        def best_echo_peer(values):
            return max([v for s, v in values.items() if s in ("asio", "go", "tokio")
                        and v is not None], default=None)

        for title, key in (("a. Sessions per second", "sessions_per_s"),
                           ("b. Mean session latency (µs)", "mean_us"),
                           ("c. p99 session latency (µs)", "p99_us"),
                           ("d. Failed sessions", "failed"),
                           ("e. p99 connect latency (µs)", "connect_p99_us"),
                           ("f. SYNs dropped by a full listen queue (the machine's "
                            "ListenOverflows during the run; each was sent again a second "
                            "later)", "listen_overflows")):
            self.write(f"**{title}**\n")
            rows = []
            for in_flight, here in cells.items():
                row = [in_flight] + [fmt(fig(here[s], key)) + mark(here[s]) if s in here else "–"
                                     for s in servers]
                if key == "sessions_per_s":
                    rates = {s: fig(r, key) for s, r in here.items()}
                    group = next(iter(here.values()))["suite"].get("group")
                    target = self.target_cell(group, key, figure_of("tern"), best_echo_peer,
                                              rates, 1.1)
                    if fig(here.get("tern", {}), "failed"):
                        target += f"; {fmt(fig(here['tern'], 'failed'))} failed sessions"
                    if with_otechod:
                        row.append(self.ratio_cell(group, key, figure_of("tern"),
                                                   figure_of("otechod"), rates))
                    row += [self.ratio_cell(group, key, figure_of("tern"), best_echo_peer, rates),
                            target]
                rows.append(row)
            extra = (["tern ÷ otechod"] if with_otechod else []) + \
                ["tern ÷ best of asio/go/tokio", "target"] if key == "sessions_per_s" else []
            self.write(table(["in flight"] + [label(s) for s in servers] + extra, rows))
        self.write(SPREAD_NOTE)
        self.cpu_tables(lambda k: [k], cells, servers, "Sessions", ["in flight"])

    def rpc(self):
        runs = self.by_table("001")
        self.write("## 001: RPC (teleport/erpc vs rpcx)\n")
        if not runs:
            self.write("Not measured in this run (`run.py --only 001`).\n")
            return
        self.write("Report 001's `BenchmarkMessage` (583 bytes encoded) to `BenchmarkService/Say`; the "
                   "server decodes it, sets field1 = \"OK\" and field2 = 100 and replies. C clients, "
                   "each with its own connection, make N calls in all (N/C each, one after another); "
                   "every reply is checked (field1, field2, and field3 untouched). Each server is "
                   "driven by its own client: tern-rpc-server by `tern-bench rpc` on the server's I/O "
                   "backend (the `tern` column epoll, `tern-uring` io_uring), gRPC by "
                   "grpc_rpc_client, rpcx and erpc by their Go clients. Servers and clients run one "
                   "thread each. TPS = verified calls / seconds from the first call to the last "
                   "reply; latency per call in µs (report 001 printed whole ms and a minimum of 0).\n")
        servers, cells = by_param(runs, "concurrency")
        levels = list(cells)

        def best_of(level, key, pick):
            values = [fig(r, key) for s, r in cells[level].items()
                      if is_peer(s) and r.get("verified")]
            values = [v for v in values if v is not None]
            return pick(values) if values else None

        def lowest_peer(values):
            return min([v for s, v in values.items() if is_peer(s) and v is not None],
                       default=None)

        for title, key, pick, note in (("a. TPS (calls per second)", "tps", max,
                                        "higher is better; tern's target: ≥ 2× the best peer on "
                                        "both backends"),
                                       ("b. p99 latency (µs)", "p99_us", min, "lower is better")):
            self.write(f"**{title}**, {note}\n")
            rows = []
            for level in levels:
                here = cells[level]
                values = {s: fig(r, key) for s, r in here.items()}
                group = next(iter(here.values()))["suite"].get("group")
                row = [f"{level:,}"] + [fmt(values[s]) + mark(here[s]) if s in here else "–"
                                        for s in servers]
                best = best_of(level, key, pick)
                row += [fmt(best)] + [
                    self.ratio_cell(group, key, figure_of(t),
                                    best_peer if key == "tps" else lowest_peer, values)
                    if t in here else "–" for t in TERN]
                if key == "tps":
                    row.append(", ".join(
                        f"{t}: " + self.target_cell(group, key, figure_of(t), best_peer, values,
                                                    2.0) for t in TERN if t in here))
                rows.append(row)
            extra = ["target"] if key == "tps" else []
            self.write(table(["clients"] + [label(s) for s in servers] + ["best peer"] +
                             [f"{t} ÷ best peer" for t in TERN] + extra, rows))
        self.write(SPREAD_NOTE)
        self.cpu_tables(lambda level: [f"{level:,}"], {level: cells[level] for level in levels},
                        servers, "Calls", ["clients"], whole_cell=True)
        self.write("**Each server in report 001's layout** (latency in µs)\n")
        for s in servers:
            self.write(f"*{label(s)}*\n")
            rows = []
            for level in levels:
                r = cells[level].get(s)
                if not r:
                    continue
                row = [f"{level:,}", fmt(fig(r, "mean_us")), fmt(fig(r, "p50_us")),
                       fmt(fig(r, "max_us")), fmt(fig(r, "min_us")), fmt(fig(r, "tps")) + mark(r),
                       fmt(fig(r, "p99_us"))]
                if s in TERN:
                    row += [ratio(fig(r, "tps"), best_of(level, "tps", max)),
                            ratio(fig(r, "p99_us"), best_of(level, "p99_us", min))]
                rows.append(row)
            header = ["clients", "mean", "median", "max", "min", "TPS", "p99"]
            if s in TERN:
                header += ["TPS ÷ best peer", "p99 ÷ best peer"]
            self.write(table(header, rows))

    def stream(self):
        runs = self.by_table("stream")
        memory = self.by_table("stream-memory")
        if not runs and not memory:
            return
        self.write("## Stream: streaming RPC (tern vs gRPC C++)\n")
        if runs:
            self.stream_rates(runs)
        if memory:
            self.stream_memory(memory)

    def stream_memory(self, runs):
        """The stream section's memory part: one row per stream count of `tern-bench rpc
        --stream --stall` against tern-rpc-server."""
        stall = next((r.get("params", {}).get("stall_s") for r in runs), None)
        self.write("**Memory with a peer that reads nothing** (tern-rpc-server on epoll at its "
                   "defaults, a fresh one per row; gRPC is not measured here). `tern-bench rpc "
                   f"--stream --stall {fmt(stall)}` opens the streams on one connection; each "
                   "stream's writer sends `BenchmarkMessage`s as fast as flow control lets it "
                   "and no answer is ever read. A stream is full once the server's writer has "
                   "parked on the client's window, the client's writer on the server's, and a "
                   "call on the same connection came back (so the server has read all that was "
                   f"sent); the full streams are then held {fmt(stall)} s. Window: the client's "
                   "`stream_window` (what the server may send ahead of the reads); peak "
                   "buffered: the most bytes of unread answers one stream held (tern's own "
                   "count, `peak_buffered_bytes()`); answers before parking: the answers each "
                   "stream received, i.e. what the server wrote before its writer parked; "
                   "unanswered: the most bytes one stream sent that the server holds unanswered "
                   "(bounded by the server's own `stream_window`, 256 KiB by default); server "
                   "RSS growth: tern-rpc-server's VmRSS from before the streams opened to the "
                   "end, and over the hold alone (≈ 0 when what is held depends on the streams, "
                   "not on how long they stall), with the messages sent during the hold. "
                   "Target: peak buffered ≤ window + one answer.\n")
        rows = []
        for r in sorted(runs, key=lambda r: fig(r, "streams") or 0):
            window = fig(r, "window_bytes")
            peak = fig(r, "peak_buffered_bytes_max")
            answer = fig(r, "answer_bytes") or 0
            if window is None or peak is None:
                target = "–"
            else:
                target = "met" if peak <= window + answer else "missed"
            answers = (fig(r, "answers_before_park_min"), fig(r, "answers_before_park_max"))
            full = fig(r, "fill_s")
            rows.append([
                fmt(fig(r, "streams")) + mark(r), fmt(window), fmt(peak),
                fmt(answers[1]) if answers[0] == answers[1] else
                f"{fmt(answers[0])} to {fmt(answers[1])}",
                fmt(fig(r, "unanswered_bytes_max")),
                "–" if full is None else f"{full:.2f} s" + (
                    "" if r.get("figures", {}).get("all_full", True) else " (not all)"),
                kib_text(fig(r, "server_rss_growth_kib")),
                kib_text(fig(r, "server_rss_after_full_kib")),
                fmt(fig(r, "messages_sent_after_full")), target])
        self.write(table(["streams", "window (bytes)", "peak buffered per stream (bytes)",
                          "answers before parking, per stream", "unanswered per stream (bytes)",
                          "full after", "server RSS growth", "of it during the hold",
                          "messages sent during the hold", "≤ window + one answer"], rows))

    def stream_rates(self, runs):
        self.write("Report 001's `BenchmarkMessage` (583 bytes encoded) streamed to "
                   "`BenchmarkService/Pump`, a bidirectional method that answers every message "
                   "on its stream as `Say` answers it (field1 = \"OK\", field2 = 100), over "
                   "1 stream and over 100 streams, every stream on one connection. Each cell "
                   "is sized by time: as many messages as its side streams here in about "
                   "0.5 s (1 s in the full pass), so a fast server is not timed over a few "
                   "milliseconds. Each stream's writer sends without waiting for answers (the "
                   "stream's flow-control window bounds what is in flight) while its reader "
                   "checks every answer. tern-rpc-server is driven by `tern-bench rpc --stream "
                   "--shared 1` on the server's backend (`tern`: epoll, `tern-uring`: io_uring, "
                   "both at tern's defaults), gRPC's server (`--api sync`, `--api callback`) by "
                   "grpc_stream_client (one channel, a thread per stream writing and one "
                   "reading). One server thread, the client on the other CPU. Messages/s = "
                   "verified answers / seconds from the start to the last answer.\n")
        servers, cells = by_param(runs, "concurrency")
        levels = list(cells)
        self.write("**Messages per second**, higher is better; tern's target: ≥ 2× the best "
                   "gRPC server\n")
        rows = []
        for level in levels:
            here = cells[level]
            values = {s: fig(r, "tps") for s, r in here.items()}
            group = next(iter(here.values()))["suite"].get("group")
            row = [f"{level:,}"] + [fmt(values[s]) + mark(here[s]) if s in here else "–"
                                    for s in servers]
            row += [fmt(best_peer(values))] + [
                self.ratio_cell(group, "tps", figure_of(t), best_peer, values)
                if t in here else "–" for t in TERN]
            row.append(", ".join(
                f"{t}: " + self.target_cell(group, "tps", figure_of(t), best_peer, values, 2.0)
                for t in TERN if t in here))
            rows.append(row)
        self.write(table(["streams"] + [label(s) for s in servers] + ["best gRPC"] +
                         [f"{t} ÷ best gRPC" for t in TERN] + ["target"], rows))
        self.write(SPREAD_NOTE)
        self.cpu_tables(lambda level: [f"{level:,}"], {level: cells[level] for level in levels},
                        servers, "Messages", ["streams"], whole_cell=True)

    def hooks(self):
        redis, micro = self.by_table("hook-redis"), self.by_table("hook-micro")
        own = self.by_table("hook-pingpong") + self.by_table("hook-rpc")
        if not (redis or micro or own):
            return
        self.write("## Hooks: blocking client libraries in fibers (tern::hook)\n")
        self.write("What docs/hooks.md promises, measured: hiredis's synchronous client in tern "
                   "fibers through tern::hook against the same code on a thread per connection "
                   "and against redis-benchmark; what the replaced `read` adds; and that linking "
                   "tern::hook costs tern's own sockets nothing.\n")
        if redis:
            self.hooks_redis(redis)
        if micro:
            self.hooks_micro(micro)
        if own:
            self.hooks_own_io(own)

    def hooks_redis(self, runs):
        requests = max((r.get("params", {}).get("requests") or 0 for r in runs), default=0)
        self.write(f"**a. hiredis against redis-server** ({requests // 2:,} SETs and as many GETs "
                   "of 64-byte values per run, no pipelining, a fresh redis-server on a free "
                   "loopback port for every run). `redis-benchmark -c C -n N -t set,get -d 64` "
                   "(hiredis's async API on its own event loop); `fibers`: redis_bench "
                   "(bench/hook/redis_bench.cc), one tern fiber per connection on tern's default "
                   "workers, hiredis's synchronous API parked by tern::hook; `threads`: the same "
                   "code on a thread per connection. requests/s over both commands; latency per "
                   "request in µs; CPU in % of one CPU (machine: of all CPUs), and the requests "
                   "each client model serves per second of its own CPU, which shows its cost "
                   "even where redis-server or the machine sets the pace. After every run "
                   "redis-server's own command counts must show the N SETs and N GETs. tern's "
                   "targets at 500 connections: fibers ≥ 0.9× redis-benchmark and ≥ 1.5× thread "
                   "per connection.\n")
        names = {"redis-benchmark": "redis-benchmark", "fibers": "fibers (tern::hook)",
                 "threads": "thread per connection"}
        cells = defaultdict(dict)
        for r in runs:
            cells[r.get("params", {}).get("clients")][server_of(r)] = r
        rows = []
        for clients in sorted(k for k in cells if k is not None):
            here = cells[clients]
            rates = {s: fig(r, "rps") for s, r in here.items()}
            for client in ("redis-benchmark", "fibers", "threads"):
                r = here.get(client)
                if r is None:
                    continue
                row = [f"{clients:,}", names[client], fmt(fig(r, "rps")) + mark(r),
                       fmt(fig(r, "set_p50_us")), fmt(fig(r, "set_p99_us")),
                       fmt(fig(r, "get_p50_us")), fmt(fig(r, "get_p99_us")),
                       fmt(r.get("server_cpu_pct")), fmt(r.get("client_cpu_pct")),
                       fmt(per_cpu_second(fig(r, "rps"), r.get("client_cpu_pct"))),
                       fmt(fig(r, "machine_busy_pct"))]
                group = r["suite"].get("group")
                fibers, over = figure_of("fibers"), (
                    ("redis-benchmark", 0.9), ("threads", 1.5))
                if client == "fibers":
                    row += [self.ratio_cell(group, "rps", fibers, figure_of(other), rates)
                            for other, _ in over]
                    row.append("; ".join(self.target_cell(group, "rps", fibers, figure_of(other),
                                                          rates, target)
                                         for other, target in over) if clients == 500 else "")
                else:
                    row += ["", "", ""]
                rows.append(row)
        self.write(table(["clients", "client", "requests/s", "SET p50", "SET p99", "GET p50",
                          "GET p99", "redis-server CPU %", "client CPU %",
                          "requests per client CPU-second", "machine busy %",
                          "÷ redis-benchmark", "÷ thread per connection",
                          "targets (÷ redis-benchmark; ÷ threads)"], rows))
        self.write(SPREAD_NOTE)
        self.write("redis-server runs one thread: where its CPU column nears 100%, or the "
                   "machine's busy column nears 100% with the clients sharing its CPUs, the "
                   "server sets the pace for every client model alike and the ratios say little "
                   "about the clients (docs/hooks.md, \"What it costs\").\n")

    def hooks_micro(self, runs):
        r = runs[-1]
        self.write("**b. What the hook adds to a `read`** (bench/micro/hook_bench.cc: one byte "
                   "from a loopback TCP socket that always has data; median CPU ns per read over "
                   f"{r.get('params', {}).get('repetitions', '?')} repetitions). tern's target: "
                   "≤ 30 ns over libc in a fiber.\n")
        rows = [["plain thread (pass-through)", fmt(fig(r, "libc_thread_ns")),
                 fmt(fig(r, "hooked_thread_ns")), fmt(fig(r, "thread_extra_ns")) + mark(r)],
                ["fiber on a worker (cooperative path)", fmt(fig(r, "libc_fiber_ns")),
                 fmt(fig(r, "hooked_fiber_ns")), fmt(fig(r, "fiber_extra_ns")) + mark(r)]]
        self.write(table(["caller", "libc read ns", "replaced read ns", "extra ns"], rows))

    def hooks_own_io(self, runs):
        self.write("**c. tern's own I/O with tern::hook linked**: `tern-bench pingpong` (1 "
                   "thread, 10 sessions, 16 KiB; MB/s) against tern-echo and `tern-bench rpc` "
                   "(100 clients; calls/s) against tern-rpc-server, each built as it ships and "
                   "again with tern::hook linked (`-hooked`, bench/hook/CMakeLists.txt). tern "
                   "calls the kernel through its own table of originals, so the two should not "
                   "differ beyond the machine's noise.\n")
        groups = defaultdict(dict)
        for r in runs:
            groups[r["suite"].get("group")][server_of(r)] = r
        rows = []
        for group in sorted(g for g in groups if g):
            here = groups[group]
            plain = next((s for s in here if not s.endswith("-hooked")), None)
            hooked = f"{plain}-hooked"
            if plain is None or hooked not in here:
                continue
            table_name = here[plain]["suite"]["table"]
            figure = ROUND_FIGURE[table_name]
            kind = "pingpong MB/s" if table_name == "hook-pingpong" else "RPC calls/s"
            io = here[plain].get("params", {}).get("io", "?")
            row = [kind, io, fmt(fig(here[plain], figure)) + mark(here[plain]),
                   fmt(fig(here[hooked], figure)) + mark(here[hooked]),
                   self.ratio_cell(group, figure, figure_of(hooked), figure_of(plain),
                                   {s: fig(r, figure) for s, r in here.items()})]
            rows.append(row)
        self.write(table(["benchmark", "backend", "tern", "tern + tern::hook", "÷ tern"], rows))

    def tls(self):
        pingpong, handshakes = self.by_table("tls-pingpong"), self.by_table("tls-handshakes")
        if not (pingpong or handshakes):
            return
        self.write("## TLS: pingpong and handshakes (tern vs asio::ssl, Go crypto/tls and "
                   "tokio-rustls)\n")
        self.write("`tern-echo --tls-cert` against `asio_echo --tls-cert` (asio::ssl on the same "
                   "OpenSSL as tern), `go_echo -tls-cert` (Go's crypto/tls) and `tokio_echo "
                   "--tls-cert` (rustls with ring's cryptography, stateless tickets; its pingpong "
                   "rows in the full pass only), each with one "
                   "thread and the same self-signed ECDSA P-256 certificate; the client is "
                   "`tern-bench --tls` (OpenSSL, X25519, the certificate not checked), one "
                   "thread. tern runs at its defaults (`tern`: epoll, `tern-uring`: io_uring). "
                   "Per server CPU-second: the figure divided by the server's CPU use. tern's "
                   "targets: pingpong ≥ 1.1× the best peer, full handshakes ≥ 1.0×, resumed "
                   "≥ 1.2×.\n")
        if pingpong:
            self.tls_pingpong(pingpong)
        if handshakes:
            self.tls_handshakes(handshakes)
        self.write(SPREAD_NOTE)
        self.write("**c. RPC over TLS**: the next section (table `tls-rpc`).\n")

    def tls_rpc(self):
        runs = self.by_table("tls-rpc")
        if not runs:
            return
        self.write("## TLS: RPC over TLS (tern vs gRPC C++ over TLS)\n")
        self.write("Report 001's call (`BenchmarkService/Say`, 583-byte message, every reply "
                   "checked) over TLS 1.3 with the suite's ECDSA P-256 test certificate, which "
                   "every client verifies: `tern-rpc-server --tls-cert` driven by `tern-bench rpc "
                   "--tls --tls-ca` on the server's backend (`tern`: epoll, `tern-uring`: "
                   "io_uring), gRPC C++ (`grpc_rpc_server --tls-cert`, sync and callback APIs) by "
                   "`grpc_rpc_client --tls-ca`. `tern plaintext` is tern-rpc-server on epoll "
                   "without TLS in the same group, outside the peer ratios. C clients, each with "
                   "its own connection; one server thread and one client thread; tern at its "
                   "defaults. Targets: tern ≥ 2× the best gRPC; TLS costs tern ≤ 30 % of its "
                   "plaintext TPS, that is tern (epoll) TLS ÷ plaintext ≥ 0.7×.\n")
        servers, cells = by_param(runs, "concurrency")
        tls, plain = figure_of("tern"), figure_of("tern-plaintext")
        rows, p99_rows = [], []
        for level, here in cells.items():
            rates = {s: fig(r, "tps") for s, r in here.items()}
            group = next(iter(here.values()))["suite"].get("group")
            row = [f"{level:,}"] + [fmt(rates[s]) + mark(here[s]) if s in here else "–"
                                    for s in servers]
            row += [fmt(best_peer(rates)),
                    self.ratio_cell(group, "tps", best_tern, best_peer, rates),
                    self.target_cell(group, "tps", best_tern, best_peer, rates, 2.0),
                    self.ratio_cell(group, "tps", tls, plain, rates),
                    self.target_cell(group, "tps", tls, plain, rates, 0.7)]
            rows.append(row)
            p99_rows.append([f"{level:,}"] + [fmt(fig(here[s], "p99_us")) if s in here else "–"
                                              for s in servers])
        self.write("**a. TPS** (calls per second), higher is better\n")
        self.write(table(["clients"] + [label(s) for s in servers] +
                         ["best gRPC", "tern ÷ best gRPC", "target", "tern TLS ÷ plaintext",
                          "target (TLS costs ≤ 30 %)"], rows))
        self.write("**b. p99 latency** (µs), lower is better\n")
        self.write(table(["clients"] + [label(s) for s in servers], p99_rows))
        self.cpu_tables(lambda k: [f"{k:,}"], cells, servers, "Calls", ["clients"],
                        whole_cell=True)
        self.write(SPREAD_NOTE)

    def tls_pingpong(self, runs):
        self.write("**a. Pingpong, 16 KiB blocks over TLS**: MB/s read by the client, every "
                   "byte checked; then the server's CPU (% of one CPU) and MB per server "
                   "CPU-second.\n")
        servers, cells = by_param(runs, "sessions")
        rows = []
        for sessions, here in cells.items():
            rates = {s: fig(r, "mb_per_s") for s, r in here.items()}
            group = next(iter(here.values()))["suite"].get("group")
            row = [sessions] + [fmt(rates[s]) + mark(here[s]) if s in here else "–"
                                for s in servers]
            row += [fmt(best_peer(rates)),
                    self.ratio_cell(group, "mb_per_s", best_tern, best_peer, rates),
                    self.target_cell(group, "mb_per_s", best_tern, best_peer, rates, 1.1)]
            rows.append(row)
        self.write(table(["sessions"] + servers + ["best peer", "tern ÷ best peer", "target"],
                         rows))
        self.cpu_tables(lambda k: [k], cells, servers, "MB", ["sessions"])

    def tls_handshakes(self, runs):
        self.write("**b. Handshakes**: short sessions of `tern-bench sessions --tls` (connect, "
                   "handshake, one 8-byte echo, close; 10 in flight), full handshakes (TLS 1.3, "
                   "ECDHE X25519, ECDSA P-256 signature) and with `--tls-resume` (the client "
                   "offers the last session's ticket; `resumed` is the share it got). Sessions "
                   "per second; server CPU per session in µs; sessions per server CPU-second.\n")
        servers = [s for s in PEER_ORDER if any(server_of(r) == s for r in runs)]
        cells = defaultdict(dict)
        for r in runs:
            kind = "resumed" if r.get("params", {}).get("tls_resume") else "full"
            cells[kind][server_of(r)] = r
        rows, cpu_rows = [], []
        for kind in ("full", "resumed"):
            if kind not in cells:
                continue
            here = [cells[kind].get(s) for s in servers]
            rates = {s: fig(r, "sessions_per_s") for s, r in cells[kind].items()}
            group = next(iter(cells[kind].values()))["suite"].get("group")
            row = [kind] + [fmt(fig(r, "sessions_per_s")) + mark(r) if r else "–" for r in here]
            row += [fmt(best_peer(rates)),
                    self.ratio_cell(group, "sessions_per_s", best_tern, best_peer, rates),
                    self.target_cell(group, "sessions_per_s", best_tern, best_peer, rates,
                                     1.0 if kind == "full" else 1.2)]
            rows.append(row)
            cpu_row = [kind]
            for r in here:
                if not r:
                    cpu_row.append("–")
                    continue
                cpu_us, rounds = median_cpu_us_per_session(r)
                text = f"{fmt(cpu_us)} µs"
                if len(rounds) > 1:
                    text += f" ({' / '.join(fmt(v) for v in rounds)})"
                text += f", {fmt(1e6 / cpu_us if cpu_us else None)}"
                if kind == "resumed" and fig(r, "sessions"):
                    text += f", {100 * (fig(r, 'tls_resumed') or 0) / fig(r, 'sessions'):.0f} % resumed"
                cpu_row.append(text)
            cpu_rows.append(cpu_row)
        self.write(table(["handshakes"] + servers + ["best peer", "tern ÷ best peer", "target"],
                         rows))
        self.write(table(["handshakes"] + [f"{s}: CPU per session, per CPU-s" for s in servers],
                         cpu_rows))
        self.write("Server CPU per session is the median of the rounds' own figures (each round in "
                   "brackets, in the order they ran), and sessions per server CPU-second follow "
                   "from it. The client is one tern-bench thread for every server; "
                   f"{client_cpu_sentence(runs)}\n")

    def failover(self):
        runs = [r for r in self.all_runs if r.get("suite", {}).get("table") == "failover"]
        if not runs:
            return
        rounds = max(r["suite"].get("rounds", 1) for r in runs)
        params = next((r["params"] for r in runs if r.get("params", {}).get("concurrency")), {})
        self.write("## Failover: a server killed or stopped under load\n")
        self.write(
            "Three `tern-rpc-server` processes on 127.0.0.1 (one thread each) and one "
            "`tern-bench failover` client (docs/benchmark-methods.md, \"Failover\"): "
            f"{params.get('concurrency', '?')} fibers call BenchmarkService/Say one after another "
            "through one channel over the three servers at the channel's defaults (round robin, "
            "up to 2 retries on other endpoints within the retry budget), each call with a "
            f"{fmt(params.get('timeout_s'))} s deadline; the calls of "
            f"{params.get('non_idempotent', '?')} of those fibers are not idempotent. After "
            f"{fmt(params.get('fault_after_s'))} s of load the client sends SIGKILL to the second "
            "server (or SIGTERM: its goaway and graceful stop), client and servers on one backend. "
            "**first retry**: from the signal to the first call that succeeded on another server "
            "after an attempt on the stopped one. **lost**: idempotent calls that did not "
            "succeed (target 0). **status**: calls that are not idempotent and returned a "
            "status instead of a reply (after SIGKILL, the ones the dead server may have run, "
            "which are never sent twice; after SIGTERM the target is 0). **late**: calls that "
            "returned more than 100 ms past their deadline (target 0). p99 and calls/s over the "
            f"{fmt(params.get('window_s'))} s before the signal and the same span after it. "
            f"Each cell is the median of {rounds} round(s), every round in brackets. No peer "
            "runs this table: its figures are times and counts held against targets.\n")
        faults = {"kill": "SIGKILL", "term": "SIGTERM (goaway)"}
        backends = {"tern": "epoll", "tern-uring": "io_uring"}
        rows = []
        for fault, fault_name in faults.items():
            for server, backend in backends.items():
                here = [r for r in runs if server_of(r) == server and
                        r.get("params", {}).get("fault") == fault]
                if not here:
                    continue
                marks = "" if all(r.get("verified") for r in here) else " ✗"

                def cell(key, digits=3):
                    values = [fig(r, key) for r in here]
                    known = sorted(v for v in values if v is not None)
                    median = known[(len(known) - 1) // 2] if known else None
                    each = " / ".join(fmt(v, digits) for v in values)
                    return fmt(median, digits) + (f" ({each})" if len(values) > 1 else "")

                rows.append([fault_name, backend, cell("first_retry_ms") + marks,
                             cell("idempotent_lost"), cell("non_idempotent_status"),
                             cell("late_calls"),
                             f"{cell('p99_before_ms')} → {cell('p99_window_ms')}",
                             f"{cell('calls_per_s_before')} → {cell('calls_per_s_window')}"])
        self.write(table(["fault", "backend", "first retry, ms", "lost", "status", "late",
                          "p99 before → after, ms", "calls/s before → after"], rows))

    def problems(self):
        bad = [r for r in self.all_runs if r.get("suite", {}).get("problem")]
        if not bad:
            return
        self.write("## Problems in this run\n")
        peers = [r for r in bad if problem_owner(r) == "peer"]
        ours = [r for r in bad if problem_owner(r) != "peer"]
        if ours:
            self.write("tern cells that failed (they fail `make bench`):\n")
            for r in ours:
                self.write(f"- {where(r)}{r['suite']['command']}: {one_line(r)}")
            self.write("")
        if peers:
            self.write("Cells a peer could not run (recorded, shown failed in their table; they "
                       "do not fail `make bench`):\n")
            for r in peers:
                self.write(f"- {where(r)}peer could not run this cell ({one_line(r)}): "
                           f"{r['suite']['command']}")
            self.write("")

    def plots(self, plot_python, output_dir):
        if not plot_python:
            self.write("Plots: not drawn (no plotting virtualenv; run `bash bench/suite/venv.sh`).\n")
            return
        script = os.path.join(REPO, "bench", "suite", "plots.py")
        done = subprocess.run([plot_python, script, "--output", output_dir],
                              input=json.dumps(self.results), capture_output=True, text=True)
        if done.returncode != 0:
            self.write(f"Plots: not drawn ({done.stderr.strip()[-300:]}).\n")
            return
        self.write("## Plots\n")
        rel = os.path.relpath(output_dir, os.path.dirname(self.output_path))
        for name in done.stdout.split():
            self.write(f"![{name}]({rel}/{name})\n")

    def render(self, output_path, plot_python, plots=True):
        self.output_path = output_path
        self.machine()
        self.switch()
        self.traffic()
        self.rpc()
        self.stream()
        self.ttcp()
        self.log()
        self.pingpong()
        self.sessions()
        self.hooks()
        self.tls()
        self.tls_rpc()
        self.failover()
        self.problems()
        if plots:
            self.plots(plot_python, os.path.join(os.path.dirname(output_path), "plots"))
        return "\n".join(self.out) + "\n"


def split_sections(text):
    """The text before the first "## " heading, and [(heading line, section text)]."""
    head, sections = [], []
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            sections.append([line.rstrip("\n"), line])
        elif sections:
            sections[-1][1] += line
        else:
            head.append(line)
    return "".join(head), [tuple(s) for s in sections]


# Sections that belong to the run named at the top of the report, never merged in.
WHOLE_RUN_SECTIONS = ("## Problems in this run", "## Plots")


def merged(existing, fresh, stamp):
    """`existing` report with the sections `fresh` measured (a run of some tables only,
    run.py --only) put in place of the sections of the same heading, or before the problems
    and plots when new; every other section of `existing` is kept as it was. A merged section
    says which results file it comes from."""
    _, new_sections = split_sections(fresh)
    head, old_sections = split_sections(existing)
    keep = [(h, t) for h, t in old_sections]
    for heading, text in new_sections:
        if heading in WHOLE_RUN_SECTIONS or "Not measured in this run" in text:
            continue
        first, _, rest = text.partition("\n")
        text = (f"{first}\n\nFrom `bench/results/{stamp}.json` (run.py --only), not the run "
                f"named at the top of this report.\n{rest}")
        at = next((i for i, (h, _) in enumerate(keep) if h == heading), None)
        if at is None:
            at = next((i for i, (h, _) in enumerate(keep) if h in WHOLE_RUN_SECTIONS), len(keep))
            keep.insert(at, (heading, text))
        else:
            keep[at] = (heading, text)
    return head + "".join(t if t.endswith("\n") else t + "\n" for _, t in keep)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", help="a results file written by bench/suite/run.py")
    parser.add_argument("--output", default=os.path.join(REPO, "bench", "REPORT.md"))
    parser.add_argument("--plot-python", default=None,
                        help="python with matplotlib (default: build/bench-venv/bin/python if present)")
    parser.add_argument("--merge", action="store_true",
                        help="replace only the sections this results file measured in the "
                             "existing --output (for a run of some tables) and keep the rest")
    args = parser.parse_args()
    with open(args.results) as f:
        results = json.load(f)
    plot_python = args.plot_python
    default_venv = os.path.join(REPO, "build", "bench-venv", "bin", "python")
    if plot_python is None and os.access(default_venv, os.X_OK):
        plot_python = default_venv
    if args.merge and os.path.exists(args.output):
        # The plots belong to the whole run at the top of the report: not redrawn.
        fresh = Report(results).render(os.path.abspath(args.output), None, plots=False)
        with open(args.output) as f:
            text = merged(f.read(), fresh, results["machine"]["stamp"])
    else:
        text = Report(results).render(os.path.abspath(args.output), plot_python)
    with open(args.output, "w") as f:
        f.write(text)
    print(f"report: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
