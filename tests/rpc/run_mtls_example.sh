#!/usr/bin/env bash
# Runs examples/rpc's mtls_server ($1) with certificates made here with the openssl command line:
# a CA, the server (localhost), a writer (writer.kv.example) and a reader (reader.kv.example).
# The example serves, calls itself as both clients and exits 0 when the writer may Put and Get
# and the reader may only Get.
set -euo pipefail
binary=$1
dir=$(mktemp -d /tmp/tern-mtls-example-XXXXXX)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 2 -subj "/CN=kv test CA" 2>/dev/null
leaf() {  # name subject san
  openssl req -new "${ec[@]}" -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
  echo "subjectAltName=$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
leaf server /CN=localhost DNS:localhost
leaf writer /CN=writer DNS:writer.kv.example
leaf reader /CN=reader DNS:reader.kv.example
output=$(timeout 60 "$binary" ca.crt server.crt server.key writer.crt writer.key reader.crt \
  reader.key 2>&1) || { echo "mtls_server failed:"; echo "$output"; exit 1; } >&2
echo "$output"
grep -q "writer.crt: Put ok, Get ok" <<<"$output"
grep -q "reader.crt: Put permission_denied: CN=reader may only call Get, Get ok" <<<"$output"
