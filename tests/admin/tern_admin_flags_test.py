#!/usr/bin/env python3
"""The admin flags of tern's servers end to end, with Python's http.client and ssl modules as
the client.

  tern_admin_flags_test.py TERN_ECHO TERN_RPC_SERVER IO_BACKEND

Makes a CA, a server and a client certificate with the openssl command line in a temporary
folder (tests/tls/tern_echo_tls_test.py's helper for the first two), then:
- tern-echo --admin 127.0.0.1:0 --admin-tls-cert/--admin-tls-key --admin-token-file: /metrics
  over HTTPS with the token is 200, without it 401;
- tern-rpc-server with --admin-tls-ca as well: a client with its certificate and the token gets
  /status, a client without a certificate is refused in the handshake;
- wrong combinations of the flags exit 2 saying why.
Every server started is stopped, even when a check fails. Exits 0 when every check holds.
"""

import http.client
import json
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tls"))
from tern_echo_tls_test import make_certificates  # noqa: E402

TOKEN = "4f1c0ffee-admin"


def make_client_certificate(folder, ca_crt):
    key, csr, crt = (folder / f"client.{s}" for s in ("key", "csr", "crt"))
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    for args in (["req", "-new", *curve, "-keyout", str(key), "-out", str(csr), "-subj",
                  "/CN=operator"],
                 ["x509", "-req", "-in", str(csr), "-CA", str(ca_crt), "-CAkey",
                  str(folder / "ca.key"), "-set_serial", "8", "-days", "2", "-out", str(crt)]):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    return crt, key


def get(port, ca_crt, path, token=None, client=None):
    """(status, WWW-Authenticate) of GET path over HTTPS; raises on a refused handshake."""
    context = ssl.create_default_context(cafile=str(ca_crt))
    if client:
        context.load_cert_chain(*map(str, client))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=20)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode()
        return response.status, response.getheader("WWW-Authenticate", ""), body
    finally:
        connection.close()


def start(command, marker):
    """Starts a server and returns (process, admin port) from its first line."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = server.stdout.readline()
    if marker not in line or ", admin 127.0.0.1:" not in line:
        server.kill()
        server.communicate(timeout=20)
        raise AssertionError(f"{command[0]} did not start: {line!r}")
    return server, int(line.split(", admin 127.0.0.1:")[1].split(")")[0])


def stop(server):
    server.terminate()
    server.communicate(timeout=20)


def main():
    tern_echo, tern_rpc_server, backend = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ca_crt, crt, key = make_certificates(folder)
        client = make_client_certificate(folder, ca_crt)
        token_file = folder / "admin.token"
        token_file.write_text(TOKEN + "\n")
        tls = ["--admin", "127.0.0.1:0", "--admin-tls-cert", str(crt), "--admin-tls-key", str(key),
               "--admin-token-file", str(token_file)]

        echo, port = start([tern_echo, "--io", backend, "-t", "1", "-p", "0", *tls],
                           "tern-echo: listening on")
        try:
            status, _, body = get(port, ca_crt, "/metrics", token=TOKEN)
            if status != 200 or "# TYPE tern_fibers_alive gauge" not in body:
                raise AssertionError(f"tern-echo /metrics with the token: {status} {body[:200]!r}")
            status, challenge, _ = get(port, ca_crt, "/metrics")
            if status != 401 or challenge != 'Bearer realm="tern-admin"':
                raise AssertionError(f"tern-echo /metrics without the token: {status} {challenge!r}")
        finally:
            stop(echo)

        rpc, port = start([tern_rpc_server, "--io", backend, "-t", "1", *tls, "--admin-tls-ca",
                           str(ca_crt)], "tern-rpc-server: listening on")
        try:
            status, _, body = get(port, ca_crt, "/status", token=TOKEN, client=client)
            if status != 200 or not isinstance(json.loads(body), dict):
                raise AssertionError(f"tern-rpc-server /status over mutual TLS: {status} {body!r}")
            try:
                get(port, ca_crt, "/status", token=TOKEN)
                raise AssertionError("tern-rpc-server let in a client without a certificate")
            except (ssl.SSLError, ConnectionError, http.client.HTTPException):
                pass
            status, _, _ = get(port, ca_crt, "/", token=TOKEN, client=client)
            if status != 200:
                raise AssertionError(f"tern-rpc-server stopped serving its admin endpoint: {status}")
        finally:
            stop(rpc)

        for tool, args, why in (
                (tern_echo, ["--admin-token-file", str(token_file)], "they protect --admin"),
                (tern_echo, ["--admin", ":0", "--admin-tls-cert", str(crt)], "go together"),
                (tern_rpc_server, ["--admin", ":0", "--admin-tls-ca", str(ca_crt)],
                 "over TLS only"),
                (tern_rpc_server, ["--admin", ":0", "--admin-tls-cert", str(folder / "none.crt"),
                                   "--admin-tls-key", str(key)], "none.crt")):
            run = subprocess.run([tool, "-p", "0", *args], capture_output=True, text=True,
                                 timeout=20)
            if run.returncode != 2 or why not in run.stderr:
                raise AssertionError(f"{Path(tool).name} {args}: exit {run.returncode}, "
                                     f"{run.stderr!r} (expected exit 2 saying {why!r})")
    print("tern-echo and tern-rpc-server admin endpoint over TLS with a token: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
