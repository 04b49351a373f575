#!/usr/bin/env bash
# Creates (or refreshes) the benchmark report's plotting virtualenv from the pinned versions in
# bench/suite/requirements.txt, with Debian's python3 (python3-venv, from scripts/setup).
#
#   bash bench/suite/venv.sh [VENV_DIR]        (default build/bench-venv)
#
# On failure (no network, say) it prints one line and exits 0: the report is written without
# plots and says so.
set -uo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv=${1:-$repo/build/bench-venv}
requirements="$repo/bench/suite/requirements.txt"
stamp="$venv/.requirements"

if [[ -x "$venv/bin/python" ]] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi
echo "venv: installing the plotting packages into $venv"
if ! /usr/bin/python3 -m venv "$venv" >/dev/null 2>&1; then
  echo "venv: skip plots: /usr/bin/python3 -m venv failed (install python3-venv: bash scripts/setup)"
  exit 0
fi
if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    -r "$requirements"; then
  echo "venv: skip plots: pip could not install bench/suite/requirements.txt"
  rm -rf "$venv"
  exit 0
fi
cp "$requirements" "$stamp"
