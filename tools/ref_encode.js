#!/usr/bin/env node
// Reference encoder for toktier's differential tests and benchmarks.
//
//   node tools/ref_encode.js --tokenizer PATH [--encoding NAME] [--add-special-tokens]
//       < JSONL of {"text": "...", "add_special_tokens": bool}
//       > one JSON array of token IDs per input line
//   node tools/ref_encode.js --tokenizer PATH [--encoding NAME] [--add-special-tokens]
//       --bench FILE [--runs N]
//       > {"chars","bytes","tokens","ms_median","ms_p90","mb_per_s","impl"}
//
// PATH is a Hugging Face tokenizer.json (npm `tokenizers` 0.23.2, the Rust
// core), a tiktoken encoders/*.json of the `tiktoken` npm package
// ({"pat_str","special_tokens","bpe_ranks"}), or a raw `.tiktoken` rank file
// with --encoding NAME (pattern and special tokens taken from the npm
// package's encoders/NAME.json).
// add_special_tokens: HF -> encode option addSpecialTokens (post-processor);
// tiktoken -> encode(text, "all") (special-token strings become special
// tokens), false -> encode_ordinary(text). A line without the field uses the
// --add-special-tokens flag.
//   node tools/ref_encode.js --tokenizer PATH [--encoding NAME] --decode
//       < JSONL of {"ids": [...], "skip_special_tokens": bool}
//       > one JSON string per input line: the reference decoding (HF
//         Tokenizer.decode; tiktoken decode, its bytes read as UTF-8 with
//         U+FFFD for invalid sequences)
// Other options: --batch N (texts per HF encodeBatch call, default 256),
// --ids-out FILE (bench mode: also write the IDs of one run as a JSON array),
// --threads N (HF rayon threads in stream mode; default 1 in bench mode).
'use strict';

const args = process.argv.slice(2);
function opt(name, def) {
  const i = args.indexOf(name);
  if (i < 0) return def;
  if (i + 1 >= args.length) die(`missing value after ${name}`);
  return args[i + 1];
}
function flag(name) { return args.includes(name); }
function die(msg) { process.stderr.write(`ref_encode: ${msg}\n`); process.exit(2); }

const benchFile = opt('--bench', null);
const threads = opt('--threads', benchFile ? '1' : null);
if (threads !== null) {
  // Must be set before the native module starts its rayon pool.
  process.env.RAYON_NUM_THREADS = String(threads);
  if (threads === '1') process.env.TOKENIZERS_PARALLELISM = 'false';
}

const fs = require('fs');
const path = require('path');

const tokPath = opt('--tokenizer', null);
if (!tokPath) die('--tokenizer PATH is required');
const encodingName = opt('--encoding', null);
const defaultAddSpecial = flag('--add-special-tokens');
const batchSize = Math.max(1, parseInt(opt('--batch', '256'), 10));

function requireFrom(mod) {
  // Prefer tools/node_modules next to this script, then the normal lookup.
  try { return require(path.join(__dirname, 'node_modules', mod)); } catch (e) { return require(mod); }
}

// ---------------------------------------------------------------- loading
function loadEncoder() {
  let content;
  try { content = fs.readFileSync(tokPath, 'utf8'); } catch (e) { die(`cannot read ${tokPath}: ${e.message}`); }
  let json = null;
  if (content.trimStart().startsWith('{')) {
    try { json = JSON.parse(content); } catch (e) { die(`${tokPath}: invalid JSON: ${e.message}`); }
  }
  if (json && json.model) {
    const { Tokenizer } = requireFrom('tokenizers');
    const tok = Tokenizer.fromString(content);
    // tokenizer.json files may carry truncation/padding; the contract is plain encoding.
    tok.disableTruncation();
    tok.disablePadding();
    return {
      impl: 'hf-tokenizers',
      encodeOne: async (text, addSpecial) =>
        (await tok.encode(text, null, { addSpecialTokens: addSpecial })).getIds(),
      encodeMany: async (texts, addSpecial) => {
        const encs = await tok.encodeBatch(texts, { addSpecialTokens: addSpecial });
        return encs.map((e) => e.getIds());
      },
      decode: (ids, skipSpecial) => tok.decode(ids, skipSpecial),
    };
  }
  const { Tiktoken } = requireFrom('tiktoken');
  let ranks, specials, pat;
  if (json && json.bpe_ranks !== undefined) {
    ranks = json.bpe_ranks; specials = json.special_tokens; pat = json.pat_str;
  } else {
    if (!encodingName) die(`${tokPath}: not a tokenizer.json nor a tiktoken JSON; pass --encoding NAME for a .tiktoken rank file`);
    let enc;
    try { enc = requireFrom(`tiktoken/encoders/${encodingName}.json`); } catch (e) { die(`unknown encoding ${encodingName}`); }
    ranks = content; specials = enc.special_tokens; pat = enc.pat_str;
  }
  const t = new Tiktoken(ranks, specials, pat);
  const enc1 = (text, addSpecial) => Array.from(addSpecial ? t.encode(text, 'all', []) : t.encode_ordinary(text));
  return {
    impl: 'tiktoken-wasm',
    encodeOne: async (text, addSpecial) => enc1(text, addSpecial),
    encodeMany: async (texts, addSpecial) => texts.map((x) => enc1(x, addSpecial)),
    // tiktoken has no skip-special option: special IDs are dropped first.
    decode: async (ids, skipSpecial) => {
      const special = new Set(Object.values(specials));
      const kept = skipSpecial ? ids.filter((id) => !special.has(id)) : ids;
      return new TextDecoder('utf-8').decode(t.decode(Uint32Array.from(kept)));
    },
  };
}

// ---------------------------------------------------------------- bench
async function bench(enc) {
  const text = fs.readFileSync(benchFile, 'utf8');
  const runs = Math.max(1, parseInt(opt('--runs', '5'), 10));
  const bytes = Buffer.byteLength(text, 'utf8');
  let chars = 0;
  for (const _ of text) chars++;  // code points, like toktier's "chars"
  let ids = await enc.encodeOne(text, defaultAddSpecial);  // warm-up (and the IDs)
  const idsOut = opt('--ids-out', null);
  if (idsOut) fs.writeFileSync(idsOut, JSON.stringify(Array.from(ids)) + '\n');
  const times = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    const out = await enc.encodeOne(text, defaultAddSpecial);
    const t1 = process.hrtime.bigint();
    times.push(Number(t1 - t0) / 1e6);
    ids = out;
  }
  times.sort((a, b) => a - b);
  const q = (p) => times[Math.min(times.length - 1, Math.ceil(p * times.length) - 1)];
  const med = times.length % 2 ? times[(times.length - 1) / 2]
    : (times[times.length / 2 - 1] + times[times.length / 2]) / 2;
  const r3 = (x) => Math.round(x * 1000) / 1000;
  process.stdout.write(JSON.stringify({
    chars, bytes, tokens: ids.length, ms_median: r3(med), ms_p90: r3(q(0.9)),
    mb_per_s: r3(bytes / 1e6 / (med / 1e3)), runs, impl: enc.impl,
  }) + '\n');
}

// ---------------------------------------------------------------- stream
async function stream(enc) {
  const out = process.stdout;
  let pending = [];  // {text, add}
  let outBuf = [];
  let outLen = 0;
  const write = async (s) => {
    outBuf.push(s); outLen += s.length;
    if (outLen > (1 << 20)) await flushOut();
  };
  const flushOut = async () => {
    if (!outBuf.length) return;
    const s = outBuf.join(''); outBuf = []; outLen = 0;
    if (!out.write(s)) await new Promise((r) => out.once('drain', r));
  };
  const flushBatch = async () => {
    let i = 0;
    while (i < pending.length) {
      // Consecutive texts with the same add_special_tokens go in one batch.
      let j = i;
      while (j < pending.length && pending[j].add === pending[i].add) j++;
      const texts = pending.slice(i, j).map((p) => p.text);
      const res = await enc.encodeMany(texts, pending[i].add);
      for (const ids of res) await write('[' + Array.prototype.join.call(ids, ',') + ']\n');
      i = j;
    }
    pending = [];
  };
  let lineNo = 0;
  let rest = '';
  const handleLine = async (line) => {
    lineNo++;
    if (line.endsWith('\r')) line = line.slice(0, -1);
    if (line === '') { die(`line ${lineNo}: empty line`); }
    let obj;
    try { obj = JSON.parse(line); } catch (e) { die(`line ${lineNo}: invalid JSON: ${e.message}`); }
    if (typeof obj.text !== 'string') die(`line ${lineNo}: no "text" string`);
    const add = typeof obj.add_special_tokens === 'boolean' ? obj.add_special_tokens : defaultAddSpecial;
    pending.push({ text: obj.text, add });
    if (pending.length >= batchSize) await flushBatch();
  };
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) {
    rest += chunk;
    let nl;
    let start = 0;
    while ((nl = rest.indexOf('\n', start)) >= 0) {
      await handleLine(rest.slice(start, nl));
      start = nl + 1;
    }
    rest = rest.slice(start);
  }
  if (rest.length) await handleLine(rest);
  await flushBatch();
  await flushOut();
}

// ---------------------------------------------------------------- decode
async function decodeStream(enc) {
  const rl = require('readline').createInterface({ input: process.stdin, crlfDelay: Infinity });
  let lineNo = 0;
  for await (const line of rl) {
    lineNo++;
    if (line === '') continue;
    let obj;
    try { obj = JSON.parse(line); } catch (e) { die(`line ${lineNo}: invalid JSON: ${e.message}`); }
    if (!Array.isArray(obj.ids)) die(`line ${lineNo}: no "ids" array`);
    const text = await enc.decode(obj.ids, obj.skip_special_tokens === true);
    process.stdout.write(JSON.stringify(text) + '\n');
  }
}

(async () => {
  const enc = loadEncoder();
  if (flag('--decode')) await decodeStream(enc);
  else if (benchFile) await bench(enc); else await stream(enc);
})().catch((e) => { die(e && e.stack ? e.stack : String(e)); });
