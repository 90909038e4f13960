#!/usr/bin/env node
// Issue 11: toktier's chat answers as the `openai` npm client (6.49.0) reads
// them. Sends one chat request plain and one streamed (the client's stream
// helper accumulates the deltas and validates the chunks), prints each
// result's first choice as one JSON line:
//   {"mode": "plain"|"stream", "finish_reason", "content", "reasoning", "tool_calls": [{"id","name","arguments"}]}
//   node openai_chat_check.mjs BASE_URL MODEL   (BASE_URL ends in /v1)
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
  messages: [{role: "system", content: "You call tools."}, {role: "user", content: "Weather in Paris?"}],
  tools: [{type: "function", function: {name: "get_weather", parameters: {type: "object",
    properties: {city: {type: "string"}}, required: ["city"]}}}],
  max_tokens: 32,
  temperature: 0,
};
const summary = (mode, choice) => ({
  mode,
  finish_reason: choice.finish_reason,
  content: choice.message.content ?? null,
  reasoning: choice.message.reasoning_content ?? null,
  tool_calls: (choice.message.tool_calls ?? []).map((t) => ({id: t.id, name: t.function.name,
                                                              arguments: t.function.arguments})),
});
const plain = await client.chat.completions.create(request);
if (plain.object !== "chat.completion") throw new Error(`object ${plain.object}`);
console.log(JSON.stringify(summary("plain", plain.choices[0])));
const stream = client.chat.completions.stream({...request, stream: true});
const final = await stream.finalChatCompletion();
console.log(JSON.stringify(summary("stream", final.choices[0])));
