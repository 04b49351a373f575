#!/usr/bin/env python3
"""Checks the peer servers by hand-rolled clients on 127.0.0.1: the start line, byte-exact echo
of 1 MiB, a client that writes 8 MiB before it reads (the server must hold back, not drop),
20 concurrent connections, a peer reset and an early close (the server keeps serving), the ttcp
protocol of mtserver --mode ttcp, and a clean exit (status 0) on SIGTERM with a connection open.

    check.py [BUILD_DIR]     (default build/release; peers from BUILD_DIR/bench and BUILD_DIR/peers)

Servers whose binary is missing are reported as skipped. Exit status 1 if any check failed.
"""

import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

START_LINE = re.compile(r"^(\S+): listening on (\S+):(\d+)")


def servers(build):
    bench, peers = os.path.join(build, "bench"), os.path.join(build, "peers")
    return [
        ("otechod", [os.path.join(bench, "otechod")]),
        ("otechod", [os.path.join(bench, "otechod"), "--threads", "2"]),
        ("mtserver", [os.path.join(bench, "mtserver")]),
        ("asio_echo", [os.path.join(bench, "asio_echo")]),
        ("asio_echo", [os.path.join(bench, "asio_echo"), "--threads", "2"]),
        ("go_echo", [os.path.join(peers, "go_echo")]),
        ("go_echo", [os.path.join(peers, "go_echo"), "--threads", "2"]),
        ("tokio_echo", [os.path.join(peers, "tokio_echo")]),
        ("tokio_echo", [os.path.join(peers, "tokio_echo"), "--threads", "2"]),
        ("tokio_echo", [os.path.join(peers, "tokio_echo"), "--threads", "2", "--model", "runtimes"]),
    ]


def start(command):
    """Starts a server on port 0; returns (process, port) once its start line is read."""
    process = subprocess.Popen(command + ["--host", "127.0.0.1", "--port", "0"],
                               stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([process.stdout], [], [], 10)
    line = process.stdout.readline() if ready else ""
    match = START_LINE.match(line)
    if not match:
        process.kill()
        raise RuntimeError(f"no start line (got {line!r})")
    name = os.path.basename(command[0])
    if match.group(1) != name or match.group(2) != "127.0.0.1":
        process.kill()
        raise RuntimeError(f"start line names {match.group(1)} {match.group(2)}: {line!r}")
    return process, int(match.group(3))


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exact(sock, size):
    chunks, got = [], 0
    while got < size:
        chunk = sock.recv(min(1 << 20, size - got))
        if not chunk:
            raise RuntimeError(f"connection closed after {got} of {size} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def echo_through(port, data, read_delay=0.0):
    """Sends data (from a thread) and reads it back; read_delay lets the writer run ahead."""
    with connect(port) as sock:
        writer = threading.Thread(target=sock.sendall, args=(data,))
        writer.start()
        time.sleep(read_delay)
        echoed = recv_exact(sock, len(data))
        writer.join()
        sock.shutdown(socket.SHUT_WR)
        if sock.recv(1) != b"":
            raise RuntimeError("bytes after the echo")
    if echoed != data:
        raise RuntimeError("echoed bytes differ")


def check_echo(port):
    echo_through(port, os.urandom(1 << 20))


def check_backpressure(port):
    echo_through(port, os.urandom(8 << 20), read_delay=0.5)


def check_concurrent(port):
    errors = []

    def one():
        try:
            echo_through(port, os.urandom(256 << 10))
        except Exception as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of 20 connections failed: {errors[0]}")


def check_reset_and_close(port):
    sock = connect(port)
    sock.sendall(os.urandom(64 << 10))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # RST with echoed bytes unread
    connect(port).close()  # a close before any byte
    echo_through(port, b"still serving")


def check_ttcp(port):
    payload = os.urandom(1000)
    with connect(port) as sock:
        message = struct.pack(">I", len(payload)) + payload
        for _ in range(1000):
            sock.sendall(message)
            if recv_exact(sock, 4) != message[:4]:
                raise RuntimeError("ack does not carry the length")


def check_ttcp_reset(port):
    sock = connect(port)
    sock.sendall(struct.pack(">I", 1000) + os.urandom(300))  # half a message, then RST
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    check_ttcp(port)


def check_stop(process, port):
    idle = connect(port)
    process.send_signal(signal.SIGTERM)
    try:
        status = process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        raise RuntimeError("still running 10 s after SIGTERM")
    finally:
        idle.close()
    if status != 0:
        raise RuntimeError(f"exit status {status} after SIGTERM")


def run(label, command, checks):
    if not os.access(command[0], os.X_OK):
        print(f"SKIP {label}: {command[0]} not built")
        return None
    try:
        process, port = start(command)
    except Exception as error:
        print(f"FAIL {label}: {error}")
        return False
    passed = True
    for check in checks:
        try:
            began = time.monotonic()
            check(port)
            print(f"  ok   {label}: {check.__name__} ({time.monotonic() - began:.2f} s)")
        except Exception as error:
            print(f"  FAIL {label}: {check.__name__}: {error}")
            passed = False
    try:
        check_stop(process, port)
        print(f"  ok   {label}: SIGTERM -> exit 0")
    except Exception as error:
        print(f"  FAIL {label}: stop: {error}")
        passed = False
    print(f"{'PASS' if passed else 'FAIL'} {label}")
    return passed


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    echo_checks = [check_echo, check_backpressure, check_concurrent, check_reset_and_close]
    results = []
    for name, command in servers(build):
        label = " ".join([name] + command[1:])
        results.append(run(label, command, echo_checks))
    mtserver = os.path.join(build, "bench", "mtserver")
    results.append(run("mtserver --mode ttcp", [mtserver, "--mode", "ttcp"],
                       [check_ttcp, check_ttcp_reset]))
    passed, failed, skipped = results.count(True), results.count(False), results.count(None)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
