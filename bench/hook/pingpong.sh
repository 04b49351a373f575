#!/usr/bin/env bash
# Whether linking tern::hook costs tern's own sockets anything: tern-bench pingpong against
# tern-echo and tern-echo-hooked (the same server with tern::hook linked), one after the other,
# under each I/O backend.
#
#   bash bench/hook/pingpong.sh BUILD_DIR
#
# Environment: DURATION (seconds per run, default 5), SESSIONS (default 10), ROUNDS (default 3:
# the servers alternate this many times, so that a change in the machine's load hits both).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: bash bench/hook/pingpong.sh BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
bench=$build/tools/tern-bench/tern-bench
[[ -x "$bench" ]] || bench=$build/tools/tern-bench
duration=${DURATION:-5}
sessions=${SESSIONS:-10}
rounds=${ROUNDS:-3}

run() {  # server binary, backend
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$1" --port "$port" --io "$2" --threads 1 --mode echo >/dev/null &
  local server=$!
  for _ in $(seq 100); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port)).close()" 2>/dev/null; then break; fi
    sleep 0.05
  done
  "$bench" pingpong "127.0.0.1:$port" --threads 1 --sessions "$sessions" --duration "$duration" \
    --io "$2" --quiet | grep -E 'MB/s|trip time' | sed "s|^|$(basename "$1") $2: |"
  kill "$server"
  wait "$server" 2>/dev/null || true
}

for backend in epoll uring; do
  for _ in $(seq "$rounds"); do
    run "$build/tools/tern-echo" "$backend"
    run "$build/bench/hook/tern-echo-hooked" "$backend"
  done
done
