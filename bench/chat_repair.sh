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
node -e '
const fs = require("fs"), path = require("path");
const dir = process.argv[1];
const messages = [];
let chars = 0;
for (const f of fs.readdirSync(dir).sort()) {
  let prompt = "";
  for (const line of fs.readFileSync(path.join(dir, f), "utf8").split("\n")) {
    if (!line) continue;
    const c = JSON.parse(line);
    prompt = Buffer.from(prompt, "utf8").subarray(0, c.keep).toString("utf8") + c.append;
  }
  const re = /<\|im_start\|>(\w+)\n([\s\S]*?)<\|im_end\|>\n/g;
  let m;
  while ((m = re.exec(prompt))) {
    // One system prompt at the start; later ones read as user turns.
    const role = m[1] === "system" && messages.length ? "user" : m[1];
    const last = messages.at(-1);
    if (last && last.role === role) last.content += "\n\n" + m[2];
    else messages.push({role, content: m[2]});
    chars += m[2].length;
  }
  if (chars > 1300000) break;
}
fs.writeFileSync(process.argv[2], JSON.stringify(messages));
' "$ROOT/../shared/workloads/mini-swe-agent/chatml" "$work/conversation.json"
mkdir -p "$(dirname "$OUT")"
node "$ROOT/bench/chat_repair.mjs" --toktier "$BUILD/cli/toktier" --conversation "$work/conversation.json" "$@" \
  | tee "$OUT"
