"""The cells of every table the suite reproduces (the reports of docs/benchmark-methods.md), for
the quick pass and the full matrix.

A cell is a dict:
  table           report id: "000", "001", "002-ttcp", "002-log", "003", "004", "switch",
                  "stream" (streaming RPC, tern vs gRPC), "stream-memory" (its memory part: a
                  peer that reads nothing; run by table "stream"), or
                  the hooks table's parts: "hook-micro", "hook-redis", "hook-pingpong", "hook-rpc"
  kind            cells the runner does not run as one server and one tern-bench: "redis" or
                  "micro" (the hooks table, bench/suite/hooks.py; client: the redis client model,
                  clients, requests; repetitions) and "failover" (bench/suite/failover.py: three
                  tern-rpc-server of `server`'s backend, tern-bench failover; fault: "kill" or
                  "term")
  server          server name (servers.Catalog) or None for in-process runs
  server_threads  threads of the server
  server_mode     tern-echo's --mode for this cell (peers echo whatever comes)
  buf             the server's read buffer
  args            tern-bench arguments after the subcommand (the target is added by the runner)
  client_threads  threads the client runs on (for pinning)
  program         "tern-bench" (default) or "switch_peers"
  client          001 only: whose client drives the server: "tern-bench" (default), or "peer" (the
                  server's own client from bench/peers: grpc_rpc_client, rpcx/erpc_rpc_client)
  group           the servers' cells of one comparison (same load, one cell per server) share a
                  group name: the runner repeats a group in rounds (run.py --rounds)
  client          also "peer-stream" in the stream table: grpc_stream_client drives the gRPC
                  server
  tls             the server serves TLS with the suite's test certificate (ECDSA P-256) and the
                  client adds --tls; tern runs at its defaults (no --idle-poll)
  tls_verify      tls cells whose client checks the server's certificate: the runner gives the
                  client the test certificate as its CA (tern-bench --tls-ca, the peers'
                  --tls-ca)

The "failover" table runs each fault in a group of the two tern backends in the full pass, so its
rounds alternate which backend goes first; the quick pass runs each of its four cells once.

The "tls" table is made of tables "tls-pingpong" and "tls-handshakes"; RPC over TLS is table
"tls-rpc" (tern-bench rpc --tls against tern-rpc-server, and gRPC C++ over TLS driven by its own
client), which report.py shows right after them (`--only tls` runs both, `--only tls-rpc` the
RPC part alone).
"""

# Servers compared in each table; peers missing on this machine are skipped by the runner.
ECHO_PEERS = ["asio", "go", "tokio"]
# "tern-plain-echo" is a labelled row of table 000: tern-echo in plain echo mode (bytes back as
# they came, what the peers do), so the framework's cost shows apart from frame16's parsing.
TRAFFIC_SERVERS = ["tern", "tern-plain-echo", "otechod", "mtserver"] + ECHO_PEERS
PINGPONG_SERVERS = ["tern", "tern-uring"] + ECHO_PEERS
SESSIONS_SERVERS = ["tern", "otechod", "mtserver"] + ECHO_PEERS
# The "tls" table: tern-echo --tls-cert against asio::ssl, Go crypto/tls and tokio-rustls echo
# servers. The quick pass runs pingpong without tern-uring and tokio (its 8 minutes), the
# handshakes with every server.
TLS_PINGPONG_SERVERS = ["tern", "tern-uring", "asio", "go", "tokio"]
TLS_QUICK_PINGPONG_SERVERS = ["tern", "asio", "go"]
TLS_HANDSHAKE_SERVERS = ["tern", "asio", "go", "tokio"]
# RPC over TLS: tern-rpc-server on both backends and gRPC C++ (both server APIs) over TLS, and
# tern-rpc-server in plaintext (epoll) in the same group, for what TLS costs tern.
TLS_RPC_SERVERS = ["tern", "tern-uring", "tern-plaintext", "grpc-sync", "grpc-callback"]
# Report 001: tern-rpc-server on both backends and the RPC peers, each driven by its own client.
RPC_SERVERS = ["tern", "tern-uring", "grpc-sync", "grpc-callback", "rpcx", "erpc"]
# The stream table: tern-rpc-server on both backends and gRPC C++'s server on both of its APIs.
STREAM_SERVERS = ["tern", "tern-uring", "grpc-sync", "grpc-callback"]
# tern runs at its defaults (no idle polling) in every headline column. This labelled variant,
# tern on epoll whose server and tern-bench client poll this long before they sleep
# (docs/guide.md, "Idle polling"), runs as an extra column where polling changes the picture:
# pingpong with one session, RPC with the fewest clients. The report keeps it out of every ratio.
IDLE_POLL_VARIANTS = {"tern-idle-poll": "200us"}


def switch_cells(switches):
    """tern-bench switch (tern's fiber and its raw context, one after the other in one process)
    and switch_peers' boost.context and ucontext, as one comparison run in rounds: the guest's
    speed can change between two single runs by more than the fiber's cost over the context."""
    # ucontext's switch is a system call (~270 ns): a tenth of the switches gives it as steady
    # a figure in a tenth of the time.
    cells = [{"table": "switch", "group": "switch", "server": None,
              "args": ["--switches", str(switches)], "mode": "switch",
              "estimate_s": 0.2 + switches * 30e-9}]
    for impl, count, ns in (("boost", switches, 6e-9), ("ucontext", switches // 10, 270e-9)):
        cells.append({"table": "switch", "group": "switch", "server": None,
                      "program": "switch_peers",
                      "args": ["--impl", impl, "--switches", str(count), "--json"],
                      "mode": "switch", "estimate_s": 0.2 + count * ns})
    return cells


def traffic_cells(seconds, full):
    cases = [("-A", 10, 1024), ("-S", 10, 1024)]
    if full:
        cases += [("-A", 50, 1024), ("-A", 10, 128), ("-A", 10, 10240), ("-S", 50, 1024)]
    cells = []
    for flag, threads, size in cases:
        workers = 1
        for server in TRAFFIC_SERVERS:
            cells.append({
                "table": "000", "group": f"000 {flag} t={threads} {size} B",
                "mode": "traffic", "server": server, "server_threads": 1,
                "server_mode": "echo" if server == "tern-plain-echo" else "frame16",
                "buf": 16384, "client_threads": workers,
                "args": [flag, "-t", str(threads), "-s", str(size), "-c", "1",
                         "--workers", str(workers), "--duration", str(seconds)]})
    # Report 000's "server discards the message" case: tern only (the peers echo everything), so
    # no comparison to repeat in rounds.
    cells.append({
        "table": "000",
        "mode": "traffic", "server": "tern", "server_threads": 1,
        "server_mode": "frame16", "buf": 16384, "client_threads": 1,
        "args": ["-A", "-t", "10", "-s", "1024", "-c", "2", "--workers", "1",
                 "--duration", str(seconds)]})
    return cells


def ttcp_cells(count, repeat):
    # One stop-and-wait round trip takes 15 to 25 µs on loopback.
    estimate = 0.3 + count * repeat * 20e-6
    common = ["--count", str(count), "--size", "1000", "--repeat", str(repeat)]
    cells = [
        {"table": "002-ttcp", "mode": "ttcp", "server": "mtserver", "server_threads": 1,
         "server_mode": "ttcp", "client_threads": 1, "label": "blocking client, mtserver",
         "args": ["--client", "blocking"] + common},
    ]
    for server, io in (("tern", "epoll"), ("tern-uring", "uring")):
        cells.append({"table": "002-ttcp", "mode": "ttcp", "server": server, "server_threads": 1,
                      "server_mode": "ttcp", "client_threads": 1,
                      "label": f"fiber client, tern-echo ({io})",
                      "args": ["--client", "fiber", "--io", io, "--workers", "1"] + common})
    # Report 002's setup: sender and receiver in one process on one CPU (coroutines in one thread;
    # blocking: two threads sharing the CPU).
    cells.append({"table": "002-ttcp", "mode": "ttcp", "server": None,
                  "label": "in one process: blocking threads, one CPU",
                  "args": ["--in-process", "--client", "blocking", "--placement", "same"] + common})
    for io in ("epoll", "uring"):
        cells.append({"table": "002-ttcp", "mode": "ttcp", "server": None,
                      "label": f"in one process: fibers, one worker ({io})",
                      "args": ["--in-process", "--io", io, "--workers", "1", "--placement",
                               "same"] + common})
    return [dict(c, estimate_s=estimate) for c in cells]


def log_cells(calls):
    """Report 002's log speed: tern-bench log runs tern's logger and spdlog three times each
    (its --rounds) with `calls` calls, on 1 and on 4 threads. Per million calls tern takes about
    0.2 s, spdlog 1.2 s on one thread and 2.5 s on four."""
    return [{"table": "002-log", "mode": "log", "server": None,
             "estimate_s": CELL_OVERHEAD_S + 3 * calls * (0.2e-6 + per_call),
             "args": ["--threads", str(threads), "--calls", str(calls)]}
            for threads, per_call in ((1, 1.2e-6), (4, 2.5e-6))]


# Report 003's comparisons (block bytes, threads, sessions). The quick pass keeps the cells that
# carry the report's point: one session on one thread (latency-bound; the idle-poll variant runs
# beside it), and 10 sessions on two threads (throughput with both CPUs busy).
PINGPONG_QUICK = [(16384, 1, 1), (16384, 2, 10)]
PINGPONG_FULL = [(block, threads, sessions) for block in (16384, 65536) for threads in (1, 2)
                 for sessions in (1, 10, 100)]


def pingpong_cells(seconds, full):
    cells = []
    for block, threads, sessions in PINGPONG_FULL if full else PINGPONG_QUICK:
        variants = list(IDLE_POLL_VARIANTS) if sessions == 1 else []
        for server in PINGPONG_SERVERS + variants:
            cells.append({
                "table": "003", "group": f"003 {block} B {threads} t {sessions} s",
                "mode": "pingpong", "server": server,
                "server_threads": threads, "server_mode": "echo", "buf": block,
                "client_threads": threads,
                "args": ["--threads", str(threads), "--block", str(block),
                         "--sessions", str(sessions), "--duration", str(seconds)]})
    return cells


# Report 004's client connects from this many loopback source addresses in turn. From one address
# a destination has only the 28,232 ports of the ephemeral range; past about 14,000 sessions a
# minute to one server, connect had to recycle TIME_WAIT ports, which cost the one client thread
# half as much CPU again per session and gave connect p99s of 0.1 to 0.3 s in whichever cells ran
# then (docs/benchmarks.md, "Table 004 and the client's ports").
SESSION_SOURCES = 16


def sessions_cells(total, full):
    """Report 004: `total` short sessions (connect, three 8-byte echoes, close) at each number in
    flight. The quick pass leaves out otechod (the issue's targets are against asio, Go and tokio;
    mtserver stays as the thread-per-connection model, with half the sessions: at 4,000 to 7,000
    sessions/s it is the slowest), the full pass runs every server."""
    in_flight_list = [100, 500, 1000, 5000, 10000] if full else [100, 1000, 10000]
    servers = SESSIONS_SERVERS if full else [s for s in SESSIONS_SERVERS if s != "otechod"]
    cells = []
    for in_flight in in_flight_list:
        for server in servers:
            sessions = total // 2 if server == "mtserver" and not full else total
            cells.append({
                "table": "004", "group": f"004 {in_flight} in flight",
                "mode": "sessions", "server": server, "server_threads": 1,
                "server_mode": "echo", "buf": 16384, "client_threads": 1,
                # 12,000 to 25,000 sessions/s here (quick pass of 2026-11-27 01:19); mtserver's
                # thread per connection 3,000 to 6,500 at 10,000 in flight.
                "estimate_s": CELL_OVERHEAD_S + sessions / 15_000,
                "args": ["--total", str(sessions), "--in-flight", str(in_flight), "--messages", "3",
                         "--size", "8", "--workers", "1", "--duration", "120",
                         "--sources", str(SESSION_SOURCES)]})
    return cells


def tls_cells(seconds, full):
    """Pingpong of 16 KiB blocks over TLS (quick: 1 and 100 sessions, tern on epoll; full: 1, 10
    and 100, tern on both backends), then
    short sessions that each make a full (or, with --tls-resume, a resumed) handshake and one
    8-byte echo: one server thread, one client thread, tern at its defaults."""
    cells = []
    servers = TLS_PINGPONG_SERVERS if full else TLS_QUICK_PINGPONG_SERVERS
    for sessions in (1, 10, 100) if full else (1, 100):
        for server in servers:
            cells.append({
                "table": "tls-pingpong", "group": f"tls pingpong {sessions} s", "tls": True,
                "mode": "pingpong", "server": server, "server_threads": 1,
                "server_mode": "echo", "buf": 16384, "client_threads": 1,
                "args": ["--tls", "--block", "16384", "--sessions", str(sessions),
                         "--duration", str(seconds)]})
    total = 5000 if full else 1000
    for kind, extra in (("full", []), ("resumed", ["--tls-resume"])):
        for server in TLS_HANDSHAKE_SERVERS:
            cells.append({
                "table": "tls-handshakes", "group": f"tls {kind} handshakes", "tls": True,
                "mode": "sessions", "server": server, "server_threads": 1,
                "server_mode": "echo", "buf": 16384, "client_threads": 1, "label": kind,
                # 1,500 to 3,000 full handshakes per second with one server thread.
                "estimate_s": CELL_OVERHEAD_S + total / 1500,
                "args": ["--tls"] + extra + ["--total", str(total), "--in-flight", "10",
                                             "--messages", "1", "--size", "8", "--workers", "1",
                                             "--duration", "60"]})
    return cells


def rpc_cells(total, full):
    """Report 001: -c clients, each with its own connection, make `total` calls in all. Every
    server runs one thread and every client one (tern-bench --workers 1, the peers' clients
    --threads 1), so on a 2-CPU machine each side gets its own CPU. tern-bench uses the I/O
    backend of the tern server it drives: each tern column is tern on one backend end to end
    (at 5,000 clients an epoll client held the io_uring server back by about a sixth). The quick
    pass runs 100, 1,000 and 5,000 clients and leaves out grpc-sync (gRPC's slower API: the best
    peer is rpcx or erpc at every level)."""
    concurrencies = [100, 500, 1000, 2000, 5000] if full else [100, 1000, 5000]
    servers = RPC_SERVERS if full else [s for s in RPC_SERVERS if s != "grpc-sync"]
    cells = []
    for concurrency in concurrencies:
        variants = list(IDLE_POLL_VARIANTS) if concurrency == concurrencies[0] else []
        for server in servers + variants:
            tern = server.startswith("tern")
            args = ["-c", str(concurrency), "-n", str(total)]
            if tern:
                args += ["--workers", "1", "--io", "uring" if server == "tern-uring" else "epoll"]
            else:
                args += ["--threads", "1"]
            # tern serves about 100,000 calls/s here, the peers 20,000 to 40,000; connecting
            # the clients takes about 0.1 ms each.
            rate = 100_000 if tern else 25_000
            cells.append({
                "table": "001", "group": f"001 {concurrency} clients",
                "mode": "rpc", "server": server, "server_threads": 1,
                "server_mode": "rpc", "client_threads": 1,
                "estimate_s": CELL_OVERHEAD_S + total / rate + concurrency * 1e-4,
                "client": "tern-bench" if tern else "peer", "args": args})
    return cells


# Messages per second each side of the stream table streams here (quick pass of 2026-11-27:
# tern 500,000 to 1,000,000 on either backend, gRPC's callback API 60,000 to 80,000).
STREAM_RATES = {"tern": 700_000, "grpc": 70_000}


def stream_cells(seconds, full):
    """The stream table: BenchmarkMessages over 1 stream and over 100 streams, every stream on
    one connection, each message answered on its stream (BenchmarkService/Pump). tern by
    `tern-bench rpc --stream --shared 1` on the server's backend, gRPC by grpc_stream_client
    (one channel); one server thread, one client CPU. Each cell is sized by time: enough
    messages for about `seconds` at its side's rate here (STREAM_RATES), so every system streams
    for the same time whatever its speed (a fixed count took tern 28 ms and gRPC 0.3 s). The
    quick pass leaves out grpc-sync (its rates were within the noise of grpc-callback's)."""
    servers = STREAM_SERVERS if full else [s for s in STREAM_SERVERS if s != "grpc-sync"]
    cells = []
    for streams in (1, 100):
        for server in servers:
            tern = server.startswith("tern")
            rate = STREAM_RATES["tern" if tern else "grpc"]
            total = int(rate * seconds) // 1000 * 1000
            args = ["-c", str(streams), "-n", str(total)]
            if tern:
                args = ["--stream", "--shared", "1"] + args + [
                    "--workers", "1", "--io", "uring" if server == "tern-uring" else "epoll"]
            cells.append({
                "table": "stream", "group": f"stream {streams} streams", "mode": "rpc",
                "server": server, "server_threads": 1, "server_mode": "rpc",
                "client_threads": 1, "client": "tern-bench" if tern else "peer-stream",
                "estimate_s": CELL_OVERHEAD_S + seconds, "args": args})
    return cells + stream_memory_cells(STALL_S)


# How long the stream table's memory cells hold their full streams.
STALL_S = 1.0


def stream_memory_cells(stall):
    """The stream table's memory part: tern-rpc-server (epoll, its defaults) driven by
    `tern-bench rpc --stream --stall` with 1 and then 100 streams on one connection that write
    as fast as flow control lets them and never read an answer; once every stream is full they
    are held `stall` seconds. tern-bench reports each stream's peak of unread answers against
    the window, the answers written before the server's writer parked, and the server's RSS
    growth up to full and during the hold. Each runs once (no group: nothing to compare it
    with; gRPC is not measured here)."""
    cells = []
    for streams in (1, 100):
        cells.append({
            "table": "stream-memory", "mode": "rpc", "server": "tern", "server_threads": 1,
            "server_mode": "rpc", "client_threads": 1,
            # Connecting, filling the streams (0.1 to 0.3 s on an idle machine), the hold, and
            # cancelling the streams.
            "estimate_s": CELL_OVERHEAD_S + stall + 0.3,
            "args": ["--stream", "--stall", str(stall), "--shared", "1", "-c", str(streams),
                     "--workers", "1", "--io", "epoll"]})
    return cells


def tls_rpc_cells(total, full):
    """Report 001's call over TLS, C clients each with its own connection making `total` calls
    in all: tern-rpc-server --tls-cert driven by tern-bench rpc --tls --tls-ca, gRPC over TLS by
    grpc_rpc_client --tls-ca (every client checks the test certificate), and tern in plaintext
    in the same group. One server thread, one client thread, tern at its defaults. Full: 100
    and 1,000 clients, every server; quick: 100 clients, tern on epoll (TLS and plaintext) and
    gRPC's callback API (the faster one)."""
    cells = []
    servers = TLS_RPC_SERVERS if full else ["tern", "tern-plaintext", "grpc-callback"]
    for concurrency in (100, 1000) if full else (100,):
        for server in servers:
            tern = server.startswith("tern")
            secure = server != "tern-plaintext"
            args = ["-c", str(concurrency), "-n", str(total)]
            if tern:
                args += ["--workers", "1", "--io", "uring" if server == "tern-uring" else "epoll"]
                if secure:
                    args.append("--tls")
            else:
                args += ["--threads", "1"]
            # tern serves about 100,000 plaintext and 50,000 TLS calls/s here, gRPC over TLS
            # 10,000 to 20,000; a TLS connection costs about 1 ms to set up.
            rate = (50_000 if secure else 100_000) if tern else 15_000
            cells.append({
                "table": "tls-rpc", "group": f"tls rpc {concurrency} clients", "tls": secure,
                "tls_verify": secure, "mode": "rpc", "server": server, "server_threads": 1,
                "server_mode": "rpc", "client_threads": 1,
                "estimate_s": CELL_OVERHEAD_S + total / rate + concurrency * 1e-3,
                "client": "tern-bench" if tern else "peer", "args": args})
    return cells


def hook_cells(seconds, full):
    """The hooks table (tern::hook, docs/hooks.md): the hook micro benchmark; N SETs and N GETs
    of 64-byte values against redis-server from redis-benchmark, redis_bench's fibers through
    tern::hook and its thread per connection (quick: 500 connections, where tern's targets are
    stated; full: 50 and 500); and pingpong and RPC against tern-echo and tern-rpc-server built
    with and without tern::hook linked."""
    requests = 200_000 if full else 30_000
    repetitions = 12 if full else 5
    min_time = 0.2 if full else 0.1
    # Google Benchmark runs each of the four benchmarks `repetitions` times for min_time.
    cells = [{"table": "hook-micro", "kind": "micro", "mode": "hook_bench", "server": None,
              "args": [], "repetitions": repetitions, "min_time": min_time,
              "estimate_s": 0.5 + 4 * repetitions * min_time * 1.5}]
    for clients in (50, 500) if full else (500,):
        for client in ("redis-benchmark", "fibers", "threads"):
            cells.append({"table": "hook-redis", "kind": "redis", "mode": "redis",
                          "group": f"hook redis {clients} clients", "server": None,
                          "client": client, "clients": clients, "requests": requests,
                          # 30,000 to 60,000 requests/s, and a fresh redis-server each time.
                          "estimate_s": 0.5 + requests / 30_000,
                          "args": ["-c", str(clients), "-n", str(requests), client]})
    backends = [("tern", "epoll"), ("tern-uring", "uring")] if full else [("tern", "epoll")]
    for plain, io in backends:
        for server in (plain, f"{plain}-hooked"):
            cells.append({
                "table": "hook-pingpong", "group": f"hook pingpong {io}", "mode": "pingpong",
                "server": server, "server_threads": 1, "server_mode": "echo", "buf": 16384,
                "client_threads": 1,
                "args": ["--threads", "1", "--block", "16384", "--sessions", "10", "--duration",
                         str(seconds), "--io", io]})
        for server in (plain, f"{plain}-hooked"):
            cells.append({
                "table": "hook-rpc", "group": f"hook rpc {io}", "mode": "rpc", "server": server,
                "server_threads": 1, "server_mode": "rpc", "client_threads": 1,
                "estimate_s": CELL_OVERHEAD_S + requests * 2 / 100_000,
                "args": ["-c", "100", "-n", str(requests * 2), "--workers", "1", "--io", io]})
    return cells


# The failover table's load: 48 clients over one channel to three servers, the last 8 making
# calls that are not idempotent; a 1 s deadline per call; the fault after 1 s of load (the start
# and its connections are out of the window before it), the 0.5 s after it compared with the
# 0.5 s before; 2 s of load in all.
FAILOVER_ARGS = ["-c", "48", "--non-idempotent", "8", "--timeout", "1", "--fault-after", "1",
                 "--window", "0.5", "--duration", "2"]


def failover_cells(full):
    """The failover table (bench/suite/failover.py): three tern-rpc-server processes behind one
    tern-bench failover client, the second server SIGKILLed ("kill") or stopped with SIGTERM
    ("term": its goaway, then a graceful stop), on each backend (client and servers alike). Both
    passes run each fault in rounds (a group of the two backends, which alternate going first),
    so every figure is the median of three rounds."""
    cells = []
    for fault in ("kill", "term"):
        for server, io in (("tern", "epoll"), ("tern-uring", "uring")):
            cells.append({"table": "failover", "kind": "failover", "mode": "failover",
                          "server": server, "fault": fault, "group": f"failover {fault}",
                          "estimate_s": 2.4,
                          "args": ["--io", io, "--fault", fault] + FAILOVER_ARGS})
    return cells


# Seconds a time-bound cell takes beyond its --duration: starting and stopping the server, the
# client's start and its connections, the machine check before a round (run.py). Measured in the
# quick pass of 2026-11-27 01:19: 0.03 s for a 2 s cell of 000 and 003, up to 0.3 s for gRPC.
CELL_OVERHEAD_S = 0.1


# Every table of the suite: its cells, and the wall time (seconds, three rounds) it may take in
# the quick pass and in the full pass. The quick pass must stay within PASS_BUDGET_S["quick"]
# (8 minutes) on a 2-CPU machine, the full pass within 45; suite_test checks that the budgets
# add up to no more than that and that each table's estimated time (estimate_seconds) fits its
# budget, and run.py prints each table's measured time beside its budget. A new table adds a row
# here (a table named in TABLES but not built yet keeps its time reserved); `--only` picks tables
# by the start of their name. `seconds` is the duration of a time-bound cell (run.py --seconds).
PASS_BUDGET_S = {"quick": 480, "full": 2700}
TABLES = {
    # name: (cells(full, seconds), quick budget s, full budget s)
    "switch": (lambda full, seconds: switch_cells(10_000_000), 4, 5),
    "000": (lambda full, seconds: traffic_cells(seconds, full), 95, 440),
    "001": (lambda full, seconds: rpc_cells(100_000 if full else 30_000, full), 75, 360),
    "002-ttcp": (lambda full, seconds: ttcp_cells(81920, 3 if full else 1), 12, 36),
    "002-log": (lambda full, seconds: log_cells(1_000_000 if full else 400_000), 8, 14),
    "003": (lambda full, seconds: pingpong_cells(seconds, full), 72, 680),
    "004": (lambda full, seconds: sessions_cells(50_000 if full else 15_000, full), 60, 330),
    "hook": (lambda full, seconds: hook_cells(seconds, full), 34, 250),
    "tls": (lambda full, seconds: tls_cells(seconds, full), 61, 280),
    "failover": (lambda full, seconds: failover_cells(full), 30, 40),
    "stream": (lambda full, seconds: stream_cells(1.0 if full else 0.5, full), 23, 63),
    "tls-rpc": (lambda full, seconds: tls_rpc_cells(100_000 if full else 8_000, full), 6, 180),
}


def failure_owner(cell):
    """Whose failure a failed cell is: "peer" when the program that failed to do the work is a
    peer's (a server not named tern*, a peer's own client, switch_peers, redis-benchmark), else
    "tern" (tern's servers, tern-bench's in-process runs, the hooks and failover tables). A peer's
    failure is recorded and reported; only a tern failure fails the pass (run.py)."""
    if cell.get("program") == "switch_peers":
        return "peer"
    if cell.get("kind") == "redis":
        return "peer" if cell.get("client") == "redis-benchmark" else "tern"
    if cell.get("kind"):
        return "tern"
    server = cell.get("server")
    return "peer" if server and not server.startswith("tern") else "tern"


def budget_seconds(name, full):
    """The wall time table `name` may take in the quick (or full) pass, in seconds."""
    return TABLES[name][2 if full else 1]


def estimate_seconds(cell):
    """How long one cell takes (one round), in seconds: its --duration plus CELL_OVERHEAD_S for
    a time-bound cell, else the estimate_s its table gave from measured rates."""
    if "estimate_s" in cell:
        return cell["estimate_s"]
    args = cell.get("args", [])
    if "--duration" in args:
        return float(args[args.index("--duration") + 1]) + CELL_OVERHEAD_S
    raise ValueError(f"cell of table {cell.get('table')} has neither --duration nor estimate_s")


def table_cells(full, seconds, only=None):
    """{table name: its cells in the order they run}, for the tables `only` names (all when
    empty)."""
    picked = {}
    for name, (build, _, _) in TABLES.items():
        if only and not any(name.startswith(o) for o in only):
            continue
        picked[name] = [dict(c, suite_table=name) for c in build(full, seconds)]
    return picked


def all_cells(full, seconds, only=None):
    """Every cell of the pass, in the order they run; each names its TABLES row in
    `suite_table`."""
    return [c for cells in table_cells(full, seconds, only).values() for c in cells]


def estimated_seconds(cells):
    """{table name: estimated wall time} of these cells (all_cells, then in_rounds)."""
    total = {}
    for cell in cells:
        total[cell["suite_table"]] = total.get(cell["suite_table"], 0.0) + estimate_seconds(cell)
    return total


def in_rounds(cells, rounds):
    """The cells in the order they run when every comparison group runs `rounds` times: a
    group's rounds follow one another, and each round starts one server later than the one
    before (round 2 of tern, asio, go runs asio, go, tern), so no server always runs first or
    right after the same peer. Cells without a group run once. Each cell gets `round` (from 1),
    `rounds`, and `round_start` (whether it opens its round: run.py waits for an idle machine
    only there)."""
    ordered = []
    index = 0
    while index < len(cells):
        group = cells[index].get("group")
        end = index + 1
        while group and end < len(cells) and cells[end].get("group") == group:
            end += 1
        members = cells[index:end]
        count = rounds if group else 1
        for round_index in range(count):
            shift = round_index % len(members)
            for position, cell in enumerate(members[shift:] + members[:shift]):
                ordered.append(dict(cell, round=round_index + 1, rounds=count,
                                    round_start=position == 0))
        index = end
    return ordered
