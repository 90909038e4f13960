#!/usr/bin/env node
// A small OpenAI-compatible engine on llama.cpp (npm node-llama-cpp, its
// prebuilt CPU build): llama.cpp tokenizes, evaluates the model and samples.
// It is the engine of `tools/dev.sh run` and of the tests in tests/engine/.
//
//   node tools/engine/llama_engine.mjs --model NAME=FILE.gguf [--model ...]
//        [--host 127.0.0.1] [--port 8001] [--ctx 32768] [--threads 2] [--eog-after N]
//   --eog-after N: every answer ends after N tokens with finish_reason
//   "stop", as if the model sampled its end-of-generation token (a
//   random-weight model almost never does; agent CLIs take a length stop
//   for an error). 0 (default): only a real end of generation stops.
//
// Endpoints (vLLM's wire format):
//   GET  /health, GET /v1/models
//   POST /v1/completions   prompt: a string or token IDs (or a one-element list
//                          of either); max_tokens (null: to the end of the
//                          context), temperature (0: greedy),
//                          top_p, top_k, seed, stop, stream (SSE),
//                          stream_options.include_usage, add_special_tokens,
//                          return_token_ids (vLLM: prompt_token_ids and
//                          token_ids in the choice), cache_prompt (llama.cpp
//                          server: false evaluates the prompt from scratch)
//   POST /tokenize         {"model", "prompt", "add_special_tokens"} -> {"count", "max_model_len", "tokens"}
//   POST /detokenize       {"model", "tokens"} -> {"prompt"}
//
// Each model keeps one sequence; requests for a model run one at a time and
// the sequence's KV cache is reused up to the first token that differs from
// the previous request (plus the tokens it generated), as llama.cpp's server
// does per slot. Responses carry usage.prompt_tokens_details.cached_tokens
// and llama.cpp server-style "timings" (tokenize_ms, cache_n, prompt_n,
// prompt_ms, predicted_n, predicted_ms; request_ms from the request's arrival
// to its last byte), so tests and benchmarks can see what was evaluated and
// where the time went.
import http from "node:http";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

function parseArgs(argv) {
  const a = {host: "127.0.0.1", port: 8001, ctx: 32768, threads: 2, eogAfter: 0, models: []};
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${k}`);
    if (k === "--model") {
      const eq = v.indexOf("=");
      if (eq <= 0) throw new Error("--model expects NAME=FILE.gguf");
      a.models.push({name: v.slice(0, eq), path: v.slice(eq + 1)});
    } else if (k === "--host") a.host = v;
    else if (["--port", "--ctx", "--threads"].includes(k)) a[k.slice(2)] = Number(v);
    else if (k === "--eog-after") a.eogAfter = Number(v);
    else throw new Error(`unknown argument ${k}`);
    i++;
  }
  if (!a.models.length) throw new Error("at least one --model NAME=FILE.gguf");
  return a;
}

class HttpError extends Error {
  constructor(status, message, param = null) {
    super(message);
    this.status = status;
    this.param = param;
  }
}

function sendJson(res, status, obj) {
  const body = JSON.stringify(obj);
  res.writeHead(status, {"content-type": "application/json", "content-length": Buffer.byteLength(body)});
  res.end(body);
}

function sendError(res, status, message, param = null) {
  const type = status === 404 ? "NotFoundError" : status >= 500 ? "InternalServerError" : "BadRequestError";
  sendJson(res, status, {error: {message, type, param, code: status}});
}

const kMaxBody = 256 << 20;

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > kMaxBody) {
        reject(new HttpError(413, "request body too large"));
        req.destroy();
      } else {
        parts.push(c);
      }
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function parseJson(text) {
  try {
    const j = JSON.parse(text);
    if (j === null || typeof j !== "object" || Array.isArray(j)) throw new Error("not an object");
    return j;
  } catch (e) {
    throw new HttpError(400, `the body must be a JSON object: ${e.message}`);
  }
}

// One model: its weights, one context with one sequence, and a FIFO so one
// request at a time uses the sequence.
class Engine {
  constructor(name, model, context, maxLen) {
    this.name = name;
    this.model = model;
    this.context = context;
    this.sequence = context.getSequence();
    this.maxLen = maxLen;
    this.tail = Promise.resolve();
  }

  exclusive(fn) {
    const run = this.tail.then(fn, fn);
    this.tail = run.catch(() => {});
    return run;
  }

  tokenize(text, addSpecial) {
    const ids = this.model.tokenize(text, true);
    if (addSpecial && this.model.tokens.shouldPrependBosToken && this.model.tokens.bos !== null) {
      ids.unshift(this.model.tokens.bos);
    }
    return ids;
  }

  checkIds(ids, param) {
    const n = this.model.tokens.vocabularySize ?? this.model.fileInfo?.metadata?.llama?.vocab_size;
    for (const t of ids) {
      if (!Number.isInteger(t) || t < 0 || (n && t >= n)) {
        throw new HttpError(400, `token id ${JSON.stringify(t)} is out of the vocabulary`, param);
      }
    }
  }
}

function promptIds(engine, body, timings) {
  let p = body.prompt;
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) p = p[0];
  if (typeof p === "string") {
    const t0 = performance.now();
    const ids = engine.tokenize(p, body.add_special_tokens ?? true);
    timings.tokenize_ms = performance.now() - t0;
    return ids;
  }
  if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === "number")) {
    engine.checkIds(p, "prompt");
    timings.tokenize_ms = 0;
    return p;
  }
  if (Array.isArray(p) && p.length > 1) throw new HttpError(400, "only one prompt per request", "prompt");
  throw new HttpError(400, "prompt must be a non-empty string or a non-empty list of token ids", "prompt");
}

function samplingOptions(body) {
  const num = (k, lo, hi, dflt) => {
    const v = body[k] ?? dflt;
    if (typeof v !== "number" || !(v >= lo && v <= hi)) throw new HttpError(400, `${k} must be in [${lo}, ${hi}]`, k);
    return v;
  };
  // null: up to the end of the context (what vLLM does, and what chat
  // requests without a limit mean).
  const maxTokens = body.max_tokens === null ? null : num("max_tokens", 1, 1 << 20, 16);
  if (maxTokens !== null && !Number.isInteger(maxTokens)) {
    throw new HttpError(400, "max_tokens must be an integer", "max_tokens");
  }
  if ((body.n ?? 1) !== 1) throw new HttpError(400, "n must be 1", "n");
  if (body.logprobs !== undefined && body.logprobs !== null) throw new HttpError(400, "logprobs is not supported", "logprobs");
  if (body.echo) throw new HttpError(400, "echo is not supported", "echo");
  let stop = body.stop ?? [];
  if (typeof stop === "string") stop = [stop];
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string" && s.length > 0)) {
    throw new HttpError(400, "stop must be a string or a list of non-empty strings", "stop");
  }
  const temperature = num("temperature", 0, 2, 1);
  const evalOptions = {temperature};
  if (temperature > 0) {
    evalOptions.topP = num("top_p", 0, 1, 1);
    const topK = num("top_k", -1, 1 << 20, -1);
    if (topK > 0) evalOptions.topK = topK;
    if (body.seed !== undefined && body.seed !== null) evalOptions.seed = num("seed", 0, 2 ** 32 - 1, 0);
  }
  return {maxTokens, stop, evalOptions};
}

// Text after the last stop-free point: how much of `text` may be sent now
// without emitting a prefix of a stop string that a later token completes.
function safeLength(text, stops) {
  let keep = text.length;
  for (const s of stops) {
    for (let k = Math.min(s.length - 1, text.length); k > 0; k--) {
      if (text.endsWith(s.slice(0, k))) {
        keep = Math.min(keep, text.length - k);
        break;
      }
    }
  }
  // An unfinished UTF-8 character decodes to U+FFFD: hold it back.
  while (keep > 0 && text.charCodeAt(keep - 1) === 0xfffd) keep--;
  return keep;
}

// Runs one completion on the engine's sequence. onText(delta) receives text
// as it becomes final; returns {text, finishReason, usage, timings}.
async function complete(engine, ids, opts0, onText, signal, cachePrompt) {
  const opts = {...opts0, maxTokens: opts0.maxTokens ?? Math.max(1, engine.maxLen - ids.length)};
  if (ids.length + opts.maxTokens > engine.maxLen) {
    throw new HttpError(400, `This model's maximum context length is ${engine.maxLen} tokens. However, you requested ` +
                             `${ids.length + opts.maxTokens} tokens (${ids.length} in the prompt, ${opts.maxTokens} ` +
                             `for the completion).`, "max_tokens");
  }
  const seq = engine.sequence;
  const old = seq.contextTokens;
  let common = 0;
  const lim = cachePrompt ? Math.min(old.length, ids.length) : 0;
  while (common < lim && old[common] === ids[common]) common++;
  if (common === ids.length) common--;  // the last prompt token is evaluated again for its logits
  if (common < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{start: common, end: seq.nextTokenIndex}]);
  const timings = {cache_n: common, prompt_n: ids.length - common};
  const t0 = performance.now();
  let tFirst = 0;
  const generated = [];
  let text = "", sent = 0, finishReason = "length";
  for await (const token of seq.evaluate(ids.slice(common), opts.evalOptions)) {
    if (!tFirst) tFirst = performance.now();
    if (signal.aborted) { finishReason = "abort"; break; }
    if (engine.model.isEogToken(token)) { finishReason = "stop"; break; }
    generated.push(token);
    // --eog-after N: the model's end of generation comes after N tokens (a
    // random-weight model samples it almost never; agent CLIs take a length
    // stop for an error).
    if (engine.eogAfter && generated.length >= engine.eogAfter) finishReason = "stop";
    text = engine.model.detokenize(generated, false);
    let hit = -1;
    for (const s of opts.stop) {
      const at = text.indexOf(s, Math.max(0, sent - s.length));
      if (at >= 0 && (hit < 0 || at < hit)) hit = at;
    }
    if (hit >= 0) {
      text = text.slice(0, hit);
      finishReason = "stop";
      break;
    }
    if (generated.length >= opts.maxTokens || finishReason === "stop") break;
    const ok = safeLength(text, opts.stop);
    if (ok > sent) {
      onText(text.slice(sent, ok));
      sent = ok;
    }
  }
  if (text.length > sent) onText(text.slice(sent));
  const tEnd = performance.now();
  timings.prompt_ms = (tFirst || tEnd) - t0;
  timings.predicted_n = generated.length;
  timings.predicted_ms = tEnd - (tFirst || tEnd);
  const usage = {prompt_tokens: ids.length, completion_tokens: generated.length,
                 total_tokens: ids.length + generated.length, prompt_tokens_details: {cached_tokens: common}};
  return {text, finishReason, usage, timings, generated};
}

let counter = 0;
const nextId = () => `cmpl-${process.pid.toString(16)}${(++counter).toString(16).padStart(8, "0")}`;

async function handleCompletion(engines, req, res, body, tArrive) {
  const engine = engines.get(body.model);
  if (!engine) throw new HttpError(404, `The model \`${body.model}\` does not exist.`, "model");
  const opts = samplingOptions(body);
  const stream = body.stream === true;
  const includeUsage = stream && body.stream_options?.include_usage === true;
  const returnIds = body.return_token_ids === true;
  const cachePrompt = body.cache_prompt !== false;
  const abort = new AbortController();
  res.on("close", () => { if (!res.writableFinished) abort.abort(); });
  const id = nextId(), created = Math.floor(Date.now() / 1000);
  const chunk = (choices, extra = {}) =>
    ({id, object: "text_completion", created, model: body.model, choices, ...extra});
  await engine.exclusive(async () => {
    const timings = {};
    const ids = promptIds(engine, body, timings);
    if (stream) {
      let started = false;
      const start = () => {
        if (started) return;
        started = true;
        res.writeHead(200, {"content-type": "text/event-stream", "cache-control": "no-cache"});
      };
      let first = true;
      const r = await complete(engine, ids, opts, (delta) => {
        start();
        const c = {index: 0, text: delta, logprobs: null, finish_reason: null};
        if (returnIds && first) c.prompt_token_ids = ids;
        first = false;
        res.write(`data: ${JSON.stringify(chunk([c]))}\n\n`);
      }, abort.signal, cachePrompt);
      if (r.finishReason === "abort") return;
      start();
      Object.assign(timings, r.timings);
      const last = {index: 0, text: "", logprobs: null, finish_reason: r.finishReason};
      if (returnIds) {
        if (first) last.prompt_token_ids = ids;
        last.token_ids = r.generated;
      }
      timings.request_ms = performance.now() - tArrive;
      res.write(`data: ${JSON.stringify(chunk([last], {timings}))}\n\n`);
      if (includeUsage) res.write(`data: ${JSON.stringify(chunk([], {usage: r.usage}))}\n\n`);
      res.end("data: [DONE]\n\n");
    } else {
      const r = await complete(engine, ids, opts, () => {}, abort.signal, cachePrompt);
      if (r.finishReason === "abort") return;
      Object.assign(timings, r.timings);
      const c = {index: 0, text: r.text, logprobs: null, finish_reason: r.finishReason};
      if (returnIds) Object.assign(c, {prompt_token_ids: ids, token_ids: r.generated});
      timings.request_ms = performance.now() - tArrive;
      sendJson(res, 200, chunk([c], {usage: r.usage, timings}));
    }
  });
}

function route(engines) {
  return async (req, res) => {
    const tArrive = performance.now();
    try {
      const url = req.url.split("?")[0];
      if (req.method === "GET" && url === "/health") return sendJson(res, 200, {status: "ok"});
      if (req.method === "GET" && url === "/v1/models") {
        return sendJson(res, 200, {object: "list", data: [...engines.values()].map((e) => (
          {id: e.name, object: "model", created: 0, owned_by: "toktier-tiny-llama", max_model_len: e.maxLen}))});
      }
      if (req.method !== "POST" || !["/v1/completions", "/tokenize", "/detokenize"].includes(url)) {
        throw new HttpError(404, `no route for ${req.method} ${url}`);
      }
      const body = parseJson(await readBody(req));
      if (url === "/v1/completions") return await handleCompletion(engines, req, res, body, tArrive);
      const engine = engines.get(body.model);
      if (!engine) throw new HttpError(404, `The model \`${body.model}\` does not exist.`, "model");
      if (url === "/tokenize") {
        if (typeof body.prompt !== "string") throw new HttpError(400, "prompt must be a string", "prompt");
        const tokens = engine.tokenize(body.prompt, body.add_special_tokens ?? true);
        return sendJson(res, 200, {count: tokens.length, max_model_len: engine.maxLen, tokens});
      }
      if (!Array.isArray(body.tokens)) throw new HttpError(400, "tokens must be a list of token ids", "tokens");
      engine.checkIds(body.tokens, "tokens");
      return sendJson(res, 200, {prompt: engine.model.detokenize(body.tokens, true)});
    } catch (e) {
      if (res.headersSent) {
        res.destroy();
      } else if (e instanceof HttpError) {
        sendError(res, e.status, e.message, e.param);
      } else {
        console.error(`llama_engine: ${e.stack ?? e}`);
        sendError(res, 500, String(e.message ?? e));
      }
    }
  };
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const llama = await getLlama({gpu: false, build: "never", logLevel: LlamaLogLevel.error});
  const engines = new Map();
  for (const m of a.models) {
    const model = await llama.loadModel({modelPath: m.path});
    const maxLen = Math.min(a.ctx, model.trainContextSize);
    const context = await model.createContext({contextSize: maxLen, threads: a.threads, batchSize: 2048});
    const engine = new Engine(m.name, model, context, maxLen);
    engine.eogAfter = a.eogAfter;
    engines.set(m.name, engine);
  }
  const server = http.createServer({keepAliveTimeout: 120000, requestTimeout: 0}, route(engines));
  server.listen(a.port, a.host, () => {
    const {port} = server.address();
    console.error(`llama_engine: listening on http://${a.host}:${port} (${[...engines.keys()].join(", ")}; ` +
                  `context ${a.ctx} tokens, ${a.threads} threads)`);
  });
  const stop = () => server.close(() => process.exit(0));
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}

main().catch((e) => {
  console.error(`llama_engine: ${e.stack ?? e}`);
  process.exit(1);
});
