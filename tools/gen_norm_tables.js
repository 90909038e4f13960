#!/usr/bin/env node
// Generates core/unicode_norm_tables.inc (the tables of core/unicode_norm.cpp)
// by probing the REFERENCE normalizers: HF tokenizers (npm) NFC/NFD/NFKC/NFKD,
// whose Rust core uses the crate unicode-normalization-alignments (old Unicode
// data). Nothing here comes from utf8proc. Method:
//  1. Decompositions: NFD and NFKD of every code point (0..0x10FFFF without
//     surrogates), probed in batches joined by '\n' (a starter that decomposes
//     to itself and composes with nothing, asserted; the number of '\n' in the
//     output must equal the input's). NFD(c) is the full canonical
//     decomposition already in canonical order; storing it instead of the raw
//     recursive decomposition is equivalent because the later stable sort of a
//     non-starter run keeps the order of equal-class marks either way.
//  2. Combining classes (what matters is the order the reference's canonical
//     reordering applies: a stable sort by class of each run of non-starters):
//     a. non-starters: among the chars with NFD(c) == c (the only chars whose
//        class the reference ever looks up), c is a non-starter iff
//        NFD("a" U+0345 c U+0334) != itself (U+0345 sorts after U+0334, checked;
//        a starter c blocks the reordering, a non-starter joins the unsorted run).
//     b. representatives: for each class value of the local Perl UCD
//        (CombiningClass.pl, only used to pick candidates), the lowest
//        reference non-starter with that value. The chain r_0..r_n-1 is proved
//        strictly increasing in the reference: NFD("a" r_n-1..r_0) == "a" r_0..r_n-1.
//     c. every non-starter c: L = index of c in NFD("a" c r_0..r_n-1) - 1 (number
//        of reps with class < ccc(c)), LE = index in NFD("a" r_0..r_n-1 c) - 1
//        (reps with class <= ccc(c)). LE == L + 1 means ccc(c) == class(r_L):
//        c gets r_L's Unicode value. Anything else (a class strictly between
//        representatives) aborts. So the stored values are order-isomorphic to
//        the reference's classes, which is all a stable sort by class sees.
//  3. Composition pairs: candidates are the canonical two-element single-level
//     decompositions a b -> c of the local Perl UCD (Decomposition.pl); the pair
//     is kept iff the reference treats c as a primary composite: NFD(c) != c and
//     NFC(c) == c. Completeness is asserted: every such c (not Hangul) must have
//     a candidate pair. Hangul (de)composition is algorithmic; the reference is
//     checked on every syllable and every L+V, LV+T (T = U+11A7..U+11C2),
//     LVT+T and out-of-range jamo pair.
//  4. Chunking safety (core/normalizer.cpp splits before ASCII chars): every
//     ASCII char decomposes to itself in both forms, has class 0 and is never
//     the second element of a composition pair.
// Usage: node tools/gen_norm_tables.js [OUT]  (default core/unicode_norm_tables.inc)
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const nm = path.join(__dirname, 'node_modules');
const tk = require(path.join(nm, 'tokenizers'));

const MAXCP = 0x10FFFF;
const NORM = { NFC: tk.nfcNormalizer(), NFD: tk.nfdNormalizer(), NFKC: tk.nfkcNormalizer(), NFKD: tk.nfkdNormalizer() };
const S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7;
const L_COUNT = 19, V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT;
const isHangulS = (c) => c >= S_BASE && c < S_BASE + S_COUNT;
const chr = (c) => String.fromCodePoint(c);
const cps = (s) => Array.from(s, (ch) => ch.codePointAt(0));
const hex = (c) => 'U+' + c.toString(16).toUpperCase().padStart(4, '0');
function fail(msg) { throw new Error(msg); }

const ALL = [];
for (let c = 0; c <= MAXCP; c++) if (c < 0xD800 || c > 0xDFFF) ALL.push(c);

// form(c) for every code point, as a string.
function perChar(form) {
  const n = NORM[form];
  const res = new Array(MAXCP + 1);
  const list = ALL.filter((c) => c !== 10);
  const CH = 0x4000;
  for (let i = 0; i < list.length; i += CH) {
    const part = list.slice(i, i + CH);
    const o = n.normalizeString(part.map(chr).join('\n')).split('\n');
    if (o.length !== part.length) fail(`${form}: separator count changed in batch at ${hex(part[0])}`);
    part.forEach((c, k) => { res[c] = o[k]; });
  }
  res[10] = n.normalizeString('\n');
  if (res[10] !== '\n') fail(`${form}('\\n') != '\\n'`);
  return res;
}

// Runs fixed-length segments (arrays of code points) through `form` joined
// together; returns the output segments (same lengths; asserted).
function segments(form, segs) {
  const out = [];
  const BATCH = 4096;
  for (let i = 0; i < segs.length; i += BATCH) {
    const part = segs.slice(i, i + BATCH);
    const o = cps(NORM[form].normalizeString(part.map((s) => String.fromCodePoint(...s)).join('')));
    let pos = 0;
    for (const s of part) { out.push(o.slice(pos, pos + s.length)); pos += s.length; }
    if (pos !== o.length) fail(`${form}: segment lengths changed`);
  }
  return out;
}
const eqArr = (a, b) => a.length === b.length && a.every((v, i) => v === b[i]);

function perlUnicore(file) {
  const lib = execFileSync('perl', ['-MConfig', '-e', 'print $Config{privlib}']).toString();
  const p = path.join(lib, 'unicore', file);
  const lines = fs.readFileSync(p, 'utf8').split('\n');
  const ver = execFileSync('perl', ['-MUnicode::UCD', '-e', 'print Unicode::UCD::UnicodeVersion()']).toString();
  const rows = [];
  for (const l of lines) {
    const m = /^([0-9A-F]+)\t([0-9A-F]*)\t(.+)$/.exec(l);
    if (m) rows.push([parseInt(m[1], 16), m[2] ? parseInt(m[2], 16) : parseInt(m[1], 16), m[3]]);
  }
  return { rows, ver, p };
}

function main() {
  const outPath = process.argv[2] || path.join(__dirname, '..', 'core', 'unicode_norm_tables.inc');
  const t0 = Date.now();
  const report = [];
  const nfd = perChar('NFD'), nfkd = perChar('NFKD'), nfc = perChar('NFC');
  console.error(`per-char probes ${(Date.now() - t0) / 1000}s`);

  // --- Hangul: the reference must follow the standard algorithm.
  const hangulD = (s) => {
    const i = s - S_BASE, l = L_BASE + Math.floor(i / N_COUNT), v = V_BASE + Math.floor((i % N_COUNT) / T_COUNT), t = T_BASE + (i % T_COUNT);
    return t === T_BASE ? [l, v] : [l, v, t];
  };
  for (let s = S_BASE; s < S_BASE + S_COUNT; s++) {
    const d = hangulD(s);
    if (!eqArr(cps(nfd[s]), d) || !eqArr(cps(nfkd[s]), d) || nfc[s] !== chr(s)) fail(`Hangul ${hex(s)} not algorithmic`);
  }
  {
    const segs = [], exp = [];
    for (let l = L_BASE - 1; l <= L_BASE + L_COUNT; l++) {
      for (let v = V_BASE - 1; v <= V_BASE + V_COUNT; v++) {
        segs.push([l, v]);
        const ok = l >= L_BASE && l < L_BASE + L_COUNT && v >= V_BASE && v < V_BASE + V_COUNT;
        exp.push(ok ? [S_BASE + ((l - L_BASE) * V_COUNT + (v - V_BASE)) * T_COUNT] : [l, v]);
      }
    }
    for (let s = S_BASE; s < S_BASE + S_COUNT; s++) {
      for (let t = T_BASE - 1; t <= T_BASE + T_COUNT; t++) {
        segs.push([s, t]);
        const ok = (s - S_BASE) % T_COUNT === 0 && t > T_BASE && t < T_BASE + T_COUNT;
        exp.push(ok ? [s + t - T_BASE] : [s, t]);
      }
    }
    // NFC output lengths vary: pairs joined by '\n'.
    const o = NORM.NFC.normalizeString(segs.map((s) => String.fromCodePoint(...s)).join('\n')).split('\n');
    if (o.length !== segs.length) fail('Hangul probe: separator count');
    segs.forEach((s, i) => { if (!eqArr(cps(o[i]), exp[i])) fail(`Hangul NFC ${s.map(hex)} -> ${cps(o[i]).map(hex)}`); });
    report.push(`Hangul: algorithmic in the reference (${S_COUNT} syllables, ${segs.length} jamo/syllable pairs checked)`);
  }

  // --- Combining classes.
  const nfdStable = (c) => nfd[c] === chr(c);
  const stableList = ALL.filter(nfdStable);
  const A = 0x61;
  {
    const o = cps(NORM.NFD.normalizeString('a\u0345\u0334'));
    if (!eqArr(o, [A, 0x334, 0x345])) fail('U+0334 does not sort before U+0345');
  }
  const probe = segments('NFD', stableList.map((c) => [A, 0x345, c, 0x334]));
  const nonStarters = stableList.filter((c, i) => !eqArr(probe[i], [A, 0x345, c, 0x334]));
  const ccc = new Map();  // cp -> class (non-starters only)
  const perlCcc = perlUnicore('CombiningClass.pl');
  const byVal = new Map();
  const ns = new Set(nonStarters);
  for (const [lo, hi, v] of perlCcc.rows) {
    for (let c = lo; c <= hi; c++) {
      if (!ns.has(c)) continue;
      const val = parseInt(v, 10);
      if (!byVal.has(val)) byVal.set(val, c);
    }
  }
  const vals = [...byVal.keys()].sort((a, b) => a - b);
  const reps = vals.map((v) => byVal.get(v));
  {
    const o = cps(NORM.NFD.normalizeString(String.fromCodePoint(A, ...reps.slice().reverse())));
    const o2 = cps(NORM.NFD.normalizeString(String.fromCodePoint(A, ...reps)));
    if (!eqArr(o, [A, ...reps]) || !eqArr(o2, [A, ...reps])) fail('representatives are not strictly ordered in the reference');
  }
  const p1 = segments('NFD', nonStarters.map((c) => [A, c, ...reps]));
  const p2 = segments('NFD', nonStarters.map((c) => [A, ...reps, c]));
  nonStarters.forEach((c, i) => {
    if (reps.includes(c)) { ccc.set(c, vals[reps.indexOf(c)]); return; }  // proved by the chain
    const L = p1[i].indexOf(c) - 1, LE = p2[i].indexOf(c) - 1;
    if (LE !== L + 1) fail(`${hex(c)}: class strictly between representatives (L=${L}, LE=${LE})`);
    ccc.set(c, vals[L]);
  });
  report.push(`combining classes: ${nonStarters.length} non-starters (of ${stableList.length} chars with NFD(c) == c), ` +
              `${reps.length} class values, representatives ${reps.map(hex).join(' ')}`);
  report.push(`  class values are Perl UCD ${perlCcc.ver} numbers of the representatives (order-isomorphic to the reference's)`);

  // --- Decompositions.
  const canon = [], compat = [];
  let canonCount = 0, compatCount = 0;
  for (const c of ALL) {
    if (isHangulS(c)) continue;
    if (nfd[c] !== chr(c)) { canon.push([c, cps(nfd[c])]); canonCount++; }
    if (nfkd[c] !== nfd[c]) { compat.push([c, cps(nfkd[c])]); compatCount++; }
  }
  report.push(`decompositions: ${canonCount} canonical (NFD(c) != c), ${compatCount} compatibility (NFKD(c) != NFD(c)), Hangul excluded`);

  // --- Composition pairs.
  const perlDec = perlUnicore('Decomposition.pl');
  const cand = new Map();  // c -> [a, b]
  for (const [lo, hi, m] of perlDec.rows) {
    if (m.startsWith('<')) continue;
    const parts = m.split(' ').map((x) => parseInt(x, 16));
    if (parts.length !== 2) continue;
    for (let c = lo; c <= hi; c++) cand.set(c, parts);
  }
  const pairs = [];
  const composites = ALL.filter((c) => !isHangulS(c) && nfd[c] !== chr(c) && nfc[c] === chr(c));
  for (const c of composites) {
    const p = cand.get(c);
    if (!p) fail(`${hex(c)} is a primary composite in the reference but has no pair decomposition in Perl UCD ${perlDec.ver}`);
    pairs.push([p[0], p[1], c]);
  }
  const notComposed = cand.size - pairs.length;
  pairs.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  for (let i = 1; i < pairs.length; i++) {
    if (pairs[i][0] === pairs[i - 1][0] && pairs[i][1] === pairs[i - 1][1]) fail('duplicate pair');
  }
  report.push(`composition: ${pairs.length} pairs (Perl UCD ${perlDec.ver} has ${cand.size} two-element canonical ` +
              `decompositions; ${notComposed} of them are not primary composites in the reference: ` +
              `exclusions, non-starter decompositions, characters newer than its data)`);

  // --- Chunking safety (core/normalizer.cpp).
  for (let c = 0; c < 0x80; c++) {
    if (nfd[c] !== chr(c) || nfkd[c] !== chr(c) || nfc[c] !== chr(c)) fail(`ASCII ${hex(c)} changes`);
    if (ccc.has(c)) fail(`ASCII ${hex(c)} is a non-starter`);
  }
  for (const [a, b] of pairs) {
    if (b < 0x80) fail(`composition pair with ASCII second element ${hex(a)} ${hex(b)}`);
    if (a === 10 || b === 10) fail('newline composes');
  }
  report.push('asserted: ASCII decomposes to itself, has class 0, is never the second element of a pair');

  // --- Emit.
  const pool = [];
  const poolIndex = new Map();
  const addPool = (seq) => {
    const key = seq.join(',');
    if (poolIndex.has(key)) return poolIndex.get(key);
    const off = pool.length;
    pool.push(...seq);
    poolIndex.set(key, off);
    return off;
  };
  const decRows = (list) => list.map(([c, seq]) => {
    if (seq.length > 255) fail('long decomposition');
    return [c, addPool(seq), seq.length];
  });
  const canonRows = decRows(canon), compatRows = decRows(compat);
  if (pool.length > 0xFFFF) fail('pool too large');
  const cccRanges = [];
  const cccSorted = [...ccc.entries()].sort((x, y) => x[0] - y[0]);
  for (const [c, v] of cccSorted) {
    const last = cccRanges[cccRanges.length - 1];
    if (last && last[1] === c - 1 && last[2] === v) last[1] = c; else cccRanges.push([c, c, v]);
  }
  const ver = JSON.parse(fs.readFileSync(path.join(nm, 'tokenizers', 'package.json'), 'utf8')).version;
  const H = (c) => '0x' + c.toString(16).toUpperCase();
  const lines = [];
  lines.push('// GENERATED by tools/gen_norm_tables.js -- do not edit.');
  lines.push(`// Probed reference: tokenizers (npm) ${ver} NFC/NFD/NFKC/NFKD normalizers (Rust crate`);
  lines.push(`// unicode-normalization-alignments), node ${process.version}; candidates for class`);
  lines.push(`// representatives and composition pairs from Perl's UCD ${perlDec.ver}, each kept only as the`);
  lines.push('// reference behaves. See the script for the method and its proof obligations.');
  for (const r of report) lines.push('//   ' + r);
  lines.push(`// Tables: ${cccRanges.length} class ranges, ${canonRows.length} canonical + ${compatRows.length} compatibility`);
  lines.push(`// decompositions (pool ${pool.length} code points), ${pairs.length} composition pairs.`);
  const emit = (decl, rows, fmt, per) => {
    lines.push(`${decl} = {`);
    for (let i = 0; i < rows.length; i += per) lines.push('  ' + rows.slice(i, i + per).map(fmt).join(', ') + ',');
    lines.push('};');
  };
  emit('static constexpr NormCccRange kNormCcc[]', cccRanges, ([a, b, v]) => `{${H(a)}, ${H(b)}, ${v}}`, 6);
  emit('static constexpr char32_t kNormPool[]', pool, H, 12);
  emit('static constexpr NormDecomp kNormCanon[]', canonRows, ([c, o, n]) => `{${H(c)}, ${o}, ${n}}`, 6);
  emit('static constexpr NormDecomp kNormCompat[]', compatRows, ([c, o, n]) => `{${H(c)}, ${o}, ${n}}`, 6);
  emit('static constexpr NormPair kNormCompose[]', pairs, ([a, b, c]) => `{${H(a)}, ${H(b)}, ${H(c)}}`, 4);
  fs.writeFileSync(outPath, lines.join('\n') + '\n');
  console.error(report.join('\n'));
  console.error(`wrote ${outPath} in ${(Date.now() - t0) / 1000}s`);
}
main();
