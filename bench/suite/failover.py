"""The failover table (docs/benchmark-methods.md, docs/cluster.md): three tern-rpc-server
processes on 127.0.0.1 behind one `tern-bench failover` client whose channel spreads idempotent
calls with a deadline over all three. tern-bench sends the fault to the second server itself
(SIGKILL, or SIGTERM for a graceful stop with its goaway), so the moment of the fault and every
call are timed on one clock; the suite checks afterwards that the server really died of SIGKILL
(or stopped with status 0) and that the other two are still serving."""

import json
import os
import signal
import subprocess

import servers

SERVER_COUNT = 3
VICTIM = 1  # the second server: the fault's target
# Nothing in a cell may take longer: 3 s of load, server starts and stops included.
CELL_TIMEOUT_S = 30


def programs(build):
    """The two programs a failover cell runs: (tern-bench, tern-rpc-server)."""
    return (os.path.join(build, "tools", "tern-bench", "tern-bench"),
            os.path.join(build, "tools", "tern-rpc-server"))


def missing(build):
    """Why failover cells cannot run on this build, or None."""
    absent = [p for p in programs(build) if not os.access(p, os.X_OK)]
    return f"{' and '.join(absent)} not built" if absent else None


def expected_exit(fault):
    """How the stopped server must end: killed by SIGKILL, or its own exit 0 after SIGTERM."""
    return -signal.SIGKILL if fault == "kill" else 0


def run_cell(build, catalog, cell):
    """Starts the servers of `cell`, runs tern-bench failover against them and stops them.
    Returns (run, command, problem): tern-bench's JSON report (or a stand-in), the client's
    command line, and what went wrong (None when nothing did)."""
    tern_bench, _ = programs(build)
    name = cell["server"]
    started = []
    try:
        for index in range(SERVER_COUNT):
            started.append(servers.RunningServer(
                f"{name} #{index + 1}", catalog.command(name, 1, "rpc"), []))
    except RuntimeError as error:
        for server in started:
            server.stop()
        return None, "", str(error)
    victim = started[VICTIM]
    targets = ",".join(f"127.0.0.1:{s.port}" for s in started)
    command = [tern_bench, "failover", targets, "--name", name, "--fault-pid", str(victim.pid),
               "--json", "--quiet"] + cell["args"]
    problems = []
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=CELL_TIMEOUT_S)
        status, stdout, stderr = out.returncode, out.stdout, out.stderr
    except subprocess.TimeoutExpired:
        status, stdout, stderr = -1, "", f"timed out after {CELL_TIMEOUT_S} s"
    try:
        victim_status = victim.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        victim_status = None
    wanted = expected_exit(cell["fault"])
    if victim_status != wanted:
        problems.append(f"the stopped server ended with {victim_status}, expected {wanted}: "
                        f"{victim.log()[-300:]}")
    for server in started:
        if server is victim:
            server.stop()
            continue
        if server.process.poll() is not None:
            problems.append(f"{server.name} died during the cell: {server.log()[-300:]}")
        elif server.stop() != 0:
            problems.append(f"{server.name} did not stop cleanly: {server.log()[-300:]}")
    run = None
    for line in stdout.splitlines():
        if line.strip().startswith("{"):
            try:
                run = json.loads(line)
            except ValueError:
                pass
    if status != 0:
        detail = "; ".join(run.get("error_messages", [])[:3]) if run else stderr.strip()[-400:]
        problems.insert(0, f"exit status {status}: {detail}")
    elif run is None:
        problems.insert(0, f"no JSON result: {stderr.strip()[-400:]}")
    return run, " ".join(command), "; ".join(problems) or None
