#!/usr/bin/env bash
# tern's I/O benchmarks, in one run on this machine (`make bench` runs it after the micro
# benchmarks):
#   ttcp      SEEDS 002: stop-and-wait, blocking threads vs tern fibers (epoll and io_uring)
#   pingpong  SEEDS 003: 16 KiB blocks, 1/10/100 sessions, server threads 1 and 2, against
#             tern-echo --io epoll, tern-echo --io uring and asio_echo, one tern client for all
# Results: bench/results/io-<UTC stamp>.json and .md (the markdown table is printed too).
#
#   bash bench/suite/io.sh [BUILD_DIR]        (default build/release)
#
# Environment: IO_SECONDS (per pingpong cell, default 5), IO_ROUNDS (the whole pingpong matrix
# this many times, cells report the median; default 1), IO_BLOCK (default 16384), IO_SESSIONS
# (default "1 10 100"), IO_THREADS (default "1 2"), IO_CLIENT_IO (the client's backend, default
# epoll), IO_TTCP_MESSAGES (default 81920), IO_TTCP_REPEAT (default 3), IO_SKIP_TTCP=1,
# IO_SKIP_PINGPONG=1, IO_QUIET_WAIT (before each cell, wait at most this many seconds, default
# 30, for the machine to be >= 90% idle: these numbers mean nothing next to a compiler; each
# cell also reports how much CPU other processes took while it ran). Servers listen on
# 127.0.0.1 port 0 (the kernel picks a free one) and are stopped at the end of each cell.
set -euo pipefail

if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 0
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:-$repo/build/release}" && pwd)
seconds=${IO_SECONDS:-5}
rounds=${IO_ROUNDS:-1}
block=${IO_BLOCK:-16384}
sessions_list=${IO_SESSIONS:-"1 10 100"}
threads_list=${IO_THREADS:-"1 2"}
client_io=${IO_CLIENT_IO:-epoll}
ttcp_messages=${IO_TTCP_MESSAGES:-81920}
ttcp_repeat=${IO_TTCP_REPEAT:-3}
quiet_wait=${IO_QUIET_WAIT:-30}

tern_echo="$build/tools/tern-echo"
asio_echo="$build/bench/asio_echo"
client="$build/bench/pingpong_client"
report="$repo/bench/suite/io_report.py"
ttcp="$build/bench/ttcp"
for program in "$tern_echo" "$asio_echo" "$client" "$ttcp"; do
  if [[ ! -x "$program" ]]; then
    echo "io.sh: $program is missing; configure with -DTERN_BUILD_BENCH=ON and build" >&2
    exit 1
  fi
done

results="$repo/bench/results"
mkdir -p "$results"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The CPUs this process may use, as a list.
read -r -a cpus <<<"$(python3 -c 'import os; print(*sorted(os.sched_getaffinity(0)))')"

# Where a server with $1 threads and its client run: sets server_cpus, client_cpus (empty: not
# pinned) and placement (a sentence for the report).
place() {
  local threads=$1
  server_cpus=""
  client_cpus=""
  if ((${#cpus[@]} >= 2 * threads)); then
    server_cpus=$(IFS=,; echo "${cpus[*]:0:threads}")
    client_cpus=$(IFS=,; echo "${cpus[*]:threads:threads}")
    placement="server pinned to CPU ${server_cpus}, client to CPU ${client_cpus} (taskset)"
  else
    placement="not pinned: server and client threads share all ${#cpus[@]} CPUs"
  fi
}

# Starts server $1 (tern-epoll, tern-uring or asio) with $2 threads; sets server_pid and port.
start_server() {
  local name=$1 threads=$2
  local -a command
  case "$name" in
    tern-epoll) command=("$tern_echo" --io epoll --threads "$threads" --buf "$block") ;;
    tern-uring) command=("$tern_echo" --io uring --threads "$threads" --buf "$block") ;;
    asio) command=("$asio_echo" --threads "$threads" --block "$block") ;;
  esac
  command+=(--host 127.0.0.1 --port 0)
  if [[ -n "$server_cpus" ]]; then command=(taskset -c "$server_cpus" "${command[@]}"); fi
  : >"$work/server.out"
  "${command[@]}" >"$work/server.out" 2>&1 &
  server_pid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/server.out" | head -n 1)
    [[ -n "$port" ]] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "io.sh: $name did not start:" >&2
  cat "$work/server.out" >&2
  return 1
}

stop_server() {
  kill -TERM "$server_pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

# Machine facts.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
build_type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
asio_version=$(dpkg-query -W -f='${Version}' libasio-dev 2>/dev/null || echo unknown)
cat >"$work/machine.json" <<EOF
{"stamp": "$stamp", "cpu": "$cpu_model", "cpus_usable": ${#cpus[@]},
 "kernel": "$(uname -sr) $(uname -m)",
 "compiler": "$("${cxx:-c++}" --version | head -n 1) ($build_type)",
 "asio": "libasio-dev $asio_version", "load_before": "$(cut -d ' ' -f 1-3 /proc/loadavg)",
 "pingpong_seconds": $seconds, "pingpong_rounds": $rounds, "block": $block,
 "client_io": "$client_io"}
EOF
echo "== tern I/O benchmarks: $stamp on $cpu_model, ${#cpus[@]} CPUs, $(uname -r)"

failed=0
if [[ "${IO_SKIP_TTCP:-0}" != 1 ]]; then
  echo "== ttcp: $ttcp_messages messages, $ttcp_repeat runs per variant" \
    "[$(python3 "$report" --wait-quiet "$quiet_wait")]"
  if ! "$ttcp" --messages "$ttcp_messages" --repeat "$ttcp_repeat" --json "$work/ttcp.json"; then
    failed=1
  fi
fi

: >"$work/pingpong.jsonl"
if [[ "${IO_SKIP_PINGPONG:-0}" != 1 ]]; then
  echo "== pingpong: block $block, ${seconds} s per cell, $rounds round(s), client --io $client_io"
  for round in $(seq 1 "$rounds"); do
    for threads in $threads_list; do
      place "$threads"
      echo "-- server threads $threads, client threads $threads: $placement"
      for sessions in $sessions_list; do
        for server in tern-epoll tern-uring asio; do
          quiet=$(python3 "$report" --wait-quiet "$quiet_wait")
          start_server "$server" "$threads"
          stat_before=$(python3 "$report" --proc-stat)
          command=("$client" 127.0.0.1 "$port" "$threads" "$block" "$sessions" "$seconds"
                   --io "$client_io" --json)
          if [[ -n "$client_cpus" ]]; then command=(taskset -c "$client_cpus" "${command[@]}"); fi
          status=0
          line=$("${command[@]}") || status=$?
          stat_after=$(python3 "$report" --proc-stat)
          server_cpu=$(awk -v tick="$(getconf CLK_TCK)" '{print ($14 + $15) / tick}' \
            "/proc/$server_pid/stat" 2>/dev/null || echo 0)
          stop_server
          if [[ -z "$line" ]]; then
            line="{\"verified\": false, \"error\": \"client exited with status $status\"}"
          fi
          [[ $status -eq 0 ]] || failed=1
          echo "{\"server\": \"$server\", \"server_threads\": $threads, \"round\": $round," \
            "\"sessions\": $sessions, \"placement\": \"$placement\", \"before\": \"$quiet\"," \
            "\"stat_before\": $stat_before, \"stat_after\": $stat_after," \
            "\"server_cpu_s\": $server_cpu, \"cpus\": ${#cpus[@]}, \"client\": $line}" \
            >>"$work/pingpong.jsonl"
          printf '   %-10s sessions %3s: %s [%s]\n' "$server" "$sessions" \
            "$(python3 "$report" --cell "$line")" "$quiet"
        done
      done
    done
  done
fi

python3 "$report" --machine "$work/machine.json" \
  --ttcp "$work/ttcp.json" --pingpong "$work/pingpong.jsonl" \
  --json "$results/io-$stamp.json" --markdown "$results/io-$stamp.md"
echo "(results saved as $results/io-$stamp.json and .md)"
if [[ $failed -ne 0 ]]; then
  echo "io.sh: a run failed its verification (see above)" >&2
  exit 1
fi
