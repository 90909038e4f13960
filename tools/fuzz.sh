#!/usr/bin/env bash
# libFuzzer campaigns over the fuzz targets in tests/fuzz (clang 14 from
# Debian, ASan + UBSan, coverage on every library):
#   tools/fuzz.sh [RUNS] [TARGET...]      default: 1000000 runs, every target
#   FUZZ_SECONDS=S tools/fuzz.sh 0 ...    run each target for S seconds instead
# Each target runs over its committed corpus tests/fuzz/corpus/TARGET plus
# the seeds (the JSON targets with tests/fuzz/json.dict: keys and the
# deep-nesting markers of fuzz_support.h); new coverage is added to the
# corpus (commit it). Prints one line
# per target with its executions; a crash stops the run and leaves the
# reproducer (crash-*) in build/fuzz/artifacts.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$ROOT/build/fuzz"
RUNS="${1:-1000000}"
shift || true
TARGETS=("$@")
if ((${#TARGETS[@]} == 0)); then
  TARGETS=(fuzz_http_request fuzz_backend_response fuzz_completion_request fuzz_session_file fuzz_hf_loader
           fuzz_repair_edits fuzz_encode_paths fuzz_live_server fuzz_chat_template fuzz_chat_request fuzz_chat_response
           fuzz_generate_response fuzz_messages_request fuzz_messages_response fuzz_responses_request
           fuzz_responses_response)
fi
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTOKTIER_LIBFUZZER=ON >/dev/null
cmake --build "$BUILD" -j "${TOKTIER_JOBS:-$(nproc)}" --target "${TARGETS[@]}"
mkdir -p "$BUILD/artifacts"
limit=(-runs="$RUNS")
if [[ -n "${FUZZ_SECONDS:-}" ]]; then
  limit=(-max_total_time="$FUZZ_SECONDS")
  ((RUNS > 0)) && limit+=(-runs="$RUNS")
fi
for t in "${TARGETS[@]}"; do
  corpus="$ROOT/tests/fuzz/corpus/$t"
  mkdir -p "$corpus"
  seeds=()
  case "$t" in
    fuzz_http_request) seeds=("$ROOT"/tests/fuzz/seeds/http_request*.txt) ;;
    fuzz_live_server) seeds=("$ROOT"/tests/fuzz/seeds/http_request*.txt "$ROOT"/tests/fuzz/seeds/live_*.bin) ;;
    fuzz_backend_response) seeds=("$ROOT"/tests/fuzz/seeds/backend_response*.txt) ;;
    fuzz_completion_request) seeds=("$ROOT"/tests/fuzz/seeds/completion_request*.json) ;;
    fuzz_session_file) seeds=("$ROOT"/tests/fuzz/seeds/session.jsonl) ;;
    fuzz_hf_loader) seeds=("$ROOT"/tests/fuzz/seeds/tiny_tokenizer.json) ;;
    fuzz_repair_edits) seeds=("$ROOT"/tests/fuzz/seeds/repair_edits.bin) ;;
    fuzz_encode_paths) seeds=("$ROOT"/tests/fuzz/seeds/mixed_text.txt) ;;
    fuzz_chat_template) seeds=("$ROOT"/tests/fuzz/seeds/chat_template.jinja) ;;
    fuzz_chat_request) seeds=("$ROOT"/tests/fuzz/seeds/chat_request*.json) ;;
    fuzz_chat_response) seeds=("$ROOT"/tests/fuzz/seeds/chat_response*.txt) ;;
    fuzz_generate_response) seeds=("$ROOT"/tests/fuzz/seeds/generate_response*.txt) ;;
    fuzz_messages_request) seeds=("$ROOT"/tests/fuzz/seeds/messages_request.bin) ;;
    fuzz_responses_request) seeds=("$ROOT"/tests/fuzz/seeds/responses_request.json) ;;
    fuzz_messages_response) seeds=("$ROOT"/tests/fuzz/seeds/messages_response*.txt) ;;
    fuzz_responses_response) seeds=("$ROOT"/tests/fuzz/seeds/responses_response*.txt) ;;
  esac
  for s in "${seeds[@]}"; do cp -n "$s" "$corpus/" 2>/dev/null || true; done
  # The JSON targets get the dictionary of keys and deep-nesting markers.
  dict=()
  case "$t" in
    fuzz_completion_request | fuzz_chat_request | fuzz_chat_response | fuzz_generate_response | fuzz_live_server | \
    fuzz_messages_request | fuzz_responses_request | fuzz_messages_response | fuzz_responses_response)
      dict=(-dict="$ROOT/tests/fuzz/json.dict") ;;
  esac
  log="$BUILD/artifacts/$t.log"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" \
  LSAN_OPTIONS="suppressions=$ROOT/tests/sanitizers/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$BUILD/tests/fuzz/$t" "${limit[@]}" "${dict[@]+"${dict[@]}"}" -max_len=65536 -reduce_inputs=1 -print_final_stats=1 \
      -artifact_prefix="$BUILD/artifacts/" "$corpus" >"$log" 2>&1 || { tail -40 "$log"; exit 1; }
  execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
  rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+)/\1/p' "$log" | tail -1)
  printf '%s: %s executions (%s/s), corpus %s files\n' "$t" "${execs:-?}" "${rate:-?}" "$(ls "$corpus" | wc -l)"
done
