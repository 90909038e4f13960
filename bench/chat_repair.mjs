#!/usr/bin/env node
// Chat repair per turn (issue 11): a conversation grows turn by turn (an
// assistant answer and a user message each, from the shared workloads) and
// every turn is sent as /v1/chat/completions (chat_forward "sglang") through
// two toktier processes: one with state (the rendered prompt repairs its
// session's tokens) and one without (--state off: the rendered prompt is
// tokenized in full every time, the stateless path), alternating. The engine
// is a minimal one in this process that keeps the input_ids it receives:
// every turn's IDs from the two proxies must be equal (checked before any
// figure is reported).
//
//   node bench/chat_repair.mjs --toktier build/release/cli/toktier --conversation FILE.json
//        [--contexts 100000,1000000] [--turns 30]
//
// FILE.json: [{role, content}, ...] (bench/chat_repair.sh makes it from the
// workloads). Prints a JSON line per context and path: the client's time per
// turn (P50, P90, P99) and toktier's tokenization time per turn.
import fs from "node:fs";
import http from "node:http";

import {conversation, pct, request, startToktier} from "./chat_bench_support.mjs";
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const toktier = opt("--toktier");
const pool = JSON.parse(fs.readFileSync(opt("--conversation"), "utf8"));  // [{role, content}], long
const contexts = opt("--contexts", "100000,1000000").split(",").map(Number);
const turns = Number(opt("--turns", "30"));
const model = opt("--model", "qwen3");
const agent = new http.Agent({keepAlive: true, maxSockets: 2});

async function tokenizeSeconds(url) {
  const r = await request(agent, url, "GET", "/metrics");
  let sum = 0;
  for (const l of r.body.split("\n")) if (l.startsWith("toktier_tokenization_seconds_sum")) sum += Number(l.split(" ").pop());
  return sum;
}

// The engine: answers every chat request at once and keeps its input_ids.
const received = [];
const engine = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (c) => parts.push(c));
  req.on("end", () => {
    if (req.url === "/health") return res.end("{}");
    const j = JSON.parse(Buffer.concat(parts).toString("utf8"));
    received.push(j.input_ids ?? null);
    res.setHeader("content-type", "application/json");
    res.end(JSON.stringify({id: "chatcmpl-bench", object: "chat.completion", created: 0, model: j.model,
      choices: [{index: 0, message: {role: "assistant", content: "ok"}, finish_reason: "length"}],
      usage: {prompt_tokens: (j.input_ids ?? []).length, completion_tokens: 1, total_tokens: 1}}));
  });
});
await new Promise((r) => engine.listen(0, "127.0.0.1", r));
const enginePort = engine.address().port;

const startProxy = (extra) => startToktier(toktier, `http://127.0.0.1:${enginePort}`, ["--chat-forward", "sglang", ...extra]);
const proxies = {stateful: await startProxy([]), stateless: await startProxy(["--state", "off"])};
const urls = {stateful: proxies.stateful.url, stateless: proxies.stateless.url};
let verified = 0;

for (const ctx of contexts) {
  const {base, extra, chars} = conversation(pool, ctx, turns);
  const rows = {stateful: [], stateless: []};
  const tok = {stateful: [], stateless: []};
  const session = {"x-session-id": `chat-bench-${ctx}`};
  for (let t = 0; t <= turns; t++) {
    const messages = [...base, ...extra.slice(0, 2 * t)];
    if (messages.at(-1).role !== "user") messages.push({role: "user", content: "Go on."});
    const body = {model, messages, max_tokens: 1, temperature: 0};
    for (const path of t % 2 ? ["stateful", "stateless"] : ["stateless", "stateful"]) {
      const before = await tokenizeSeconds(urls[path]);
      const r = await request(agent, urls[path], "POST", "/v1/chat/completions", Buffer.from(JSON.stringify(body)), session);
      if (r.status !== 200) throw new Error(`${path}: ${r.status} ${r.body.slice(0, 200)}`);
      if (!received.at(-1)) throw new Error(`${path}: the engine got no input_ids`);
      const dt = ((await tokenizeSeconds(urls[path])) - before) * 1e3;
      if (t > 0) {  // turn 0 builds the state (a full tokenization on both)
        rows[path].push(r.ms);
        tok[path].push(dt);
      }
    }
    // Both proxies' IDs for this turn (the last two engine requests).
    const [a, b] = received.slice(-2);
    if (a.length !== b.length || a.some((x, k) => x !== b[k])) throw new Error(`turn ${t}: the IDs differ`);
    verified++;
    received.length = 0;
  }
  for (const path of ["stateful", "stateless"]) {
    console.log(JSON.stringify({context_chars: chars, path, turns: rows[path].length,
      turn_ms_p50: pct(rows[path], 50), turn_ms_p90: pct(rows[path], 90), turn_ms_p99: pct(rows[path], 99),
      tokenize_ms_p50: pct(tok[path], 50), tokenize_ms_p90: pct(tok[path], 90)}));
  }
}
console.log(JSON.stringify({verified_turns: verified}));
agent.destroy();
for (const p of Object.values(proxies)) p.proc.kill();
engine.close();
