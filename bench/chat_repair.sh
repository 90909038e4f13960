#!/usr/bin/env bash
# Issue 11's chat repair figures (docs/benchmarks.md): builds a long
# conversation from the shared workloads (chatml renderings parsed back into
# messages, sessions chained) and runs bench/chat_repair.mjs on it.
#   bench/chat_repair.sh [OUT] [--contexts 100000,1000000] [--turns 30]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TOKTIER_BUILD_DIR:-$ROOT/build/release}"
OUT="${1:-$ROOT/docs/bench/chat_repair.jsonl}"
shift || true
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node "$ROOT/bench/workload_conversation.mjs" "$ROOT/../shared/workloads/mini-swe-agent/chatml" "$work/conversation.json"
mkdir -p "$(dirname "$OUT")"
node "$ROOT/bench/chat_repair.mjs" --toktier "$BUILD/cli/toktier" --conversation "$work/conversation.json" "$@" \
  | tee "$OUT"
