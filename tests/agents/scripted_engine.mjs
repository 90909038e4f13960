#!/usr/bin/env node
// A scripted engine for the agent CLI end-to-end tests: it speaks only
// OpenAI /v1/completions (whole and SSE, with usage), reads the prompt as
// token IDs (a text prompt is refused: the test proves the tier sent IDs),
// decodes them with the reference tokenizer, and answers by a script:
//   - a prompt whose last turn is a tool result holding MARKER: the final
//     answer "The command printed MARKER.";
//   - a prompt whose last user turn asks for MARKER: a Hermes tool call of
//     TOOL with ARGS (JSON), as Qwen3 writes it;
//   - anything else (titles, summaries, probes): "ok".
// Every request is appended to LOG as one JSON line: {"ids": n, "prompt":
// decoded text, "answer"}.
//   node scripted_engine.mjs --port N --tokenizer PATH --marker M --tool NAME --args JSON --log FILE
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import {createRequire} from "node:module";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../tools/package.json"));
const {Tokenizer} = require("tokenizers");

const opt = {};
for (let i = 2; i < process.argv.length; i += 2) opt[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const tok = Tokenizer.fromString(fs.readFileSync(opt.tokenizer, "utf8"));
const marker = opt.marker;

// The text after the last "<|im_start|>" turn marker of a role.
function lastTurn(prompt) {
  const at = prompt.lastIndexOf("<|im_start|>user");
  return at < 0 ? "" : prompt.slice(at);
}

function answerFor(prompt) {
  const last = lastTurn(prompt);
  if (last.includes("<tool_response>") && last.includes(marker + "-done")) return `The command printed ${marker}-done.`;
  if (last.includes(marker) && !last.includes("<tool_response>")) {
    return `<tool_call>\n${JSON.stringify({name: opt.tool, arguments: JSON.parse(opt.args)})}\n</tool_call>`;
  }
  return "ok";
}

const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    if (req.url === "/health" || req.url === "/v1/models") {
      res.writeHead(200, {"Content-Type": "application/json"});
      return res.end(JSON.stringify({object: "list", data: [{id: "qwen3", object: "model"}]}));
    }
    if (req.method !== "POST" || req.url !== "/v1/completions") {
      res.writeHead(404, {"Content-Type": "application/json"});
      return res.end(JSON.stringify({error: {message: `no ${req.method} ${req.url} here`, type: "not_found"}}));
    }
    let r;
    try {
      r = JSON.parse(body);
    } catch {
      res.writeHead(400);
      return res.end("bad json");
    }
    if (!Array.isArray(r.prompt) || !r.prompt.every((x) => Number.isInteger(x))) {
      res.writeHead(400, {"Content-Type": "application/json"});
      return res.end(JSON.stringify({error: {message: "this engine takes token IDs only", type: "invalid_request_error"}}));
    }
    const prompt = await tok.decode(r.prompt, false);
    const answer = answerFor(prompt);
    fs.appendFileSync(opt.log, JSON.stringify({ids: r.prompt.length, prompt, answer}) + "\n");
    const usage = {prompt_tokens: r.prompt.length, completion_tokens: 7, total_tokens: r.prompt.length + 7};
    const base = {id: "cmpl-script", object: "text_completion", created: 1, model: r.model};
    if (!r.stream) {
      res.writeHead(200, {"Content-Type": "application/json"});
      return res.end(JSON.stringify({...base, choices: [{index: 0, text: answer, finish_reason: "stop"}], usage}));
    }
    res.writeHead(200, {"Content-Type": "text/event-stream"});
    const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
    for (let at = 0; at < answer.length; at += 8) {
      send({...base, choices: [{index: 0, text: answer.slice(at, at + 8), finish_reason: null}]});
    }
    send({...base, choices: [{index: 0, text: "", finish_reason: "stop"}]});
    if (r.stream_options && r.stream_options.include_usage) send({...base, choices: [], usage});
    res.end("data: [DONE]\n\n");
  });
});
server.listen(Number(opt.port), "127.0.0.1", () => console.log(`scripted engine on ${opt.port}`));
