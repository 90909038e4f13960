#!/usr/bin/env node
// Checks `toktier replay` output against the reference (npm `tokenizers`) on a
// sample of steps of each session:
//   node tools/replay_check.js --toktier BIN --tokenizer PATH [--every N] SESSION.jsonl...
// Every step whose index is a multiple of N (default 5), and the last step, is
// tokenized by the reference from the full prompt and compared. Prints totals
// as JSON; exits 1 on the first difference.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const args = process.argv.slice(2);
const opt = (n, d) => { const i = args.indexOf(n); return i < 0 ? d : args.splice(i, 2)[1]; };
const bin = opt('--toktier');
const tokPath = opt('--tokenizer');
const every = parseInt(opt('--every', '5'), 10);
const sessions = args;
const { Tokenizer } = require(path.join(__dirname, 'node_modules', 'tokenizers'));
const tok = Tokenizer.fromString(fs.readFileSync(tokPath, 'utf8'));

(async () => {
  let steps = 0, checked = 0, ids = 0;
  for (const file of sessions) {
    const res = spawnSync(bin, ['replay', '--tokenizer', tokPath, '--add-special-tokens', file],
                          { maxBuffer: 1 << 30, encoding: 'utf8' });
    if (res.status !== 0) { console.error(`toktier replay failed on ${file}: ${res.stderr}`); process.exit(1); }
    const out = res.stdout.split('\n').filter((l) => l.length);
    // Rebuild the prompts from the session file (keep is in UTF-8 bytes).
    let prev = Buffer.alloc(0);
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.length);
    for (let k = 0; k < lines.length; k++) {
      const call = JSON.parse(lines[k]);
      prev = Buffer.concat([prev.subarray(0, call.keep), Buffer.from(call.append, 'utf8')]);
      steps++;
      if (k % every !== 0 && k !== lines.length - 1) continue;
      const got = JSON.parse(out[k]).ids;
      const want = (await tok.encode(prev.toString('utf8'), null, { addSpecialTokens: true })).getIds();
      checked++;
      ids += want.length;
      if (got.length !== want.length || got.some((v, i) => v !== want[i])) {
        let i = 0;
        while (i < got.length && got[i] === want[i]) i++;
        console.error(`${file} step ${k}: differs from the reference at token ${i}`);
        process.exit(1);
      }
    }
  }
  console.log(JSON.stringify({ sessions: sessions.length, steps, checked, ids_compared: ids }));
})();
