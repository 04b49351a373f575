#!/usr/bin/env python3
"""An HTTPS client of tern's admin endpoint built on Python's http.client and ssl modules.

  admin_https_client.py PORT CA_FILE PATH [--token TOKEN] [--cert CRT --key KEY]

Connects to 127.0.0.1:PORT over TLS, verifying the server's certificate against CA_FILE and its
name against 127.0.0.1, sends GET PATH (with "Authorization: Bearer TOKEN" when given; with the
client certificate when given) and prints one line of JSON: {"status", "www_authenticate",
"body"}, or {"error"} with the reason when the connection or the handshake fails.
"""

import argparse
import http.client
import json
import ssl
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("ca_file")
    parser.add_argument("path")
    parser.add_argument("--token")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    context = ssl.create_default_context(cafile=args.ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if args.cert:
        context.load_cert_chain(args.cert, args.key)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    connection = http.client.HTTPSConnection("127.0.0.1", args.port, context=context, timeout=20)
    try:
        connection.request("GET", args.path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode("utf-8", "replace")
        print(json.dumps({"status": response.status,
                          "www_authenticate": response.getheader("WWW-Authenticate", ""),
                          "body": body}))
    except (OSError, ssl.SSLError, http.client.HTTPException) as error:
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
    finally:
        connection.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
