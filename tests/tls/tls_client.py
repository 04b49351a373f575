#!/usr/bin/env python3
"""A TLS client built on Python's ssl module, for tern's TLS tests.

  tls_client.py HOST PORT CA_FILE SERVER_NAME [MESSAGES]

Connects with certificate and host name verification, sends MESSAGES (default 20) lines of
growing size, checks that each comes back unchanged (an echo server), closes with close_notify
and prints "ok <protocol version> <cipher>". Exits 1 with the reason on any failure.
"""

import socket
import ssl
import sys


def main():
    host, port, ca_file, server_name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    messages = int(sys.argv[5]) if len(sys.argv) > 5 else 20
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        with socket.create_connection((host, port), timeout=20) as raw:
            with context.wrap_socket(raw, server_hostname=server_name) as tls:
                for i in range(messages):
                    line = (f"{i}:" + "x" * (i * 997)).encode() + b"\n"
                    tls.sendall(line)
                    back = b""
                    while len(back) < len(line):
                        chunk = tls.recv(len(line) - len(back))
                        if not chunk:
                            raise RuntimeError(f"echo ended after {len(back)} bytes of message {i}")
                        back += chunk
                    if back != line:
                        raise RuntimeError(f"message {i} came back changed")
                version, cipher = tls.version(), tls.cipher()[0]
                tls.unwrap()  # close_notify both ways
    except (OSError, ssl.SSLError, RuntimeError) as error:
        print(f"failed: {error}")
        return 1
    print(f"ok {version} {cipher}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
