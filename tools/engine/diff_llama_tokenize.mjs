#!/usr/bin/env node
// llama.cpp's tokenizer (node-llama-cpp, on a GGUF from make_gguf.mjs)
// against the Hugging Face reference (npm `tokenizers`, which toktier equals)
// on JSON lines of {"text": ...}. Prints one JSON summary line:
//   {"texts", "chars", "equal", "differ", "examples": [{"line", "kind", "at", "text", "hf", "llama"}]}
// where each example is cut to the first differing token (+- a few tokens).
// Exit 0 whatever the count: a difference is a finding about llama.cpp, and
// the caller decides what it expects.
//
//   node tools/engine/diff_llama_tokenize.mjs --gguf FILE --tokenizer tokenizer.json
//        [--add-special-tokens] [--max-examples N] [--nfc-first] < corpus.jsonl
// --nfc-first gives llama.cpp the NFC form of each text (what HF's NFC
// normalizer would see), to tell a missing normalizer from other causes.
import fs from "node:fs";
import {createRequire} from "node:module";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const require = createRequire(import.meta.url);
const {Tokenizer} = require("tokenizers");

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const addSpecial = args.includes("--add-special-tokens");
const maxExamples = Number(opt("--max-examples", "5"));
const nfcFirst = args.includes("--nfc-first");

const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: opt("--gguf")});
const hf = Tokenizer.fromString(fs.readFileSync(opt("--tokenizer"), "utf8"));

const lines = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.length);
const out = {texts: 0, chars: 0, equal: 0, differ: 0, examples: []};
for (let i = 0; i < lines.length; i++) {
  const {text, kind} = JSON.parse(lines[i]);
  const theirs = model.tokenize(nfcFirst ? text.normalize("NFC") : text, true);
  if (addSpecial && model.tokens.shouldPrependBosToken) theirs.unshift(model.tokens.bos);
  const ours = (await hf.encode(text, null, {addSpecialTokens: addSpecial})).getIds();
  out.texts++;
  out.chars += text.length;
  let at = 0;
  while (at < ours.length && at < theirs.length && ours[at] === theirs[at]) at++;
  if (at === ours.length && at === theirs.length) {
    out.equal++;
    continue;
  }
  out.differ++;
  if (out.examples.length < maxExamples) {
    const lo = Math.max(0, at - 3);
    const piece = (ids) => ids.slice(lo, at + 4);
    const start = lo === 0 ? 0 : model.detokenize(ours.slice(0, lo), true).length;
    out.examples.push({line: i, kind, at, text: model.detokenize(piece(ours), true).slice(0, 200),
                       context: text.slice(Math.max(0, start - 20), start + 60), hf: piece(ours), llama: piece(theirs)});
  }
}
console.log(JSON.stringify(out));
process.exit(0);
