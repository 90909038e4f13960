#!/usr/bin/env node
// toktier's /v1/responses answers as the `openai` npm client (6.49.0) reads
// them. Sends one Responses request plain and one streamed (the client's
// ResponseStream accumulates the events and throws on any it cannot place),
// prints each result as one JSON line:
//   {"mode": "plain"|"stream", "status", "output": [{"type", "text" | "name", "arguments", "call_id" | "reasoning"}], "usage"}
//   node openai_responses_check.mjs BASE_URL MODEL   (BASE_URL ends in /v1)
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../../tools/package.json"));
const {OpenAI} = require("openai");

const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({baseURL, apiKey: "sk-test", maxRetries: 0, timeout: 20000});
const request = {
  model,
  instructions: "You call tools.",
  input: [
    {type: "message", role: "developer", content: [{type: "input_text", text: "Answer in one sentence."}]},
    {type: "message", role: "user", content: "Weather in Paris?"},
  ],
  tools: [{type: "function", name: "get_weather", description: "The weather in a city.", strict: false,
           parameters: {type: "object", properties: {city: {type: "string"}}, required: ["city"]}}],
  max_output_tokens: 64,
  temperature: 0,
  store: false,
};
const item = (o) => {
  if (o.type === "message") {
    return {type: o.type, text: o.content.filter((c) => c.type === "output_text").map((c) => c.text).join("")};
  }
  if (o.type === "function_call") return {type: o.type, name: o.name, arguments: o.arguments, call_id: o.call_id};
  if (o.type === "reasoning") return {type: o.type, reasoning: (o.content ?? []).map((c) => c.text).join("")};
  return {type: o.type};
};
const summary = (mode, response) => {
  if (response.object !== "response") throw new Error(`object ${response.object}`);
  return {mode, status: response.status, output: response.output.map(item), usage: response.usage ?? null};
};
const plain = await client.responses.create(request);
console.log(JSON.stringify(summary("plain", plain)));
const stream = client.responses.stream(request);
const final = await stream.finalResponse();
console.log(JSON.stringify(summary("stream", final)));
