#!/usr/bin/env python3
"""tern-echo --tls-cert/--tls-key and tern-bench's --tls end to end, with Python's ssl module as
the reference client.

  tern_echo_tls_test.py TERN_ECHO TERN_BENCH IO_BACKEND

Makes a CA and a server certificate with the openssl command line in a temporary folder,
starts tern-echo on a free loopback port over TLS, checks that a verifying client's messages
come back unchanged and that a plaintext client is refused while the server keeps serving, runs
tern-bench pingpong --tls and sessions --tls --tls-resume (verifying the server) against it,
checking that sessions were resumed, then stops tern-echo (always, even when a check fails).
Exits 0 when every check holds.
"""

import json
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path


def make_certificates(folder):
    def run(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ca_key, ca_crt = folder / "ca.key", folder / "ca.crt"
    key, csr, crt, ext = (folder / f"server.{s}" for s in ("key", "csr", "crt", "ext"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    run("req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca_crt), "-days", "2",
        "-subj", "/CN=tern-echo test CA")
    run("req", "-new", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey", str(ca_key),
        "-set_serial", "7", "-days", "2", "-extfile", str(ext), "-out", str(crt))
    return ca_crt, crt, key


def echo_over_tls(port, ca_crt):
    context = ssl.create_default_context(cafile=str(ca_crt))
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as tls:
            for size in (1, 1000, 100_000):
                message = bytes(i % 251 for i in range(size))
                tls.sendall(message)
                back = b""
                while len(back) < size:
                    chunk = tls.recv(size - len(back))
                    if not chunk:
                        raise AssertionError(f"echo ended after {len(back)} of {size} bytes")
                    back += chunk
                if back != message:
                    raise AssertionError(f"a message of {size} bytes came back changed")
            tls.unwrap()


def plaintext_is_refused(port):
    with socket.create_connection(("127.0.0.1", port), timeout=20) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        while True:
            try:
                if not raw.recv(4096):
                    return
            except ConnectionResetError:
                return


def main():
    tern_echo, tern_bench, backend = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as scratch:
        ca_crt, crt, key = make_certificates(Path(scratch))
        server = subprocess.Popen(
            [tern_echo, "--io", backend, "-t", "1", "-p", "0", "--tls-cert", str(crt),
             "--tls-key", str(key)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            line = server.stdout.readline()
            if "listening on 127.0.0.1:" not in line or "over TLS" not in line:
                raise AssertionError(f"tern-echo did not start: {line!r}")
            port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
            echo_over_tls(port, ca_crt)
            plaintext_is_refused(port)
            echo_over_tls(port, ca_crt)
            bench = subprocess.run(
                [tern_bench, "pingpong", "--io", backend, "--target", f"127.0.0.1:{port}",
                 "--tls", "--tls-ca", str(ca_crt), "--duration", "1", "--sessions", "4",
                 "--json"], capture_output=True, text=True, timeout=60)
            result = json.loads(bench.stdout)
            if bench.returncode != 0 or not result["verified"] or not result["params"]["tls"]:
                raise AssertionError(f"tern-bench pingpong --tls: {bench.stdout} {bench.stderr}")
            sessions = subprocess.run(
                [tern_bench, "sessions", "--io", backend, "--target", f"127.0.0.1:{port}",
                 "--tls", "--tls-resume", "--tls-ca", str(ca_crt), "--total", "20",
                 "--in-flight", "2", "--json"], capture_output=True, text=True, timeout=60)
            result = json.loads(sessions.stdout)
            resumed = result["figures"].get("tls_resumed", 0)
            if sessions.returncode != 0 or not result["verified"] or result["figures"]["sessions"] != 20 \
                    or not 0 < resumed < 20:
                raise AssertionError(f"tern-bench sessions --tls --tls-resume: {sessions.stdout}")
        finally:
            server.terminate()
            output, _ = server.communicate(timeout=20)
        if f"26 TLS handshakes ({resumed} resumed), 1 refused in the handshake" not in output:
            raise AssertionError(f"tern-echo's summary: {output!r}")
    print("tern-echo, tern-bench pingpong and sessions over TLS: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
