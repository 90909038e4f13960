#!/usr/bin/env node
// Generates core/unicode_tables.inc by probing the REFERENCE tokenizers over
// every code point (0..0x10FFFF without surrogates):
//  - HF tokenizers (npm `tokenizers`, Rust core, Oniguruma regexes): a
//    WordLevel tokenizer with a Split pre-tokenizer {Regex: CLASS, Removed,
//    invert: true} keeps exactly the characters the class matches; also the
//    Rust-function based pre-tokenizers (WhitespaceSplit, Digits, Punctuation).
//  - tiktoken (npm `tiktoken`, Rust fancy-regex in WASM): a Tiktoken built with
//    the 256 single-byte ranks and pat_str = CLASS; encode_ordinary drops the
//    text the pattern does not match, so the bytes that come back are the
//    matched characters.
// Usage: node tools/gen_unicode_tables.js [OUT]   (default core/unicode_tables.inc)
'use strict';
const fs = require('fs');
const path = require('path');
const nm = path.join(__dirname, 'node_modules');
const tk = require(path.join(nm, 'tokenizers'));
const { Tiktoken } = require(path.join(nm, 'tiktoken'));

const MAXCP = 0x10FFFF;
const CHUNK = 0x8000;

// Bits must match core/unicode.h ClassBits.
const REGEX_CLASSES = [
  ['Lu', 0, '\\p{Lu}'], ['Ll', 1, '\\p{Ll}'], ['Lt', 2, '\\p{Lt}'], ['Lm', 3, '\\p{Lm}'],
  ['Lo', 4, '\\p{Lo}'], ['M', 5, '\\p{M}'], ['N', 6, '\\p{N}'], ['P', 7, '\\p{P}'],
  ['S', 8, '\\p{S}'], ['s', 9, '\\s'], ['w', 10, '\\w'], ['d', 11, '\\d'],
  ['wb', 15, '[\\w]'],  // \w inside a bracket expression (differs in Oniguruma)
];
// Rust-function classes used by HF pre-tokenizers (HF table only).
const FN_CLASSES = [
  ['rust_whitespace (WhitespaceSplit)', 12], ['rust_numeric (Digits)', 13],
  ['hf_punctuation (Punctuation)', 14],
];

function chunks() {
  const out = [];
  for (let lo = 0; lo <= MAXCP; lo += CHUNK) {
    const cps = [];
    for (let c = lo; c < Math.min(lo + CHUNK, MAXCP + 1); c++) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      cps.push(c);
    }
    out.push(cps);
  }
  return out;
}
const CHUNKS = chunks();
const CHUNK_STRS = CHUNKS.map((cps) => String.fromCodePoint(...cps));

function hfPre(preTok) {
  const j = {
    version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
    pre_tokenizer: preTok, post_processor: null, decoder: null,
    model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
  };
  return tk.Tokenizer.fromString(JSON.stringify(j)).getPreTokenizer();
}

function hfRegexSet(pat) {
  const pre = hfPre({ type: 'Split', pattern: { Regex: pat }, behavior: 'Removed', invert: true });
  const set = new Set();
  for (const s of CHUNK_STRS) {
    for (const [piece] of pre.preTokenizeString(s)) {
      const cps = Array.from(piece);
      if (cps.length !== 1) throw new Error(`class ${pat}: multi-char piece`);
      set.add(cps[0].codePointAt(0));
    }
  }
  return set;
}

// Pre-tokenizers that isolate the characters of a class and keep the rest in
// runs: text = 'a' c1 'a' c2 ...; a single-character piece other than 'a' is a member.
function hfIsolatingSet(preTok) {
  const pre = hfPre(preTok);
  const set = new Set();
  for (const cps of CHUNKS) {
    const s = cps.map((c) => 'a' + String.fromCodePoint(c)).join('') + 'a';
    for (const [piece] of pre.preTokenizeString(s)) {
      const p = Array.from(piece);
      if (p.length === 1 && p[0] !== 'a') set.add(p[0].codePointAt(0));
    }
  }
  return set;
}

// WhitespaceSplit removes whitespace: members are the characters not kept.
function hfWhitespaceSplitSet() {
  const pre = hfPre({ type: 'WhitespaceSplit' });
  const set = new Set();
  for (let i = 0; i < CHUNKS.length; i++) {
    const kept = new Set();
    for (const [piece] of pre.preTokenizeString(CHUNK_STRS[i])) {
      for (const ch of piece) kept.add(ch.codePointAt(0));
    }
    for (const c of CHUNKS[i]) if (!kept.has(c)) set.add(c);
  }
  return set;
}

const RANKS = (() => {
  const lines = [];
  for (let b = 0; b < 256; b++) lines.push(Buffer.from([b]).toString('base64') + ' ' + b);
  return lines.join('\n');
})();

function tiktokenSet(pat) {
  const enc = new Tiktoken(RANKS, {}, pat);
  const set = new Set();
  for (const s of CHUNK_STRS) {
    const bytes = Buffer.from(enc.encode_ordinary(s));
    for (const ch of bytes.toString('utf8')) set.add(ch.codePointAt(0));
  }
  enc.free();
  return set;
}

function ranges(bitsArr) {
  const out = [];
  let start = -1, cur = 0;
  for (let c = 0; c <= MAXCP + 1; c++) {
    const b = c <= MAXCP ? bitsArr[c] : 0;
    if (b !== cur) {
      if (cur !== 0) out.push([start, c - 1, cur]);
      start = c; cur = b;
    }
  }
  return out;
}

function setDiff(a, b) { return [...a].filter((x) => !b.has(x)).sort((x, y) => x - y); }
function fmtList(xs, n = 12) {
  const h = xs.slice(0, n).map((c) => 'U+' + c.toString(16).toUpperCase().padStart(4, '0'));
  return h.join(' ') + (xs.length > n ? ` ... (${xs.length})` : ` (${xs.length})`);
}

function main() {
  const out = process.argv[2] || path.join(__dirname, '..', 'core', 'unicode_tables.inc');
  const t0 = Date.now();
  const hfBits = new Uint16Array(MAXCP + 1);
  const ttBits = new Uint16Array(MAXCP + 1);
  const report = [];
  const hfSets = {}, ttSets = {};
  for (const [name, bit, pat] of REGEX_CLASSES) {
    const h = hfRegexSet(pat), t = tiktokenSet(pat);
    hfSets[name] = h; ttSets[name] = t;
    for (const c of h) hfBits[c] |= 1 << bit;
    for (const c of t) ttBits[c] |= 1 << bit;
    report.push(`${pat}: HF ${h.size}, tiktoken ${t.size}`);
    const d1 = setDiff(h, t), d2 = setDiff(t, h);
    if (d1.length) report.push(`  HF only: ${fmtList(d1)}`);
    if (d2.length) report.push(`  tiktoken only: ${fmtList(d2)}`);
  }
  // Inside a bracket expression each class must mean the same ([X] == X and
  // [^X] == complement of X), since the splitter resolves brackets itself.
  // Oniguruma's [\w] / [\d] differ from \w / \d; the splitter rejects those.
  let total = 0;
  for (const cps of CHUNKS) total += cps.length;
  for (const [name, , pat] of REGEX_CLASSES) {
    if (name === 'wb') continue;
    for (const [label, setOf, sets] of [['HF', hfRegexSet, hfSets], ['tiktoken', tiktokenSet, ttSets]]) {
      const inb = setOf('[' + pat + ']'), neg = setOf('[^' + pat + ']');
      const ok = setDiff(inb, sets[name]).length === 0 && setDiff(sets[name], inb).length === 0 &&
        neg.size + sets[name].size === total && setDiff(neg, sets[name]).length === neg.size;
      if (!ok) {
        const msg = `${label} [${pat}] differs from ${pat}: in-bracket only ${fmtList(setDiff(inb, sets[name]))}, ` +
          `outside only ${fmtList(setDiff(sets[name], inb))}; [^${pat}] ${neg.size}`;
        if (name === 'w' || name === 'd') report.push(msg); else throw new Error(msg);
      }
    }
  }
  // \p{L} must be the union of the Lx classes (in both references).
  for (const [label, setOf, sets] of [['HF', hfRegexSet, hfSets], ['tiktoken', tiktokenSet, ttSets]]) {
    const L = setOf('\\p{L}');
    const u = new Set([...sets.Lu, ...sets.Ll, ...sets.Lt, ...sets.Lm, ...sets.Lo]);
    const a = setDiff(L, u), b = setDiff(u, L);
    if (a.length || b.length) throw new Error(`${label}: \\p{L} != union of Lx: ${fmtList(a)} / ${fmtList(b)}`);
    report.push(`${label} \\p{L} = union of Lx (${L.size})`);
  }
  const fnSets = [
    hfWhitespaceSplitSet(),
    hfIsolatingSet({ type: 'Digits', individual_digits: true }),
    hfIsolatingSet({ type: 'Punctuation', behavior: 'Isolated' }),
  ];
  FN_CLASSES.forEach(([name, bit], i) => {
    for (const c of fnSets[i]) { hfBits[c] |= 1 << bit; ttBits[c] |= 1 << bit; }
    report.push(`${name}: ${fnSets[i].size}`);
  });
  report.push(`rust_whitespace vs \\s: ${fmtList(setDiff(fnSets[0], hfSets.s))} / ${fmtList(setDiff(hfSets.s, fnSets[0]))}`);
  report.push(`rust_numeric vs \\p{N}: ${fmtList(setDiff(fnSets[1], hfSets.N))} / ${fmtList(setDiff(hfSets.N, fnSets[1]))}`);
  report.push(`hf_punctuation vs \\p{P}: ${fmtList(setDiff(fnSets[2], hfSets.P))} / ${fmtList(setDiff(hfSets.P, fnSets[2]))}`);

  const hfR = ranges(hfBits), ttR = ranges(ttBits);
  let same = hfR.length === ttR.length && hfR.every((r, i) => r.every((v, k) => v === ttR[i][k]));
  const ver = (p) => JSON.parse(fs.readFileSync(path.join(nm, p, 'package.json'), 'utf8')).version;
  const lines = [];
  lines.push('// GENERATED by tools/gen_unicode_tables.js -- do not edit.');
  lines.push(`// Probed references: tokenizers (npm) ${ver('tokenizers')}, tiktoken (npm) ${ver('tiktoken')}, node ${process.version}.`);
  lines.push('// Every code point 0..0x10FFFF except surrogates was run through each class');
  lines.push('// pattern in both references; see the script for the method.');
  for (const r of report) lines.push('//   ' + r);
  lines.push(`// HF and tiktoken tables are ${same ? 'IDENTICAL' : 'DIFFERENT'}.`);
  lines.push('// Entries: {first, last, bits} sorted, disjoint, bits != 0 (ClassBits of unicode.h).');
  lines.push(`#define TOKTIER_UNICODE_TABLES_IDENTICAL ${same ? 1 : 0}`);
  const emit = (name, R) => {
    lines.push(`static constexpr UnicodeRange ${name}[] = {`);
    for (let i = 0; i < R.length; i += 4) {
      lines.push('  ' + R.slice(i, i + 4).map(([a, b, m]) =>
        `{0x${a.toString(16).toUpperCase()}, 0x${b.toString(16).toUpperCase()}, 0x${m.toString(16)}}`).join(', ') + ',');
    }
    lines.push('};');
  };
  emit('kHfRanges', hfR);
  emit('kTiktokenRanges', ttR);
  fs.writeFileSync(out, lines.join('\n') + '\n');
  console.error(report.join('\n'));
  console.error(`wrote ${out}: ${hfR.length} HF ranges, ${ttR.length} tiktoken ranges, identical=${same}, ${(Date.now() - t0) / 1000}s`);
}
main();
