#!/usr/bin/env node
// Time to first token with a real engine (issue 10): long-context
// continuations sent straight to llama.cpp (it tokenizes the whole text) against
// the same continuations through toktier (it forwards token IDs). Two engine
// processes with the same model, one per path, so each path keeps its own
// prompt cache; the two paths' steps alternate, so both see the same machine.
//
//   node bench/ttft_real_engine.mjs --direct URL --engine-behind URL --proxy URL
//        --text FILE [--contexts 25000,100000,400000] [--steps 20] [--append 1500]
//
// Each step appends `append` characters (the next part of FILE) to the
// previous prompt and asks for one token (greedy). Prints one JSON line per
// step and a summary line per context and path, with the split: the engine's
// tokenization, its prefill (prompt_ms: the new tokens plus the first sample),
// the rest of the engine's time (reading and parsing the body), and what is
// left outside the engine (toktier and the loopback hops; for direct only
// the client's own hop).
import fs from "node:fs";
import http from "node:http";

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const direct = opt("--direct"), behind = opt("--engine-behind"), proxy = opt("--proxy");
const text = fs.readFileSync(opt("--text"), "utf8");
const contexts = opt("--contexts", "25000,100000,400000").split(",").map(Number);
const steps = Number(opt("--steps", "20"));
const append = Number(opt("--append", "1500"));
const model = opt("--model", "llama3.1");
const agent = new http.Agent({keepAlive: true, maxSockets: 1});

function post(url, path, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const t0 = process.hrtime.bigint();
    const req = http.request(url + path, {method: "POST", agent, headers: {
      "content-type": "application/json", "content-length": data.length, ...headers}}, (res) => {
      const parts = [];
      res.on("data", (c) => parts.push(c));
      res.on("end", () => {
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        const s = Buffer.concat(parts).toString("utf8");
        if (res.statusCode !== 200) return reject(new Error(`${url}${path}: ${res.statusCode} ${s.slice(0, 300)}`));
        resolve({ms, json: JSON.parse(s)});
      });
    });
    req.on("error", reject);
    req.end(data);
  });
}

async function metricSum(url, series) {
  return new Promise((resolve, reject) => {
    http.get(url + "/metrics", (res) => {
      let s = "";
      res.on("data", (c) => (s += c));
      res.on("end", () => {
        // Every series of the family (all paths), added up.
        let sum = 0;
        for (const l of s.split("\n")) if (l.startsWith(series)) sum += Number(l.split(" ").pop());
        resolve(sum);
      });
    }).on("error", reject);
  });
}

// A prefix cut at a character boundary (JS strings: do not split a surrogate pair).
function cut(n) {
  let e = Math.min(n, text.length);
  if (e < text.length && e > 0 && text.charCodeAt(e - 1) >= 0xd800 && text.charCodeAt(e - 1) < 0xdc00) e--;
  return text.slice(0, e);
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};

const tokSeries = "toktier_tokenization_seconds_sum";
for (const ctx of contexts) {
  if (ctx + steps * append > text.length) throw new Error(`--text has ${text.length} characters; need ${ctx + steps * append}`);
  const session = {"x-session-id": `ttft-${ctx}`};
  const base = {model, max_tokens: 1, temperature: 0};
  // Warm-up, not measured: both engines evaluate the base context once.
  await post(direct, "/v1/completions", {...base, prompt: cut(ctx)});
  await post(proxy, "/v1/completions", {...base, prompt: cut(ctx)}, session);
  const rows = {direct: [], toktier: []};
  for (let i = 1; i <= steps; i++) {
    const prompt = cut(ctx + i * append);
    for (const path of i % 2 ? ["direct", "toktier"] : ["toktier", "direct"]) {
      const before = path === "toktier" ? await metricSum(proxy, tokSeries) : 0;
      const r = path === "direct" ? await post(direct, "/v1/completions", {...base, prompt})
                                  : await post(proxy, "/v1/completions", {...base, prompt}, session);
      const t = r.json.timings;
      const row = {context_chars: ctx + i * append, path, step: i, ttft_ms: r.ms, prompt_tokens: r.json.usage.prompt_tokens,
                   evaluated_tokens: t.prompt_n, engine_tokenize_ms: t.tokenize_ms, engine_prefill_ms: t.prompt_ms,
                   engine_other_ms: t.request_ms - t.tokenize_ms - t.prompt_ms, outside_engine_ms: r.ms - t.request_ms,
                   toktier_tokenize_ms: path === "toktier" ? ((await metricSum(proxy, tokSeries)) - before) * 1e3 : 0};
      rows[path].push(row);
      console.log(JSON.stringify(row));
    }
  }
  for (const path of ["direct", "toktier"]) {
    const rs = rows[path];
    const med = (k) => pct(rs.map((r) => r[k]), 50);
    console.log(JSON.stringify({summary: true, context_chars: ctx, path, steps: rs.length,
      prompt_tokens: med("prompt_tokens"), ttft_ms_p50: med("ttft_ms"), ttft_ms_p90: pct(rs.map((r) => r.ttft_ms), 90),
      ttft_ms_max: Math.max(...rs.map((r) => r.ttft_ms)), evaluated_tokens_p50: med("evaluated_tokens"),
      engine_tokenize_ms_p50: med("engine_tokenize_ms"), engine_prefill_ms_p50: med("engine_prefill_ms"),
      engine_other_ms_p50: med("engine_other_ms"), outside_engine_ms_p50: med("outside_engine_ms"),
      toktier_tokenize_ms_p50: med("toktier_tokenize_ms")}));
  }
}
agent.destroy();
