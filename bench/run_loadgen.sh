#!/usr/bin/env bash
# Builds and runs the load generator (proxy with state, proxy without state,
# direct to the mock engine; 100K and 1M character contexts). The proxies are
# the toktier binary of the same build dir, spawned as child processes.
# Usage: bench/run_loadgen.sh [BUILD_DIR] [loadgen options...]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build/release}"
shift || true
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
ninja -C "$build" -j2 toktier toktier_loadgen
exec "$build/tests/proxy/toktier_loadgen" "$@"
