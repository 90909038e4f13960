#!/usr/bin/env node
// Reference Unicode normalization for toktier's tests: HF tokenizers (npm,
// Rust core) NFC/NFD/NFKC/NFKD normalizers.
//   node tools/ref_normalize.js < JSONL of {"form": "NFC"|"NFD"|"NFKC"|"NFKD", "text": "..."}
//       > one JSON string (the normalized text) per input line
'use strict';
const path = require('path');
const readline = require('readline');
const tk = require(path.join(__dirname, 'node_modules', 'tokenizers'));
const forms = { NFC: tk.nfcNormalizer(), NFD: tk.nfdNormalizer(), NFKC: tk.nfkcNormalizer(), NFKD: tk.nfkdNormalizer() };
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
rl.on('line', (line) => {
  if (!line) return;
  const req = JSON.parse(line);
  const n = forms[req.form];
  if (!n) { process.stderr.write(`ref_normalize: unknown form ${req.form}\n`); process.exit(2); }
  out.push(JSON.stringify(n.normalizeString(req.text)));
  if (out.length >= 1024) { process.stdout.write(out.join('\n') + '\n'); out.length = 0; }
});
rl.on('close', () => { if (out.length) process.stdout.write(out.join('\n') + '\n'); });
