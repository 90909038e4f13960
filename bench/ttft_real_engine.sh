#!/usr/bin/env bash
# Issue 10's latency experiment (docs/benchmarks.md): TTFT of long-context
# continuations, llama.cpp direct vs through toktier. Starts two engines (one
# per path, the same tiny Llama 3.1 model, context 131072 tokens) and one
# proxy on free 127.0.0.1 ports, builds the text from the shared workloads
# (Llama 3 renderings of mini-swe-agent sessions, chained), runs
# bench/ttft_real_engine.mjs and writes its JSON lines to OUT (default
# docs/bench/ttft_real_engine.jsonl).
#   bench/ttft_real_engine.sh [OUT] [--contexts 25000,100000,400000] [--steps 20]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TOKTIER_BUILD_DIR:-$ROOT/build/release}"
OUT="${1:-$ROOT/docs/bench/ttft_real_engine.jsonl}"
shift || true
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The text: final prompts of the workload sessions, chained, about 800K characters.
node -e '
const fs = require("fs"), path = require("path");
const dir = process.argv[1];
let out = "";
for (const f of fs.readdirSync(dir).sort()) {
  let prompt = "";
  for (const line of fs.readFileSync(path.join(dir, f), "utf8").split("\n")) {
    if (!line) continue;
    const c = JSON.parse(line);
    prompt = Buffer.from(prompt, "utf8").subarray(0, c.keep).toString("utf8") + c.append;
  }
  out += prompt;
  if (out.length > 800000) break;
}
fs.writeFileSync(process.argv[2], out);
' "$ROOT/../shared/workloads/mini-swe-agent/llama3" "$work/text.txt"
ports=()
for name in direct behind; do
  p=$(free_port)
  node "$ROOT/tools/engine/llama_engine.mjs" --port "$p" --ctx 131072 --threads 2 \
    --model "llama3.1=$BUILD/models/llama3.1.gguf" 2>"$work/$name.log" &
  pids+=($!)
  ports+=("$p")
done
pport=$(free_port)
(cd "$ROOT" && exec "$BUILD/cli/toktier" serve --config tools/dev-models.json --port "$pport" \
  --backends "http://127.0.0.1:${ports[1]}" --data-dir "" 2>"$work/proxy.log") &
pids+=($!)
for p in "${ports[0]}" "${ports[1]}" "$pport"; do
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break;
    curl -sf "http://127.0.0.1:$p/readyz" >/dev/null 2>&1 && break; sleep 0.2; done
done
mkdir -p "$(dirname "$OUT")"
node "$ROOT/bench/ttft_real_engine.mjs" --direct "http://127.0.0.1:${ports[0]}" \
  --engine-behind "http://127.0.0.1:${ports[1]}" --proxy "http://127.0.0.1:$pport" --text "$work/text.txt" "$@" \
  | tee "$OUT"
