#!/usr/bin/env node
// Writes a tiny llama-architecture GGUF whose tokenizer is a real one we ship
// (vocabulary, merges, added tokens and llama.cpp's pre-tokenizer type taken
// from a Hugging Face tokenizer.json) and whose weights are small, fixed
// pseudo-random numbers. llama.cpp then tokenizes, evaluates and samples for
// real; only the model's "knowledge" is fake. The same arguments always give
// the same bytes (no clock, no randomness from outside).
//
//   node tools/engine/make_gguf.mjs --tokenizer DIR/tokenizer.json \
//        --pre llama-bpe --out model.gguf [--name NAME] [--layers 2] [--embd 64]
//
// DIR/tokenizer_config.json, when present, gives bos/eos and the chat template.
import fs from "node:fs";
import path from "node:path";

function parseArgs(argv) {
  const a = {layers: 2, embd: 64, heads: 4, ff: 192, ctx: 131072, seed: 20261201};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = argv[i + 1];
    if (!k.startsWith("--") || v === undefined) throw new Error(`bad argument ${k}`);
    a[k.slice(2)] = ["layers", "embd", "heads", "ff", "ctx", "seed"].includes(k.slice(2)) ? Number(v) : v;
    i++;
  }
  for (const need of ["tokenizer", "pre", "out"]) if (!a[need]) throw new Error(`--${need} is required`);
  return a;
}

// GGUF v3 value types (ggml/include/gguf.h).
const T = {U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10};

class Writer {
  constructor() {
    this.chunks = [];
    this.size = 0;
  }
  push(buf) {
    this.chunks.push(buf);
    this.size += buf.length;
  }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  str(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.push(b); }
  pad(align) { const r = this.size % align; if (r) this.push(Buffer.alloc(align - r)); }
}

function writeKv(w, key, type, value, elemType) {
  w.str(key);
  w.u32(type);
  const one = (t, v) => {
    switch (t) {
      case T.U32: w.u32(v); break;
      case T.I32: w.i32(v); break;
      case T.F32: w.f32(v); break;
      case T.BOOL: w.push(Buffer.from([v ? 1 : 0])); break;
      case T.STR: w.str(v); break;
      default: throw new Error(`unsupported GGUF type ${t}`);
    }
  };
  if (type === T.ARR) {
    w.u32(elemType);
    w.u64(value.length);
    if (elemType === T.I32) {
      const b = Buffer.alloc(4 * value.length);
      value.forEach((v, i) => b.writeInt32LE(v, 4 * i));
      w.push(b);
    } else {
      for (const v of value) one(elemType, v);
    }
  } else {
    one(type, value);
  }
}

// mulberry32: a small, fixed PRNG so the weights never depend on the platform.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const F32 = 0, F16 = 1;  // ggml_type

// IEEE half precision, round to nearest even (the values here are small and
// normal; subnormals flush to zero, which is exact enough for fake weights).
function toHalf(values) {
  const out = new Uint16Array(values.length);
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  for (let i = 0; i < values.length; i++) {
    f[0] = values[i];
    const x = u[0];
    const sign = (x >>> 16) & 0x8000;
    const exp = ((x >>> 23) & 0xff) - 127 + 15;
    let mant = x & 0x7fffff;
    if (exp <= 0) { out[i] = sign; continue; }
    let h = sign | (exp << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1))) h++;
    out[i] = h;
  }
  return out;
}

const kControlLooking = new Set(["</s>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                                 "<|repo_name|>", "<|file_sep|>"]);

function vocabulary(tok) {
  if (tok.model?.type !== "BPE") throw new Error(`only BPE tokenizers (got ${tok.model?.type})`);
  let n = 0;
  for (const id of Object.values(tok.model.vocab)) n = Math.max(n, id + 1);
  for (const t of tok.added_tokens) n = Math.max(n, t.id + 1);
  const tokens = new Array(n).fill(null);
  const types = new Array(n).fill(1);  // NORMAL
  for (const [piece, id] of Object.entries(tok.model.vocab)) tokens[id] = piece;
  for (const t of tok.added_tokens) {
    tokens[t.id] = t.content;
    // CONTROL : USER_DEFINED (what convert_hf_to_gguf.py writes). llama.cpp
    // turns a few well-known non-special added tokens into CONTROL at load
    // (with a warning); writing that type here changes nothing but the noise.
    types[t.id] = t.special || kControlLooking.has(t.content) ? 3 : 4;
  }
  for (let i = 0; i < n; i++) {
    if (tokens[i] === null) {  // holes in the id space
      tokens[i] = `[PAD${i}]`;
      types[i] = 5;  // UNUSED
    }
  }
  const merges = tok.model.merges.map((m) => (Array.isArray(m) ? m.join(" ") : m));
  return {tokens, types, merges};
}

function main() {
  const a = parseArgs(process.argv.slice(2));
  const tok = JSON.parse(fs.readFileSync(a.tokenizer, "utf8"));
  const cfgPath = path.join(path.dirname(a.tokenizer), "tokenizer_config.json");
  const cfg = fs.existsSync(cfgPath) ? JSON.parse(fs.readFileSync(cfgPath, "utf8")) : {};
  const {tokens, types, merges} = vocabulary(tok);
  const idOf = (content) => {
    const c = typeof content === "object" && content ? content.content : content;
    const t = tok.added_tokens.find((x) => x.content === c);
    return t ? t.id : tok.model.vocab[c];
  };
  // BOS is added when the HF post-processor adds one (Llama 3: yes; Qwen: no).
  const addsBos = JSON.stringify(tok.post_processor ?? {}).includes("SpecialToken");
  const bos = idOf(cfg.bos_token) ?? idOf("<|begin_of_text|>") ?? idOf("<|endoftext|>");
  const eos = idOf(cfg.eos_token) ?? bos;

  const nVocab = tokens.length, nEmbd = a.embd, nFf = a.ff, nHead = a.heads;
  const kv = [
    ["general.architecture", T.STR, "llama"],
    ["general.name", T.STR, a.name ?? `toktier-tiny-${path.basename(path.dirname(path.dirname(a.tokenizer)))}`],
    ["general.alignment", T.U32, 32],
    ["llama.context_length", T.U32, a.ctx],
    ["llama.embedding_length", T.U32, nEmbd],
    ["llama.block_count", T.U32, a.layers],
    ["llama.feed_forward_length", T.U32, nFf],
    ["llama.attention.head_count", T.U32, nHead],
    ["llama.attention.head_count_kv", T.U32, nHead],
    ["llama.attention.layer_norm_rms_epsilon", T.F32, 1e-5],
    ["llama.rope.freq_base", T.F32, 500000],
    ["llama.rope.dimension_count", T.U32, nEmbd / nHead],
    ["llama.vocab_size", T.U32, nVocab],
    ["tokenizer.ggml.model", T.STR, "gpt2"],
    ["tokenizer.ggml.pre", T.STR, a.pre],
    ["tokenizer.ggml.tokens", T.ARR, tokens, T.STR],
    ["tokenizer.ggml.token_type", T.ARR, types, T.I32],
    ["tokenizer.ggml.merges", T.ARR, merges, T.STR],
    ["tokenizer.ggml.bos_token_id", T.U32, bos],
    ["tokenizer.ggml.eos_token_id", T.U32, eos],
    ["tokenizer.ggml.add_bos_token", T.BOOL, addsBos],
  ];
  if (typeof cfg.chat_template === "string") kv.push(["tokenizer.chat_template", T.STR, cfg.chat_template]);

  // Tensors (ggml order: ne[0] is the input dimension). The output matrix is
  // its own (tied embeddings make a random model repeat its last token). The
  // two vocabulary-sized matrices are F16, the rest F32.
  const tensors = [["token_embd.weight", [nEmbd, nVocab], 0.5, F16], ["output_norm.weight", [nEmbd], null],
                   ["output.weight", [nEmbd, nVocab], 0.5, F16]];
  for (let l = 0; l < a.layers; l++) {
    const p = `blk.${l}.`;
    tensors.push([p + "attn_norm.weight", [nEmbd], null], [p + "attn_q.weight", [nEmbd, nEmbd]],
                 [p + "attn_k.weight", [nEmbd, nEmbd]], [p + "attn_v.weight", [nEmbd, nEmbd]],
                 [p + "attn_output.weight", [nEmbd, nEmbd]], [p + "ffn_norm.weight", [nEmbd], null],
                 [p + "ffn_gate.weight", [nEmbd, nFf]], [p + "ffn_up.weight", [nEmbd, nFf]],
                 [p + "ffn_down.weight", [nFf, nEmbd]]);
  }
  const w = new Writer();
  w.push(Buffer.from("GGUF", "ascii"));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(kv.length);
  for (const [k, t, v, e] of kv) writeKv(w, k, t, v, e);
  let offset = 0;
  const datas = [];
  const next = rng(a.seed);
  for (const [name, dims, scale, type = F32] of tensors) {
    const count = dims.reduce((x, y) => x * y, 1);
    const values = new Float32Array(count);
    if (scale === null) {
      values.fill(1);  // norms
    } else {
      const s = scale ?? 1 / Math.sqrt(dims[0]);
      for (let i = 0; i < count; i++) values[i] = (next() * 2 - 1) * s;
    }
    const data = type === F16 ? toHalf(values) : values;
    w.str(name);
    w.u32(dims.length);
    for (const d of dims) w.u64(d);
    w.u32(type);
    w.u64(offset);
    datas.push(data);
    offset += Math.ceil(data.byteLength / 32) * 32;
  }
  w.pad(32);
  for (const d of datas) {
    w.push(Buffer.from(d.buffer, d.byteOffset, d.byteLength));
    w.pad(32);
  }
  fs.mkdirSync(path.dirname(path.resolve(a.out)), {recursive: true});
  const tmp = `${a.out}.tmp${process.pid}`;
  fs.writeFileSync(tmp, Buffer.concat(w.chunks));
  fs.renameSync(tmp, a.out);
  console.error(`make_gguf: ${a.out}: ${nVocab} tokens, ${merges.length} merges, pre=${a.pre}, ` +
                `${a.layers} layers x ${nEmbd}, ${(w.size / 1048576).toFixed(1)} MiB`);
}

main();
