#!/usr/bin/env bash
# Issue 10: the README's main-job command answers out of the box. Runs
# `tools/dev.sh run` (no --backends: it starts the llama.cpp engine and the
# proxy), sends the curl it prints, and stops it as Ctrl-C would (the job's
# trap; SIGTERM here, since a background job of a script ignores SIGINT).
# Usage: dev_sh_run_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1" build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ ! -f "$build/models/llama3.1.gguf" ]]; then
  echo "no engine models in $build/models: skipping"
  exit 77
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
eport=$(free_port) pport=$(free_port)
cd "$work"
TOKTIER_BUILD_DIR="$build" TOKTIER_ENGINE_PORT="$eport" setsid bash "$src/tools/dev.sh" run --port "$pport" \
  --data-dir "$work/data" >"$work/out.log" 2>&1 &
job=$!
for _ in $(seq 180); do
  grep -q "Ctrl-C stops both" "$work/out.log" && break
  kill -0 "$job" 2>/dev/null || break
  sleep 0.5
done
if ! grep -q "Ctrl-C stops both" "$work/out.log"; then
  echo "FAIL: tools/dev.sh run did not come up"; cat "$work/out.log"; exit 1
fi
# The printed commands, run as printed (continuation lines joined): a
# completion, a chat completion and an Anthropic message.
mapfile -t cmds < <(awk '/^  curl /{c=$0; sub(/\\$/, "", c); getline n; c=c n; print c}' "$work/out.log")
status=0
if ((${#cmds[@]} != 3)); then echo "FAIL: expected three curl commands, got ${#cmds[@]}"; status=1; fi
for cmd in "${cmds[@]}"; do
  echo "running: $cmd"
  reply=$(bash -c "$cmd")
  echo "reply: $reply"
  echo "$reply" | python3 -c '
import json, sys
r = json.load(sys.stdin)
if r.get("type") == "message":
    assert r["role"] == "assistant" and r["stop_reason"] == "max_tokens", r
    assert r["content"] and all(b["type"] in ("text", "thinking", "tool_use") for b in r["content"]), r
    assert r["usage"]["output_tokens"] == 8, r
    sys.exit(0)
c = r["choices"][0]
if r["object"] == "text_completion":
    assert c["text"] and c["finish_reason"] == "length", r
else:
    assert r["object"] == "chat.completion" and c["message"]["role"] == "assistant", r
    assert c["message"]["content"] and c["finish_reason"] == "length", r
assert r["usage"]["completion_tokens"] == 8, r
' || { echo "FAIL: the printed curl did not get an answer"; status=1; }
done
kill -TERM "$job"
for _ in $(seq 40); do kill -0 "$job" 2>/dev/null || break; sleep 0.25; done
if kill -0 "$job" 2>/dev/null; then echo "FAIL: the job did not stop"; kill -9 -- -"$job"; status=1; fi
for p in "$eport" "$pport"; do
  if curl -s -o /dev/null "http://127.0.0.1:$p/health" 2>/dev/null; then echo "FAIL: port $p still served"; status=1; fi
done
grep -q "stopped" "$work/out.log" || { echo "FAIL: no stop message"; status=1; }
((status == 0)) && echo "1 passed, 0 failed"
exit $status
