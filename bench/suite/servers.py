"""The servers a benchmark cell runs against: tern-echo and the peers in bench/peers."""

import json
import os
import re
import signal
import subprocess
import tempfile
import time

import machine

START_LINE = re.compile(r"listening on (\S+):(\d+)")

# tern's servers by name, with the I/O backend each runs: the headline ones, the labelled variant
# that polls when idle (run.py gives it --idle-poll), table 000's labelled plain echo row (its
# cells give it --mode echo), tern-rpc-server in plaintext beside its TLS columns (table
# tls-rpc), and the builds with tern::hook linked (the hooks table: bench/hook/CMakeLists.txt).
TERN_BACKENDS = {"tern": "epoll", "tern-uring": "uring", "tern-idle-poll": "epoll",
                 "tern-plain-echo": "epoll", "tern-plaintext": "epoll",
                 "tern-hooked": "epoll", "tern-uring-hooked": "uring"}


class Catalog:
    """Where each server's binary is, and which peers this machine could not build."""

    def __init__(self, build_dir):
        self.build = build_dir
        self.binaries = {
            "tern": os.path.join(build_dir, "tools", "tern-echo"),
            "tern-uring": os.path.join(build_dir, "tools", "tern-echo"),
            "tern-idle-poll": os.path.join(build_dir, "tools", "tern-echo"),
            "tern-plain-echo": os.path.join(build_dir, "tools", "tern-echo"),
            "tern-hooked": os.path.join(build_dir, "bench", "hook", "tern-echo-hooked"),
            "tern-uring-hooked": os.path.join(build_dir, "bench", "hook", "tern-echo-hooked"),
            "asio": os.path.join(build_dir, "bench", "asio_echo"),
            "otechod": os.path.join(build_dir, "bench", "otechod"),
            "mtserver": os.path.join(build_dir, "bench", "mtserver"),
            "go": os.path.join(build_dir, "peers", "go_echo"),
            "tokio": os.path.join(build_dir, "peers", "tokio_echo"),
        }
        # Report 001: the RPC servers and the client that drives each of them (tern's is
        # tern-bench rpc; every peer brings its own).
        peers = os.path.join(build_dir, "peers")
        self.rpc_servers = {
            "tern": os.path.join(build_dir, "tools", "tern-rpc-server"),
            "tern-uring": os.path.join(build_dir, "tools", "tern-rpc-server"),
            "tern-idle-poll": os.path.join(build_dir, "tools", "tern-rpc-server"),
            "tern-plaintext": os.path.join(build_dir, "tools", "tern-rpc-server"),
            "tern-hooked": os.path.join(build_dir, "bench", "hook", "tern-rpc-server-hooked"),
            "tern-uring-hooked": os.path.join(build_dir, "bench", "hook",
                                              "tern-rpc-server-hooked"),
            "grpc-sync": os.path.join(build_dir, "bench", "grpc_rpc_server"),
            "grpc-callback": os.path.join(build_dir, "bench", "grpc_rpc_server"),
            "rpcx": os.path.join(peers, "rpcx_rpc_server"),
            "erpc": os.path.join(peers, "erpc_rpc_server"),
        }
        self.rpc_clients = {
            "grpc-sync": os.path.join(build_dir, "bench", "grpc_rpc_client"),
            "grpc-callback": os.path.join(build_dir, "bench", "grpc_rpc_client"),
            "rpcx": os.path.join(peers, "rpcx_rpc_client"),
            "erpc": os.path.join(peers, "erpc_rpc_client"),
        }
        # The streaming table: tern-rpc-server is driven by tern-bench rpc --stream, gRPC's server
        # (either API) by grpc_stream_client.
        self.stream_client = os.path.join(build_dir, "bench", "grpc_stream_client")
        self.versions = self._read_versions()
        self.skipped = {}
        for name, path in self.binaries.items():
            if not os.access(path, os.X_OK):
                reason = self.versions.get(name, {}).get("skip_reason") or f"{path} was not built"
                self.skipped[name] = reason
        for name in ("tern-hooked", "tern-uring-hooked"):
            if not os.access(self.rpc_servers[name], os.X_OK):
                self.skipped.setdefault(name, f"{self.rpc_servers[name]} was not built")
        for name, client in self.rpc_clients.items():
            missing = [p for p in (self.rpc_servers[name], client) if not os.access(p, os.X_OK)]
            if missing:
                reason = self.versions.get(name, {}).get("skip_reason") or (
                    f"{' and '.join(missing)} not built")
                self.skipped[name] = reason
        missing = [p for p in (self.rpc_servers["grpc-sync"], self.stream_client)
                   if not os.access(p, os.X_OK)]
        if missing:
            self.skipped["grpc-stream"] = self.versions.get("grpc-stream", {}).get(
                "skip_reason") or f"{' and '.join(missing)} not built"

    def _read_versions(self):
        path = os.path.join(self.build, "peers", "versions.json")
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            return {}
        peers = data.get("peers", data) if isinstance(data, dict) else data
        if isinstance(peers, dict):
            peers = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "version": v}
                     for k, v in peers.items()]
        by_name = {}
        for peer in peers if isinstance(peers, list) else []:
            name = str(peer.get("name", ""))
            short = {"go_echo": "go", "tokio_echo": "tokio", "asio_echo": "asio"}.get(name, name)
            by_name[short] = peer
        return by_name

    def rpc_client_command(self, name, port, args, tls_ca=None):
        """The command line of peer `name`'s own RPC client against 127.0.0.1:port, printing
        one JSON line in tern-bench rpc's shape. tls_ca: speak TLS and check the server's
        certificate against this CA file (gRPC's client)."""
        command = [self.rpc_clients[name], "--target", f"127.0.0.1:{port}"] + args + ["--json"]
        if name.startswith("grpc-"):
            command += ["--peer", name]
        if tls_ca:
            command += ["--tls-ca", tls_ca]
        return command

    def stream_client_command(self, name, port, args):
        """The command line of grpc_stream_client against gRPC server `name` (grpc-sync or
        grpc-callback) on 127.0.0.1:port, printing one JSON line in tern-bench rpc's shape."""
        return [self.stream_client, "--target", f"127.0.0.1:{port}"] + args + [
            "--peer", name, "--json"]

    def available(self, names):
        """The names from `names` whose binaries exist."""
        return [n for n in names if n not in self.skipped]

    def command(self, name, threads, mode="echo", buf=16384, tls=None):
        """The command line starting server `name` on 127.0.0.1, port 0 (mode "rpc": the
        report 001 BenchmarkService server of that name). tls: (certificate, key) files to
        serve TLS with (the echo servers tern, asio and go; tern-rpc-server and gRPC)."""
        common = ["--host", "127.0.0.1", "--port", "0"]
        if tls:
            common += ["--tls-cert", tls[0], "--tls-key", tls[1]]
        if mode == "rpc":
            path = self.rpc_servers[name]
            if name in TERN_BACKENDS:
                return [path, "--io", TERN_BACKENDS[name], "--threads", str(threads)] + common
            if name.startswith("grpc-"):
                return [path, "--api", name[len("grpc-"):], "--threads", str(threads)] + common
            return [path, "--threads", str(threads)] + common
        path = self.binaries[name]
        if name in TERN_BACKENDS:
            return [path, "--io", TERN_BACKENDS[name], "--threads", str(threads), "--mode", mode,
                    "--buf", str(buf)] + common
        if name == "otechod":
            return [path] + common
        if name == "mtserver":
            return [path, "--mode", "ttcp" if mode == "ttcp" else "echo"] + common
        return [path, "--threads", str(threads)] + common


class RunningServer:
    """A server process started for one cell; stop() ends it and reports how it went."""

    def __init__(self, name, command, cpus):
        self.name = name
        self.output = tempfile.TemporaryFile(mode="w+")
        self.process = subprocess.Popen(machine.taskset(cpus, command), stdout=self.output,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.port = self._wait_for_port(command[0])

    def _wait_for_port(self, program, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.output.seek(0)
            match = START_LINE.search(self.output.read())
            if match:
                return int(match.group(2))
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        text = self.log()
        self.stop()
        raise RuntimeError(f"{self.name} ({program}) did not start listening: {text[-800:]}")

    @property
    def pid(self):
        return self.process.pid

    def log(self):
        self.output.seek(0)
        return self.output.read()

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
