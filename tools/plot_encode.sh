#!/usr/bin/env bash
# Charts of the full-tokenization benchmark (bench/bench_encode.sh) with gnuplot.
#
#   tools/plot_encode.sh [RESULTS] [OUTDIR]
#       RESULTS: the benchmark's JSONL (default build/bench/results.jsonl)
#       OUTDIR:  where the charts go (default docs/bench)
#   PLOT_FORMAT=png tools/plot_encode.sh ...   # PNG instead of SVG (for a look)
#
# Writes:
#   encode_code.svg    MB/s against text size (log x, log y) on code texts
#                      (code_100k, code_1m, code_3m, mixed_4400k)
#   encode_prose.svg   the same on prose (prose_100k, prose_1m, prose_3m, mixed_4400k)
#                      one line per tokenizer and path: toktier 1T, toktier NT
#                      (--threads N), HF tokenizers, tiktoken
#   encode_threads.svg the NT speedup (median of paired runs: the one-thread time
#                      of a CPU of the N CPUs' mean speed / NT) per tokenizer on
#                      every 1M-character text in RESULTS
# The JSONL is turned into gnuplot data files (node) in a temporary folder.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
results=${1:-build/bench/results.jsonl}
outdir=${2:-docs/bench}
format=${PLOT_FORMAT:-svg}
command -v gnuplot >/dev/null || { echo "plot_encode.sh: gnuplot is required (apt-get install gnuplot-nox)" >&2; exit 2; }
command -v node >/dev/null || { echo "plot_encode.sh: node is required" >&2; exit 2; }
[ -s "$results" ] || { echo "plot_encode.sh: $results is missing or empty" >&2; exit 2; }
mkdir -p "$outdir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Data files and the gnuplot script.
node - "$results" "$tmp" "$outdir" "$format" <<'JS'
const fs = require('fs'), path = require('path');
const [res, tmp, outdir, format] = process.argv.slice(2);
const rows = fs.readFileSync(res, 'utf8').trim().split('\n').filter(Boolean).map(JSON.parse);
const models = [...new Set(rows.map((r) => r.model))];
const colors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b', '#e377c2', '#17becf'];
const threads = (rows.find((r) => r.toktier_mt) || { toktier_mt: { threads: 2 } }).toktier_mt.threads;
// path: [JSONL key, label, dash type, line width, point type]
const paths = [
  ['toktier', 'toktier 1T', 1, 2.5, 7],
  ['toktier_mt', `toktier ${threads}T`, 2, 2.5, 5],
  ['hf', 'HF', 3, 1.5, 9],
  ['tiktoken', 'tiktoken', 4, 1.5, 13],
];
const q = (s) => '"' + String(s).replace(/\\/g, '\\\\').replace(/"/g, '\\"') + '"';
const term = format === 'png'
  ? 'set terminal pngcairo size 1100,700 font ",11" noenhanced'
  : 'set terminal svg size 1000,640 dynamic font "sans,12" noenhanced';
let gp = `${term}\nset grid\nset key outside right top\nset datafile missing "NaN"\n`;
let n = 0;
for (const [kind, texts] of [['code', ['code_100k', 'code_1m', 'code_3m', 'mixed_4400k']],
                             ['prose', ['prose_100k', 'prose_1m', 'prose_3m', 'mixed_4400k']]]) {
  const plots = [];
  models.forEach((m, mi) => {
    for (const [key, label, dt, lw, pt] of paths) {
      const pts = rows.filter((r) => r.model === m && texts.includes(r.text) && r[key])
        .map((r) => [r.toktier.chars, r[key].mb_per_s]).sort((a, b) => a[0] - b[0]);
      if (!pts.length) continue;
      const file = path.join(tmp, `d${n++}.dat`);
      fs.writeFileSync(file, pts.map((p) => p.join(' ')).join('\n') + '\n');
      plots.push(`${q(file)} using 1:2 with linespoints dt ${dt} lw ${lw} pt ${pt} ps 1.2 lc rgb ${q(colors[mi % colors.length])} title ${q(m + ' / ' + label)}`);
    }
  });
  if (!plots.length) { console.error(`plot_encode.sh: no ${kind} rows, ${kind} chart skipped`); continue; }
  gp += `set output ${q(path.join(outdir, `encode_${kind}.${format}`))}\n`;
  gp += `set title ${q(`Full tokenization, ${kind} (4.4M: code and prose mixed): MB/s against text size`)}\n`;
  gp += `set logscale xy\nset xlabel "text size (characters, log)"\nset ylabel "MB/s (UTF-8 bytes / 10^6 / median s, log)"\n`;
  gp += `set xrange [50000:8000000]\nset xtics ("100K" 100000, "1M" 1000000, "3M" 3000000, "4.4M" 4400000)\nset yrange [*:*]\n`;
  gp += `plot ${plots.join(', \\\n  ')}\n`;
}
// Speedup of the NT path at 1M characters, one cluster per tokenizer.
const texts1m = [...new Set(rows.filter((r) => /_1m$/.test(r.text) && r.toktier_mt).map((r) => r.text))];
if (texts1m.length) {
  const file = path.join(tmp, 'threads.dat');
  let d = 'tokenizer ' + texts1m.join(' ') + '\n';
  for (const m of models) {
    d += q(m) + ' ' + texts1m.map((t) => {
      const r = rows.find((x) => x.model === m && x.text === t && x.toktier_mt);
      return r ? (r.toktier_mt.speedup_paired_median ?? r.toktier.ms_median / r.toktier_mt.ms_median).toFixed(3) : 'NaN';
    }).join(' ') + '\n';
  }
  fs.writeFileSync(file, d);
  gp += `set output ${q(path.join(outdir, `encode_threads.${format}`))}\n`;
  gp += `unset logscale\nunset xrange\nset auto x\nset xtics auto\nset xlabel ""\n`;
  gp += `set title ${q(`toktier --threads ${threads}: speedup over one thread at the CPUs' mean speed (median of paired runs), 1M-character texts`)}\n`;
  gp += `set ylabel "speedup (x)"\nset yrange [0:${threads + 0.5}]\nset style data histogram\nset style histogram clustered gap 1\n`;
  gp += `set style fill solid 0.85 border -1\nset boxwidth 0.9\nset key outside right top\n`;
  gp += `plot for [i=2:${texts1m.length + 1}] ${q(file)} using i:xtic(1) title columnheader(i), `;
  gp += `1 with lines dt 2 lc rgb "black" title "1x", ${threads} with lines dt 3 lc rgb "gray40" title "${threads}x (ideal)"\n`;
} else {
  console.error('plot_encode.sh: no 1M rows with a threaded run, threads chart skipped');
}
gp += 'unset output\n';
fs.writeFileSync(path.join(tmp, 'plot.gp'), gp);
JS
gnuplot "$tmp/plot.gp"
ls "$outdir"/encode_*."$format" >&2 || true
