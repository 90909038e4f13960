#!/usr/bin/env node
// toktier's /v1/messages answers as the @anthropic-ai/sdk npm client reads
// them. Sends one Messages request plain and one streamed (the SDK's stream
// helper assembles the events and rejects a malformed sequence), then asks
// count_tokens; prints one JSON line each:
//   {"mode": "plain"|"stream", "stop_reason", "blocks": [{"type", "text"|"thinking"|"name"+"input"}], "usage"}
//   {"mode": "count_tokens", "input_tokens"}
//   node anthropic_messages_check.mjs BASE_URL MODEL   (BASE_URL without /v1)
import {createRequire} from "node:module";
import path from "node:path";
import {fileURLToPath} from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../../tools/package.json"));
const sdk = require("@anthropic-ai/sdk");
const Anthropic = sdk.Anthropic ?? sdk.default;

const [baseURL, model] = process.argv.slice(2);
const client = new Anthropic({baseURL, apiKey: "sk-ant-test", maxRetries: 0, timeout: 20000});
const request = {
  model,
  max_tokens: 64,
  system: [{type: "text", text: "x-anthropic-billing-header: cc_version=2.1.332; cc_entrypoint=cli;"},
           {type: "text", text: "You call tools.", cache_control: {type: "ephemeral"}}],
  messages: [{role: "user", content: [{type: "text", text: "Weather in Paris?"}]}],
  tools: [{name: "get_weather", description: "Current weather", input_schema: {type: "object",
    properties: {city: {type: "string"}}, required: ["city"]}}],
};
const summary = (mode, msg) => ({
  mode,
  type: msg.type,
  role: msg.role,
  stop_reason: msg.stop_reason,
  blocks: msg.content.map((b) => b.type === "text" ? {type: b.type, text: b.text}
    : b.type === "thinking" ? {type: b.type, thinking: b.thinking, signed: typeof b.signature === "string"}
    : b.type === "tool_use" ? {type: b.type, id: b.id, name: b.name, input: b.input} : {type: b.type}),
  usage: msg.usage,
});
const plain = await client.messages.create(request);
console.log(JSON.stringify(summary("plain", plain)));
const stream = client.messages.stream(request);
const final = await stream.finalMessage();
console.log(JSON.stringify(summary("stream", final)));
const counted = await client.messages.countTokens({model, system: request.system, messages: request.messages,
                                                   tools: request.tools});
console.log(JSON.stringify({mode: "count_tokens", input_tokens: counted.input_tokens}));
