#!/usr/bin/env bash
# Issue 37's figures (docs/benchmarks.md "Agent turns"): the time toktier
# adds to a chat, Messages or Responses turn at 100K and 1M characters,
# direct vs stateless vs stateful, in the completions and sglang modes.
#   bench/agent_turn.sh [OUT] [--contexts 100000,1000000] [--turns 20] [--apis ...] [--modes ...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TOKTIER_BUILD_DIR:-$ROOT/build/release}"
OUT="${1:-$ROOT/docs/bench/agent_turn.jsonl}"
shift || true
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
node "$ROOT/bench/workload_conversation.mjs" "$ROOT/../shared/workloads/mini-swe-agent/chatml" "$work/conversation.json"
mkdir -p "$(dirname "$OUT")"
node "$ROOT/bench/agent_turn.mjs" --toktier "$BUILD/cli/toktier" --conversation "$work/conversation.json" "$@" \
  | tee "$OUT"
