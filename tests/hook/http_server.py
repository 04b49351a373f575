"""A loopback HTTP server for tern::hook's libcurl test.

GET /<name> answers with a body made from <name> (body_for), so the client can check every byte.
Listens on 127.0.0.1 with a port the kernel picks and prints "ready <port>" once it accepts.
"""
import http.server
import sys


def body_for(name: str) -> bytes:
    return ("tern-hook " + name + "\n").encode() * 2000


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = body_for(self.path.lstrip("/"))
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True


def main() -> None:
    server = Server(("127.0.0.1", 0), Handler)
    print("ready", server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
