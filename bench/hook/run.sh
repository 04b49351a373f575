#!/usr/bin/env bash
# The hooks benchmark: against one redis-server started here on a free loopback port, for each
# client count, redis-benchmark (hiredis's async API on its own event loop), redis_bench with
# tern fibers through tern::hook, and redis_bench with a thread per connection. SET and GET of
# 64-byte values, no pipelining, the same number of requests of each kind for every client.
#
#   bash bench/hook/run.sh BUILD_DIR
#
# Environment: REQUESTS (SETs, and as many GETs; default 100000), CLIENTS (default "50 500"),
# WORKERS (tern workers; default: one per CPU).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: bash bench/hook/run.sh BUILD_DIR" >&2
  exit 2
fi
bench=$(cd "$1" && pwd)/bench/hook/redis_bench
if [[ ! -x "$bench" ]]; then
  echo "run.sh: $bench is missing; configure with -DTERN_BUILD_BENCH=ON (hiredis installed)" >&2
  exit 1
fi
requests=${REQUESTS:-100000}
clients=${CLIENTS:-"50 500"}
workers=()
if [[ -n "${WORKERS:-}" ]]; then workers=(--workers "$WORKERS"); fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --maxclients 10000 \
  --loglevel warning >"$log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do
  if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then break; fi
  sleep 0.1
done
redis-cli -p "$port" ping | grep -q PONG || { cat "$log" >&2; exit 1; }

echo "redis-server $(redis-server --version | grep -o 'v=[^ ]*') on 127.0.0.1:$port, $requests SET + $requests GET per run"
for c in $clients; do
  echo "== clients=$c"
  redis-benchmark -p "$port" -c "$c" -n "$requests" -t set,get -d 64 -q 2>&1 | tr '\r' '\n' \
    | grep -E '^(SET|GET):.*requests per second' | sed 's/^/redis-benchmark /'
  "$bench" --port "$port" --clients "$c" --requests $((2 * requests)) "${workers[@]}"
  "$bench" --port "$port" --clients "$c" --requests $((2 * requests)) --threads
done
