#!/usr/bin/env bash
# Builds the Go and Rust peers (go_echo, tokio_echo with tokio-rustls) into BUILD_DIR/peers/ and
# writes BUILD_DIR/peers/versions.json: for every peer its name, whether it was built, the toolchain
# and library versions, and why it was skipped. The C/C++ peers (asio_echo, otechod, mtserver,
# switch_peers) are CMake targets of the same build dir (TERN_BUILD_BENCH=ON); this script only
# records their versions.
#
#   bench/peers/build.sh [BUILD_DIR]   (a relative BUILD_DIR is taken from the current directory;
#                                       default: build/release in the repository)
#
# A missing toolchain or a failed build prints one line `peers: skip NAME: REASON` and the
# script goes on; it exits 0 unless it cannot write its output. Incremental: Go's build cache
# and cargo's target dir (BUILD_DIR/peers/cargo-target) make a second run fast. Both builds
# are offline-safe once fetched: go_echo has no module dependencies, and tokio_echo builds
# with --locked from the committed Cargo.lock.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${1:-$repo/build/release}"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
out="$build/peers"
mkdir -p "$out" || { echo "peers: cannot create $out" >&2; exit 1; }
logs="$out/logs"
mkdir -p "$logs"

# Results, one tab-separated line per peer: name, built (true/false), toolchain, library, skip
# reason.
results=()
record() { results+=("$1"$'\t'"$2"$'\t'"$3"$'\t'"$4"$'\t'"$5"); }
skip() {  # name, reason, toolchain, library
  echo "peers: skip $1: $2"
  rm -f "$out/$1"  # a binary left by an earlier run would not match this report
  record "$1" false "$3" "$4" "$2"
}
# The last line of a log that says something, for a skip reason.
last_error() { grep -v '^[[:space:]]*$' "$1" | tail -n 1 | cut -c1-200; }

# ---- go_echo ----
if ! command -v go >/dev/null 2>&1; then
  skip go_echo "no go on PATH" "" ""
else
  go_version="$(go version 2>/dev/null)"
  if (cd "$here/go_echo" &&
      GOTOOLCHAIN=local GOFLAGS=-mod=mod go build -trimpath -o "$out/go_echo" .) \
      >"$logs/go_echo.log" 2>&1; then
    record go_echo true "$go_version" "" ""
    echo "peers: built go_echo ($go_version)"
  else
    skip go_echo "go build failed: $(last_error "$logs/go_echo.log") (log: $logs/go_echo.log)" \
      "$go_version" ""
  fi
fi

# ---- tokio_echo ----
lock="$here/tokio_echo/Cargo.lock"
# The version of crate $1 that Cargo.lock pins.
locked_version() {
  awk -v crate="$1" \
    '$0 == "name = \"" crate "\"" { getline; gsub(/version = |"/, ""); print; exit }' \
    "$lock" 2>/dev/null
}
# tokio, and the TLS stack of --tls-cert (rustls on ring).
tokio_version="$(locked_version tokio), rustls $(locked_version rustls)"
tokio_version+=" (ring $(locked_version ring))"
if ! command -v cargo >/dev/null 2>&1; then
  skip tokio_echo "no cargo on PATH" "" "tokio $tokio_version"
else
  rust_version="$(rustc --version 2>/dev/null || cargo --version 2>/dev/null)"
  if (cd "$here/tokio_echo" &&
      CARGO_TARGET_DIR="$out/cargo-target" cargo build --release --locked --quiet) \
      >"$logs/tokio_echo.log" 2>&1 &&
      cp -f "$out/cargo-target/release/tokio_echo" "$out/tokio_echo.tmp" &&
      mv -f "$out/tokio_echo.tmp" "$out/tokio_echo"; then
    record tokio_echo true "$rust_version" "tokio $tokio_version" ""
    echo "peers: built tokio_echo ($rust_version, tokio $tokio_version)"
  else
    skip tokio_echo \
      "cargo build failed: $(last_error "$logs/tokio_echo.log") (log: $logs/tokio_echo.log)" \
      "$rust_version" "tokio $tokio_version"
  fi
fi

# ---- the CMake-built peers: versions only ----
# The compilers the build dir was configured with (CMakeCache.txt), else the default ones.
compiler_version() {  # cache variable, fallback command
  local compiler
  compiler="$(sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" 2>/dev/null | head -n 1)"
  "${compiler:-$2}" --version 2>/dev/null | head -n 1
}
cxx="$(compiler_version CMAKE_CXX_COMPILER c++)"
cc="$(compiler_version CMAKE_C_COMPILER cc)"
asio="$(awk '/define ASIO_VERSION / { v = $3; printf "asio %d.%d.%d", v / 100000, v / 100 % 1000, v % 100 }' \
  /usr/include/asio/version.hpp 2>/dev/null)"
boost="$(awk '/define BOOST_LIB_VERSION/ { gsub(/"/, "", $3); sub(/_/, ".", $3); print "boost " $3 }' \
  /usr/include/boost/version.hpp 2>/dev/null)"
glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null)"
for peer in asio_echo otechod mtserver switch_peers; do
  case "$peer" in
    asio_echo) toolchain="$cxx" library="${asio:-asio not found}" ;;
    otechod) toolchain="$cc" library="$glibc" ;;
    mtserver) toolchain="$cxx" library="$glibc" ;;
    switch_peers) toolchain="$cxx" library="${boost:-boost not found}, $glibc" ;;
  esac
  if [[ -x "$build/bench/$peer" ]]; then
    record "$peer" true "$toolchain" "$library" ""
  else
    record "$peer" false "$toolchain" "$library" \
      "not built: configure $build with -DTERN_BUILD_BENCH=ON and build target $peer"
  fi
done

# ---- the gRPC C++ peers of report 001 (CMake targets grpc_rpc_server, grpc_rpc_client) ----
# One server binary with two APIs, so two peer names; both need the server and the client.
grpc_debian="$(dpkg-query -W -f '${Version}' libgrpc++-dev 2>/dev/null)"
grpc_upstream="$(pkg-config --modversion grpc++ 2>/dev/null)"
protobuf_cpp="$(pkg-config --modversion protobuf 2>/dev/null)"
grpc_library="gRPC ${grpc_upstream:-not found}${grpc_debian:+ (Debian libgrpc++-dev $grpc_debian)}, protobuf ${protobuf_cpp:-not found}"
for peer in grpc-sync grpc-callback; do
  if [[ -x "$build/bench/grpc_rpc_server" && -x "$build/bench/grpc_rpc_client" ]]; then
    record "$peer" true "$cxx" "$grpc_library" ""
  else
    record "$peer" false "$cxx" "$grpc_library" \
      "not built: needs gRPC (bash scripts/setup --bench); configure $build with -DTERN_BUILD_BENCH=ON and build grpc_rpc_server grpc_rpc_client"
  fi
done
# The streaming table's gRPC client (CMake target grpc_stream_client), against the same server.
if [[ -x "$build/bench/grpc_rpc_server" && -x "$build/bench/grpc_stream_client" ]]; then
  record grpc-stream true "$cxx" "$grpc_library" ""
else
  record grpc-stream false "$cxx" "$grpc_library" \
    "not built: needs gRPC (bash scripts/setup --bench); configure $build with -DTERN_BUILD_BENCH=ON and build grpc_rpc_server grpc_stream_client"
fi

# ---- the Go RPC peers of report 001: rpcx and erpc ----
# rpcx_rpc and erpc_rpc (each its own module) share go_rpc_common (module tern.bench), whose
# package benchpb is generated from bench/proto by protoc and the protoc-gen-go of
# go_rpc_common/go.mod's google.golang.org/protobuf. The three are copied to
# $out/go-rpc-src/ and generated and built there, so the source tree stays clean; the builds are
# -mod=readonly, so the committed go.mod/go.sum pins are what is built. Binaries:
# $out/rpcx_rpc_server, rpcx_rpc_client, erpc_rpc_server, erpc_rpc_client.
go_rpc_src="$out/go-rpc-src"
module_version() {  # go.mod, module path
  awk -v path="$2" '$1 == path { print $2; exit } $1 == "require" && $2 == path { print $3; exit }' \
    "$1" 2>/dev/null
}
protobuf_go="$(module_version "$here/go_rpc_common/go.mod" google.golang.org/protobuf)"
rpcx_library="rpcx $(module_version "$here/rpcx_rpc/go.mod" github.com/smallnest/rpcx), google.golang.org/protobuf $protobuf_go"
erpc_library="erpc $(module_version "$here/erpc_rpc/go.mod" github.com/henrylee2cn/erpc/v6) (quic-go replaced: TCP only), google.golang.org/protobuf $protobuf_go"
rm -f "$out"/rpcx_rpc_server "$out"/rpcx_rpc_client "$out"/erpc_rpc_server "$out"/erpc_rpc_client
if ! command -v go >/dev/null 2>&1; then
  skip rpcx "no go on PATH" "" "$rpcx_library"
  skip erpc "no go on PATH" "" "$erpc_library"
elif ! command -v protoc >/dev/null 2>&1; then
  skip rpcx "no protoc on PATH (protobuf-compiler)" "$(go version 2>/dev/null)" "$rpcx_library"
  skip erpc "no protoc on PATH (protobuf-compiler)" "$(go version 2>/dev/null)" "$erpc_library"
else
  go_version="$(go version 2>/dev/null)"
  protoc_version="$(protoc --version 2>/dev/null)"
  if (rm -rf "$go_rpc_src" && mkdir -p "$go_rpc_src" &&
      cp -R "$here/go_rpc_common" "$here/rpcx_rpc" "$here/erpc_rpc" "$go_rpc_src/" &&
      cd "$go_rpc_src/go_rpc_common" &&
      GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -o "$go_rpc_src/bin/protoc-gen-go" \
        google.golang.org/protobuf/cmd/protoc-gen-go &&
      protoc --plugin=protoc-gen-go="$go_rpc_src/bin/protoc-gen-go" --proto_path="$repo/bench/proto" \
        --go_out=. --go_opt=module=tern.bench benchmark_message.proto) \
      >"$logs/go_rpc_protoc.log" 2>&1; then
    for peer in rpcx erpc; do
      dir="${peer}_rpc"
      library_var="${peer}_library"
      if (cd "$go_rpc_src/$dir" &&
          GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -o "$out/${dir}_server" ./server &&
          GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath -o "$out/${dir}_client" ./client) \
          >"$logs/$dir.log" 2>&1; then
        record "$peer" true "$go_version" "${!library_var}, $protoc_version" ""
        echo "peers: built ${dir}_server, ${dir}_client ($go_version, ${!library_var})"
      else
        rm -f "$out/${dir}_server" "$out/${dir}_client"
        skip "$peer" "go build failed: $(last_error "$logs/$dir.log") (log: $logs/$dir.log)" \
          "$go_version" "${!library_var}"
      fi
    done
  else
    reason="benchpb generation failed: $(last_error "$logs/go_rpc_protoc.log") (log: $logs/go_rpc_protoc.log)"
    skip rpcx "$reason" "$go_version" "$rpcx_library"
    skip erpc "$reason" "$go_version" "$erpc_library"
  fi
fi

# ---- versions.json ----
printf '%s\n' "${results[@]}" | python3 -c '
import json, sys
peers = []
for line in sys.stdin.read().splitlines():
    name, built, toolchain, library, reason = (line.split("\t") + [""] * 4)[:5]
    peers.append({"name": name, "built": built == "true", "toolchain": toolchain or None,
                  "library": library or None, "skip_reason": reason or None})
print(json.dumps({"peers": peers}, indent=2))
' >"$out/versions.json.tmp" && mv -f "$out/versions.json.tmp" "$out/versions.json" ||
  { echo "peers: cannot write $out/versions.json" >&2; exit 1; }
echo "peers: wrote $out/versions.json"
exit 0
