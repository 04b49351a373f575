#!/usr/bin/env bash
# Builds the Go and Rust peers (go_echo, tokio_echo) into BUILD_DIR/peers/ and writes
# BUILD_DIR/peers/versions.json: for every peer its name, whether it was built, the toolchain
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
tokio_version="$(awk '/^name = "tokio"$/ { getline; gsub(/version = |"/, ""); print; exit }' \
  "$lock" 2>/dev/null)"
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
