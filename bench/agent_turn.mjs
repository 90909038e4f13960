#!/usr/bin/env node
// The time toktier adds to an agent's turn (issue 37, docs/benchmarks.md):
// a conversation grows one assistant answer and one user message per turn
// and each turn is sent, alternating, straight to the engine (direct),
// through toktier without state (--state off: render and tokenize in full)
// and through toktier with state (the rendered prompt repairs the session's
// tokens), as /v1/chat/completions, /v1/messages and /v1/responses.
//
//   node bench/agent_turn.mjs --toktier build/release/cli/toktier --conversation FILE.json
//        [--contexts 100000,1000000] [--turns 20] [--apis chat,messages,responses]
//        [--modes completions,sglang] [--log-requests]
//
// The engine is a minimal one in this process that answers as soon as it
// has read a body (whatever it is sent: a chat, Messages or Responses body
// directly, token IDs through toktier), so the difference between the
// direct time and the time through toktier is what toktier adds. It keeps
// every body: after each context the IDs the two toktier processes sent for
// each turn must be equal, and the number of IDs must not be zero (checked
// before any figure is printed). Prints a JSON line per mode, API, context
// and path: the client's time per turn (P50, P90, P99), the added time
// (path minus direct, per turn), and toktier's CPU time per turn.
import fs from "node:fs";
import http from "node:http";

import {conversation, pct, request, startToktier} from "./chat_bench_support.mjs";

const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const toktier = opt("--toktier");
const pool = JSON.parse(fs.readFileSync(opt("--conversation"), "utf8"));  // [{role, content}], long
const contexts = opt("--contexts", "100000,1000000").split(",").map(Number);
const turns = Number(opt("--turns", "20"));
const apis = opt("--apis", "chat,messages,responses").split(",");
const modes = opt("--modes", "completions,sglang").split(",");
const model = opt("--model", "qwen3");
const logRequests = args.includes("--log-requests");
const agent = new http.Agent({keepAlive: true, maxSockets: 4});
const clockTick = 100;  // USER_HZ: /proc/PID/stat counts CPU time in 1/100 s

const round = (x) => Math.round(x * 1000) / 1000;

// One turn's body in each API, as the agents send it.
function bodyOf(api, messages) {
  if (api === "chat") return {model, messages, max_tokens: 1, temperature: 0};
  const system = messages[0].role === "system" ? messages[0].content : undefined;
  const rest = system === undefined ? messages : messages.slice(1);
  if (api === "messages") {
    return {model, max_tokens: 1, ...(system === undefined ? {} : {system: [{type: "text", text: system}]}),
            messages: rest.map((m) => ({role: m.role === "assistant" ? "assistant" : "user",
                                        content: [{type: "text", text: m.content}]}))};
  }
  return {model, max_output_tokens: 16, store: false, ...(system === undefined ? {} : {instructions: system}),
          input: rest.map((m) => ({type: "message", role: m.role === "assistant" ? "assistant" : "user",
                                   content: [{type: m.role === "assistant" ? "output_text" : "input_text",
                                              text: m.content}]}))};
}
const pathOf = {chat: "/v1/chat/completions", messages: "/v1/messages", responses: "/v1/responses"};

// The engine: answers every request as soon as its body is in, in the shape
// its path expects, and keeps the body.
const received = [];
const engine = http.createServer((req, res) => {
  const parts = [];
  req.on("data", (c) => parts.push(c));
  req.on("end", () => {
    if (req.url === "/health") return res.end("{}");
    received.push(Buffer.concat(parts));
    res.setHeader("content-type", "application/json");
    const usage = {prompt_tokens: 1, completion_tokens: 1, total_tokens: 2};
    if (req.url.startsWith("/v1/completions")) {
      return res.end(JSON.stringify({id: "cmpl-bench", object: "text_completion", created: 0, model,
        choices: [{index: 0, text: "ok", finish_reason: "length"}], usage}));
    }
    if (req.url.startsWith("/v1/messages")) {
      return res.end(JSON.stringify({id: "msg_bench", type: "message", role: "assistant", model,
        content: [{type: "text", text: "ok"}], stop_reason: "max_tokens", stop_sequence: null,
        usage: {input_tokens: 1, output_tokens: 1}}));
    }
    if (req.url.startsWith("/v1/responses")) {
      return res.end(JSON.stringify({id: "resp_bench", object: "response", created_at: 0, status: "completed",
        model, output: [{type: "message", id: "msg_bench", status: "completed", role: "assistant",
                         content: [{type: "output_text", text: "ok", annotations: []}]}],
        usage: {input_tokens: 1, output_tokens: 1, total_tokens: 2}}));
    }
    res.end(JSON.stringify({id: "chatcmpl-bench", object: "chat.completion", created: 0, model,
      choices: [{index: 0, message: {role: "assistant", content: "ok"}, finish_reason: "length"}], usage}));
  });
});
await new Promise((r) => engine.listen(0, "127.0.0.1", r));
const engineUrl = `http://127.0.0.1:${engine.address().port}`;

const startProxy = (mode, extra) =>
  startToktier(toktier, engineUrl, ["--chat-forward", mode, ...(logRequests ? ["--log-requests", "true"] : []), ...extra],
               logRequests ? (c) => process.stderr.write(c) : null);

// utime + stime of a process, in ms.
function cpuMs(pid) {
  const f = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = f.slice(f.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTick;
}

// The token IDs of a body toktier sent: "prompt" (completions mode) or
// "input_ids" (sglang mode).
function idsOf(buf) {
  const j = JSON.parse(buf.toString("utf8"));
  const ids = j.input_ids ?? j.prompt;
  if (!Array.isArray(ids) || ids.length === 0 || typeof ids[0] !== "number") throw new Error("a body without IDs");
  return ids;
}

let verified = 0;
for (const mode of modes) {
  const proxies = {stateful: await startProxy(mode, []), stateless: await startProxy(mode, ["--state", "off"])};
  for (const ctx of contexts) {
    const {base, extra, chars} = conversation(pool, ctx, turns);
    for (const api of apis) {
      const ms = {direct: [], stateless: [], stateful: []};
      const sent = [];  // per turn: {stateless, stateful} engine bodies
      // A session per mode, context and API: its first turn builds the state.
      const session = {"x-session-id": `agent-turn-${mode}-${ctx}-${api}`};
      let cpuStart = null;
      for (let t = 0; t <= turns; t++) {
        const messages = [...base, ...extra.slice(0, 2 * t)];
        if (messages.at(-1).role !== "user") messages.push({role: "user", content: "Go on."});
        const data = Buffer.from(JSON.stringify(bodyOf(api, messages)));
        const order = [["direct", "stateless", "stateful"], ["stateful", "direct", "stateless"],
                       ["stateless", "stateful", "direct"]][t % 3];
        const bodies = {};
        for (const path of order) {
          const url = path === "direct" ? engineUrl : proxies[path].url;
          received.length = 0;
          const r = await request(agent, url, "POST", pathOf[api], data, session);
          if (r.status !== 200) throw new Error(`${mode} ${api} ${path}: ${r.status} ${r.body.slice(0, 300)}`);
          if (received.length !== 1) throw new Error(`${mode} ${api} ${path}: the engine got ${received.length} requests`);
          bodies[path] = received[0];
          if (t > 0) ms[path].push(r.ms);  // turn 0 builds the state (a full tokenization on both)
        }
        if (t === 0) cpuStart = {stateless: cpuMs(proxies.stateless.proc.pid), stateful: cpuMs(proxies.stateful.proc.pid)};
        sent.push({stateless: bodies.stateless, stateful: bodies.stateful});
      }
      const cpu = {stateless: cpuMs(proxies.stateless.proc.pid) - cpuStart.stateless,
                   stateful: cpuMs(proxies.stateful.proc.pid) - cpuStart.stateful};
      // Verify first: both toktier paths sent the same IDs every turn.
      for (const [t, s] of sent.entries()) {
        const a = idsOf(s.stateless), b = idsOf(s.stateful);
        if (a.length !== b.length || a.some((x, k) => x !== b[k])) throw new Error(`${mode} ${api} turn ${t}: the IDs differ`);
        verified++;
      }
      for (const path of ["direct", "stateless", "stateful"]) {
        const row = {mode, api, context_chars: chars, path, turns: ms[path].length,
                     turn_ms_p50: round(pct(ms[path], 50)), turn_ms_p90: round(pct(ms[path], 90)),
                     turn_ms_p99: round(pct(ms[path], 99))};
        if (path !== "direct") {
          const added = ms[path].map((x, k) => x - ms.direct[k]);
          Object.assign(row, {added_ms_p50: round(pct(added, 50)), added_ms_p90: round(pct(added, 90)),
                              added_ms_p99: round(pct(added, 99)), cpu_ms_per_turn: round(cpu[path] / turns)});
        }
        console.log(JSON.stringify(row));
      }
    }
  }
  for (const p of Object.values(proxies)) p.proc.kill();
}
console.log(JSON.stringify({verified_turns: verified}));
agent.destroy();
engine.close();
