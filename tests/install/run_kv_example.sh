#!/usr/bin/env bash
# Runs examples/rpc's kv_server and kv_client, built in $1, against each other on 127.0.0.1: the
# server listens on port 0 and prints the address it bound; the client, given that address and
# the server's token, must print the expected answers and exit with 0; one with a wrong token
# must be refused (unauthenticated); SIGTERM then stops the server, which must exit with 0.
set -euo pipefail
bin=$1

coproc server { exec "$bin/kv_server" --listen 127.0.0.1:0 --token s3cret 2>&1; }
server_pid=$server_PID
# The server's output, on a descriptor of our own: bash closes the coprocess's when it exits.
exec {server_out}<&"${server[0]}"
# A server that hangs is killed after 60 s: the test fails then, it does not hang.
( sleep 60 && kill -KILL "$server_pid" ) >/dev/null 2>&1 &
watchdog=$!
trap 'kill "$watchdog" 2>/dev/null; kill -KILL "$server_pid" 2>/dev/null || true' EXIT

line=
read -r -t 30 line <&"$server_out" || true
if [[ ! $line =~ ^kv_server:\ serving\ on\ (127\.0\.0\.1:[0-9]+)$ ]]; then
  echo "kv_server did not say where it serves; it said: '$line'" >&2
  exit 1
fi
address=${BASH_REMATCH[1]}

expected="put greeting = hello
put greeting = hello again (replaced)
get greeting = hello again
get missing: not_found: no value for 'missing'
put 3 colours concurrently
list colour/: colour/blue=blue colour/green=green colour/red=red
scan colour/: colour/blue=blue colour/green=green colour/red=red
delete greeting: existed
get greeting: not_found: no value for 'greeting'
kv_client: every answer as expected"
status=0
output=$(timeout 30 "$bin/kv_client" "$address" s3cret 2>&1) || status=$?
if [[ $status -ne 0 || $output != "$expected" ]]; then
  echo "kv_client $address exited with $status and printed:" >&2
  echo "$output" >&2
  echo "instead of:" >&2
  echo "$expected" >&2
  exit 1
fi
echo "$output"

status=0
refused=$(timeout 30 "$bin/kv_client" "$address" wrong 2>&1) || status=$?
if [[ $status -eq 0 || $refused != *"unauthenticated: no valid token"* ]]; then
  echo "kv_client with a wrong token exited with $status and printed:" >&2
  echo "$refused" >&2
  exit 1
fi
echo "a wrong token: ${refused%%$'\n'*}"

kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
last=
read -r -t 5 last <&"$server_out" || true
if [[ $status -ne 0 || $last != "kv_server: stopped ("* ]]; then
  echo "kv_server exited with $status after SIGTERM; it said: '$last'" >&2
  exit 1
fi
echo "$last"
