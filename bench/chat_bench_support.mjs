// What the chat benchmarks (bench/chat_repair.mjs, bench/agent_turn.mjs)
// share: a timed HTTP request, percentiles, slicing the workload
// conversation, and starting a toktier process in front of the benchmark's
// engine.
import {spawn} from "node:child_process";
import http from "node:http";

// One request on `agent`; `data` is the body's bytes (undefined: none).
// Resolves with the status, the client-observed milliseconds and the body.
export function request(agent, url, method, path, data, headers = {}) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const req = http.request(url + path, {method, agent, headers: data ? {
      "content-type": "application/json", "content-length": data.length, ...headers} : headers}, (res) => {
      const parts = [];
      res.on("data", (c) => parts.push(c));
      res.on("end", () => resolve({status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6,
                                   body: Buffer.concat(parts).toString("utf8")}));
    });
    req.on("error", reject);
    req.end(data);
  });
}

export const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

// The first messages of `pool` whose content adds up to `chars`, then the
// next `turns` pairs of messages, appended one pair per turn.
export function conversation(pool, chars, turns) {
  const base = [];
  let n = 0, i = 0;
  while (n < chars && i < pool.length) {
    base.push(pool[i]);
    n += pool[i++].content.length;
  }
  if (n < chars) throw new Error(`the pool has only ${n} characters`);
  const extra = pool.slice(i, i + 2 * turns);
  if (extra.length < 2 * turns) throw new Error("the pool is too short for the turns");
  return {base, extra, chars: n};
}

// `toktier serve` with the models of tools/dev-models.json (tokenizer paths
// relative to the source tree) in front of `engineUrl`, no store, no shadow
// sampling; resolves once it listens. `onLog` gets its stderr after that.
export async function startToktier(toktier, engineUrl, extra, onLog = null) {
  const root = new URL("..", import.meta.url).pathname;
  const p = spawn(toktier, ["serve", "--config", `${root}tools/dev-models.json`, "--port", "0", "--backends",
                            engineUrl, "--data-dir", "", "--shadow-sample-rate", "0", ...extra],
                  {stdio: ["ignore", "ignore", "pipe"], cwd: root});
  let log = "";
  const port = await new Promise((resolve, reject) => {
    p.stderr.on("data", (c) => {
      if (onLog && log.includes("listening")) onLog(c);
      log += c;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) resolve(Number(m[1]));
    });
    p.on("exit", () => reject(new Error(`toktier exited: ${log}`)));
  });
  return {proc: p, url: `http://127.0.0.1:${port}`};
}
