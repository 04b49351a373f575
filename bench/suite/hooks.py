"""The hooks table's cells that are not tern-bench runs: hiredis clients against a redis-server the
suite starts on a free loopback port (redis-benchmark, redis_bench's fibers through tern::hook and
its thread per connection), and the hook micro benchmark (bench/micro/hook_bench.cc). Each cell
gives run records in tern-bench's shape ("figures", "params", "verified"), so the report reads
them like every other run. The pingpong and RPC cells of the table (tern against the same server
built with tern::hook linked) are ordinary tern-bench cells (tables.hook_cells)."""

import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import machine

# The client models of a redis cell, as the report names them.
REDIS_CLIENTS = ["redis-benchmark", "fibers", "threads"]


def programs(build):
    """{name: path} of the programs the hooks table runs, from the build and the PATH."""
    found = {
        "redis_bench": os.path.join(build, "bench", "hook", "redis_bench"),
        "hook_bench": os.path.join(build, "bench", "micro", "hook_bench"),
    }
    for name in ("redis-server", "redis-benchmark"):
        for directory in os.environ.get("PATH", "").split(os.pathsep):
            if os.access(os.path.join(directory, name), os.X_OK):
                found[name] = os.path.join(directory, name)
                break
    return found


def missing(build, kind):
    """Why cells of `kind` ("redis" or "micro") cannot run on this build, or None."""
    needed = ["redis-server", "redis-benchmark", "redis_bench"] if kind == "redis" else [
        "hook_bench"]
    found = programs(build)
    absent = [n for n in needed if n not in found or not os.access(found[n], os.X_OK)]
    if not absent:
        return None
    return (f"{' and '.join(absent)} not found (redis-server and hiredis come from "
            "scripts/setup; redis_bench and hook_bench from -DTERN_BUILD_BENCH=ON)")


def redis_call(port, *words, timeout=2.0):
    """Sends one command to redis on 127.0.0.1:port and returns its raw reply (bytes)."""
    request = f"*{len(words)}\r\n" + "".join(f"${len(w)}\r\n{w}\r\n" for w in words)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(request.encode())
        reply = b""
        while True:
            chunk = conn.recv(65536)
            reply += chunk
            if not chunk or _complete(reply):
                return reply


def _complete(reply):
    if reply[:1] in (b"+", b"-", b":"):
        return reply.endswith(b"\r\n")
    if reply[:1] == b"$" and b"\r\n" in reply:
        length = int(reply[1:reply.index(b"\r\n")])
        return length < 0 or len(reply) >= reply.index(b"\r\n") + 2 + length + 2
    return False


def command_calls(port):
    """{command: calls} from INFO commandstats, lower-case names."""
    text = redis_call(port, "INFO", "commandstats").decode(errors="replace")
    calls = {}
    for line in text.splitlines():
        if line.startswith("cmdstat_") and ":calls=" in line:
            name, rest = line[len("cmdstat_"):].split(":", 1)
            calls[name] = int(rest.split(",")[0].split("=")[1])
    return calls


class RedisServer:
    """A redis-server on a free loopback port for one cell: redis cannot take port 0, so a free
    port is picked and the start retried on a clash. stop() ends it."""

    def __init__(self, path, attempts=5):
        self.output = tempfile.TemporaryFile(mode="w+")
        for _ in range(attempts):
            self.port = free_port()
            self.process = subprocess.Popen(
                [path, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                 "--appendonly", "no", "--maxclients", "10000", "--loglevel", "warning"],
                stdout=self.output, stderr=subprocess.STDOUT, start_new_session=True)
            if self._wait_for_ping():
                return
            self.stop()
        self.output.seek(0)
        raise RuntimeError(f"redis-server did not start: {self.output.read()[-400:]}")

    def _wait_for_ping(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                if redis_call(self.port, "PING", timeout=0.5).startswith(b"+PONG"):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    @property
    def pid(self):
        return self.process.pid

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after `timeout`; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def parse_redis_benchmark_csv(text, requests):
    """redis-benchmark --csv's SET and GET rows as one run's figures: requests/s over both tests
    (2N requests over the time of the two), and each test's p50 and p99 in µs; None if a row is
    missing."""
    rows = {}
    header = None
    for line in text.splitlines():
        fields = [f.strip('"') for f in line.strip().split(",")]
        if fields and fields[0] == "test":
            header = fields
        elif header and fields[0] in ("SET", "GET") and len(fields) == len(header):
            rows[fields[0]] = dict(zip(header, fields))
    if set(rows) != {"SET", "GET"}:
        return None
    figures = {}
    seconds = 0.0
    for name, row in rows.items():
        rps = float(row["rps"])
        seconds += requests / rps
        key = name.lower()
        figures[f"{key}_rps"] = rps
        figures[f"{key}_p50_us"] = float(row["p50_latency_ms"]) * 1000.0
        figures[f"{key}_p99_us"] = float(row["p99_latency_ms"]) * 1000.0
    figures["rps"] = 2 * requests / seconds
    figures["seconds"] = seconds
    return figures


def redis_cell_command(found, cell, port):
    """The client's command line for a redis cell against 127.0.0.1:port."""
    clients, requests = str(cell["clients"]), cell["requests"]
    if cell["client"] == "redis-benchmark":
        return [found["redis-benchmark"], "-h", "127.0.0.1", "-p", str(port), "-c", clients,
                "-n", str(requests), "-t", "set,get", "-d", "64", "--csv"]
    command = [found["redis_bench"], "--port", str(port), "--clients", clients, "--requests",
               str(2 * requests), "--json"]
    return command + (["--threads"] if cell["client"] == "threads" else [])


def run_redis_cell(build, cell, children_ticks):
    """Runs one redis cell: a fresh redis-server, the client to the end, then a check that the
    server counted N SETs and N GETs. Returns one run record (without "suite")."""
    found = programs(build)
    server = RedisServer(found["redis-server"])
    try:
        command = redis_cell_command(found, cell, server.port)
        busy0, total0 = machine.busy_and_total_ticks()
        server0 = machine.process_ticks(server.pid) or 0
        client0 = children_ticks()
        started = time.monotonic()
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=600)
            status, stdout, stderr = out.returncode, out.stdout, out.stderr
        except subprocess.TimeoutExpired:
            status, stdout, stderr = -1, "", "timed out after 600 s"
        elapsed = max(time.monotonic() - started, 1e-9)
        server_ticks = (machine.process_ticks(server.pid) or server0) - server0
        client_ticks = children_ticks() - client0
        busy1, total1 = machine.busy_and_total_ticks()
        try:
            calls = command_calls(server.port)
        except OSError:
            calls = {}
    finally:
        server_status = server.stop()
    run = {"tool": os.path.basename(command[0]), "mode": "redis", "target": cell["client"],
           "params": {"clients": cell["clients"], "requests": 2 * cell["requests"],
                      "value_bytes": 64, "model": cell["client"]},
           "figures": {}, "verified": False, "command": " ".join(command)}
    problem = None
    if status != 0:
        problem = f"exit status {status}: {stderr.strip()[-400:]}"
    elif cell["client"] == "redis-benchmark":
        run["figures"] = parse_redis_benchmark_csv(stdout, cell["requests"]) or {}
    else:
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        run["figures"] = json.loads(lines[-1]).get("figures", {}) if lines else {}
    if problem is None and not run["figures"]:
        problem = f"no result in the output: {(stdout + stderr).strip()[-400:]}"
    want = cell["requests"]
    if problem is None and (calls.get("set", 0) < want or calls.get("get", 0) < want):
        problem = (f"redis-server counted {calls.get('set', 0)} SET and {calls.get('get', 0)} "
                   f"GET, expected {want} of each")
    if server_status not in (0, None):
        problem = (problem + "; " if problem else "") + (
            f"redis-server exited with status {server_status}")
    run["verified"] = problem is None
    run["problem"] = problem
    run["server_cpu_pct"] = round(server_ticks / elapsed / machine.CLOCK_TICKS * 100.0, 1)
    run["client_cpu_pct"] = round(client_ticks / elapsed / machine.CLOCK_TICKS * 100.0, 1)
    run["figures"]["machine_busy_pct"] = round(
        100.0 * (busy1 - busy0) / max(total1 - total0, 1), 1)
    return run


def parse_hook_bench_json(text):
    """hook_bench's Google Benchmark JSON as figures: the median CPU ns per read of each variant
    and what the replaced read adds on a plain thread and in a fiber; None if a variant is
    missing or reported an error."""
    names = {"BM_ReadLibcDirect": "libc_thread_ns", "BM_ReadHookedPlainThread": "hooked_thread_ns",
             "BM_ReadLibcDirectInFiber": "libc_fiber_ns", "BM_ReadHookedInFiber": "hooked_fiber_ns"}
    figures = {}
    for bench in json.loads(text).get("benchmarks", []):
        if bench.get("error_occurred"):
            return None
        base = bench.get("run_name", bench.get("name", ""))
        if base in names and bench.get("aggregate_name") == "median":
            figures[names[base]] = float(bench["cpu_time"])
    if len(figures) != len(names):
        return None
    figures["thread_extra_ns"] = figures["hooked_thread_ns"] - figures["libc_thread_ns"]
    figures["fiber_extra_ns"] = figures["hooked_fiber_ns"] - figures["libc_fiber_ns"]
    return figures


def run_micro_cell(build, cell):
    """Runs hook_bench; returns one run record (without "suite")."""
    command = [programs(build)["hook_bench"], "--benchmark_format=json",
               f"--benchmark_repetitions={cell['repetitions']}",
               f"--benchmark_min_time={cell['min_time']}",
               "--benchmark_enable_random_interleaving=true",
               "--benchmark_report_aggregates_only=true"]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=300)
        status, stdout, stderr = out.returncode, out.stdout, out.stderr
    except subprocess.TimeoutExpired:
        status, stdout, stderr = -1, "", "timed out after 300 s"
    figures = None
    if status == 0:
        try:
            figures = parse_hook_bench_json(stdout)
        except ValueError:
            figures = None
    problem = None if figures else (f"exit status {status}: {stderr.strip()[-400:]}" if status
                                    else "hook_bench's output lacks a variant or has an error")
    return {"tool": "hook_bench", "mode": "hook_bench", "target": "hook_bench",
            "params": {"repetitions": cell["repetitions"]}, "figures": figures or {},
            "verified": problem is None, "problem": problem, "command": " ".join(command)}
