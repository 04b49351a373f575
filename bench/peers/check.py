#!/usr/bin/env python3
"""Checks the peer servers by hand-rolled clients on 127.0.0.1: the start line, byte-exact echo
of 1 MiB, a client that writes 8 MiB before it reads (the server must hold back, not drop),
20 concurrent connections, a peer reset and an early close (the server keeps serving), the ttcp
protocol of mtserver --mode ttcp, and a clean exit (status 0) on SIGTERM with a connection open.
The TLS peers (asio_echo, go_echo and tokio_echo with --tls-cert/--tls-key, on a certificate the
openssl CLI makes for the run) must echo over TLS, resume a session from their ticket, answer
close_notify with theirs, and keep serving after a client that sends plaintext.

    check.py [BUILD_DIR]     (default build/release; peers from BUILD_DIR/bench and BUILD_DIR/peers)

Servers whose binary is missing are reported as skipped. Exit status 1 if any check failed.
"""

import os
import re
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
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


def tls_servers(build):
    """The peers of the "tls" table (one thread, as the table runs them), each to be started with
    a certificate and key appended."""
    return [(name, command) for name, command in servers(build)
            if name in ("asio_echo", "go_echo", "tokio_echo") and len(command) == 1]


def make_certificate(folder):
    """A self-signed ECDSA P-256 certificate for 127.0.0.1 and its key, as the suite serves."""
    cert, key = os.path.join(folder, "server.crt"), os.path.join(folder, "server.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def tls_client():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the certificate is the run's own, self-signed
    return context


def tls_echo(port, context, session=None, blocks=64):
    """Writes `blocks` 16 KiB blocks over TLS, each read back before the next, then closes with
    close_notify and waits for the server's; returns the connection's session (to resume) and
    whether this connection resumed the one it was given."""
    with connect(port) as raw:
        with context.wrap_socket(raw, session=session) as sock:
            for _ in range(blocks):
                block = os.urandom(16 << 10)
                sock.sendall(block)
                if recv_exact(sock, len(block)) != block:
                    raise RuntimeError("echoed bytes differ")
            reused = sock.session_reused
            got = sock.session
            sock.unwrap()  # our close_notify, then the server's
            return got, reused


def check_tls_echo_resume_and_close(port):
    context = tls_client()
    session, _ = tls_echo(port, context)
    _, reused = tls_echo(port, context, session=session, blocks=1)
    if not reused:
        raise RuntimeError("the second connection's session ticket was not accepted")


def check_tls_plaintext_client(port):
    with connect(port) as sock:
        sock.sendall(b"GET / HTTP/1.0\r\n\r\n")  # not a ClientHello: the server closes
        sock.settimeout(10)
        try:
            while sock.recv(4096):
                pass
        except ConnectionResetError:
            pass
    tls_echo(port, tls_client(), blocks=1)


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
    with tempfile.TemporaryDirectory() as folder:
        cert, key = make_certificate(folder)
        tls_checks = [check_tls_echo_resume_and_close, check_tls_plaintext_client]
        for name, command in tls_servers(build):
            command += ["--tls-cert", cert, "--tls-key", key]
            results.append(run(f"{name} over TLS", command, tls_checks))
    passed, failed, skipped = results.count(True), results.count(False), results.count(None)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
