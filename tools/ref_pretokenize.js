#!/usr/bin/env node
// Reference pre-tokenization through the HF tokenizers Node binding (0.23).
// stdin: JSON lines {"tokenizer": PATH, "text": T} or {"pre_tokenizer": OBJ, "text": T}
// stdout: one JSON line per input: {"spans": [[begin, end], ...]} with UTF-8
// byte offsets into T, or {"error": MESSAGE}.
// The binding reports offsets in code points; they are converted to bytes.
'use strict';
const path = require('path');
const readline = require('readline');
const tk = require(path.join(__dirname, 'node_modules', 'tokenizers'));

const cache = new Map();
function preTokenizer(req) {
  const key = req.tokenizer !== undefined ? 'file:' + req.tokenizer : 'json:' + JSON.stringify(req.pre_tokenizer);
  let p = cache.get(key);
  if (p === undefined) {
    let tok;
    if (req.tokenizer !== undefined) {
      tok = tk.Tokenizer.fromFile(req.tokenizer);
    } else {
      tok = tk.Tokenizer.fromString(JSON.stringify({
        version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
        pre_tokenizer: req.pre_tokenizer, post_processor: null, decoder: null,
        model: { type: 'WordLevel', vocab: { '[UNK]': 0 }, unk_token: '[UNK]' },
      }));
    }
    p = tok.getPreTokenizer();
    cache.set(key, p);
  }
  return p;
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on('line', (line) => {
  if (!line.trim()) return;
  let res;
  try {
    const req = JSON.parse(line);
    const text = req.text;
    // byteAt[i] = UTF-8 byte offset of code point i.
    const byteAt = [0];
    for (const ch of text) byteAt.push(byteAt[byteAt.length - 1] + Buffer.byteLength(ch, 'utf8'));
    const pre = preTokenizer(req);
    const spans = pre === null ? (text.length ? [[0, byteAt[byteAt.length - 1]]] : [])
      : pre.preTokenizeString(text).map(([, [b, e]]) => [byteAt[b], byteAt[e]]);
    res = { spans };
  } catch (e) {
    res = { error: String(e && e.message || e) };
  }
  out.push(JSON.stringify(res));
  if (out.length >= 256) { process.stdout.write(out.join('\n') + '\n'); out.length = 0; }
});
rl.on('close', () => { if (out.length) process.stdout.write(out.join('\n') + '\n'); });
