#!/usr/bin/env python3
"""Checks that ignoring the result of a fallible tern call does not compile under -Werror.

Every function of the public headers that returns tern::Result or rpc::Result is [[nodiscard]], and
so are rpc::Channel's call, notify and call_async and the generated client methods: a program that drops `server.start(...)` or `stream.write_all(...)` on
the floor gets a warning (an error with -Werror) instead of a silent failure. Each case below is a
statement that ignores one such result; all are compiled in one unit, one per line, and each line
must get a diagnostic naming the attribute. The control
case uses every result and must compile, so a broken include path cannot pass for a refusal.

  check_nodiscard.py --include DIR [--include DIR]... --compiler CXX [--flag F]...
"""

import argparse
import concurrent.futures
import re
import subprocess
import sys
import tempfile

PRELUDE = """
#include <tern/fiber/channel.h>
#include <tern/fiber/fiber.h>
#include <tern/fiber/mutex.h>
#include <tern/fiber/condition_variable.h>
#include <tern/net/tcp_server.h>
#include <tern/net/tcp_stream.h>
#include <tern/rpc/channel.h>
#include <tern/rpc/server.h>
void statement(tern::net::TcpServer& server, tern::net::TcpStream& stream,
               tern::Channel<int>& queue, tern::rpc::Server& rpc_server,
               tern::rpc::Channel& rpc, tern::rpc::ClientContext& context,
               const google::protobuf::MessageLite& request, google::protobuf::MessageLite& reply,
               std::span<const std::byte> bytes) {
  (void)server; (void)stream; (void)queue; (void)rpc_server; (void)rpc; (void)context;
  (void)request; (void)reply; (void)bytes;
"""

IGNORED = {
    "TcpServer::start": 'server.start(tern::net::Address::ipv4("127.0.0.1", 0).value());',
    "Address::parse": 'tern::net::Address::parse("127.0.0.1:80");',
    "TcpStream::connect": 'tern::net::TcpStream::connect("127.0.0.1:80");',
    "TcpStream::write_all": "stream.write_all(bytes);",
    "TcpStream::shutdown": "stream.shutdown();",
    "Channel::send": "queue.send(1);",
    "Channel::recv": "queue.recv();",
    "this_fiber::sleep_for": "tern::this_fiber::sleep_for(std::chrono::milliseconds(1));",
    "rpc::Server::start": 'rpc_server.start(tern::net::Address::ipv4("127.0.0.1", 0).value());',
    "rpc::Channel::open": 'tern::rpc::Channel::open("127.0.0.1:80");',
    "rpc::Channel::call": 'rpc.call(context, "S", "M", request, reply);',
    "rpc::Channel::notify": 'rpc.notify(context, "S", "M", request);',
}

USED = """
  auto a = server.start(tern::net::Address::ipv4("127.0.0.1", 0).value());
  auto b = tern::net::Address::parse("127.0.0.1:80");
  auto c = tern::net::TcpStream::connect("127.0.0.1:80");
  auto d = stream.write_all(bytes);
  auto e = stream.shutdown();
  auto f = queue.send(1);
  auto g = queue.recv();
  auto h = tern::this_fiber::sleep_for(std::chrono::milliseconds(1));
  auto i = rpc_server.start(tern::net::Address::ipv4("127.0.0.1", 0).value());
  auto j = tern::rpc::Channel::open("127.0.0.1:80");
  auto k = rpc.call(context, "S", "M", request, reply);
  auto l = rpc.notify(context, "S", "M", request);
  (void)a; (void)b; (void)c; (void)d; (void)e; (void)f; (void)g; (void)h; (void)i; (void)j;
  (void)k; (void)l;
"""


def compile_unit(command, body):
    """Compiles PRELUDE + body + "}" with -fsyntax-only; returns (status, diagnostics, first line
    of body in the unit)."""
    with tempfile.NamedTemporaryFile("w", suffix=".cc") as source:
        source.write(PRELUDE + body + "\n}\n")
        source.flush()
        done = subprocess.run(command + ["-fsyntax-only", source.name], capture_output=True,
                              text=True)
        return done.returncode, done.stderr, PRELUDE.count("\n") + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--include", action="append", required=True,
                        help="an include directory with tern's public headers (repeatable)")
    parser.add_argument("--compiler", required=True, help="the C++ compiler")
    parser.add_argument("--flag", action="append", default=[], help="an extra compiler flag")
    args = parser.parse_args()
    command = [args.compiler, "-std=c++23", "-Wall", "-Wextra", "-Werror"] + args.flag
    command += [f"-I{d}" for d in args.include]

    # One unit ignores every result, one statement per line: the compiler reports each line.
    names = list(IGNORED)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        control = pool.submit(compile_unit, command, USED)
        ignored = pool.submit(compile_unit, command, "\n".join(IGNORED[n] for n in names))
        status, diagnostics, _ = control.result()
        if status != 0:
            failures.append(f"the control case (every result used) does not compile:\n{diagnostics}")
        status, diagnostics, first = ignored.result()
    refused = set()
    for m in re.finditer(r"^\S+?:(\d+):\d+: error: .*(nodiscard|unused-result)", diagnostics, re.M):
        refused.add(int(m.group(1)) - first)
    other = [line for line in diagnostics.splitlines()
             if ": error: " in line and "nodiscard" not in line and "unused-result" not in line]
    if other:
        failures.append("the unit that ignores results has other errors:\n" + "\n".join(other))
    for index, name in enumerate(names):
        if index not in refused:
            failures.append(f"ignoring the result of {name} compiles without a warning")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    print(f"{len(refused)} of {len(names)} ignored results refused")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
