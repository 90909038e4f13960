#!/usr/bin/env node
// Reference token IDs of an Anthropic Messages or OpenAI Responses request,
// for toktier's agent-API differential test
// (tests/proxy/test_agent_api_differential.cpp).
//
//   node tools/ref_agent_render.mjs
//       < JSONL of {"api": "messages"|"responses", "body": {...}, "tokenizer": "/path/to/tokenizer.json"}
//       > one line per input: the JSON array of token IDs, or {"error": "..."}
//
// The request becomes a chat conversation by vLLM's rules, written here from
// vLLM's sources (vllm/entrypoints/anthropic/serving.py,
// vllm/entrypoints/openai/responses/utils.py, vllm/entrypoints/chat_utils.py,
// the content-format detection of vllm/renderers/hf.py) and not from
// toktier's C++ (api/), so that the test compares two readings of the rules.
// The conversation is rendered with @huggingface/jinja (the renderer toktier
// matches byte for byte) and the prompt encoded with HF tokenizers without
// added special tokens (the template writes BOS). The tokenizer_config.json
// next to tokenizer.json gives the chat template and bos/eos.
//
// vLLM version notes: inline `role: "system"` Messages are merged into the
// leading system message, as vLLM does when it is started without
// --chat-template (its inline-system detection then takes the merge path).
// Tools are dumped as the current FunctionDefinition does: name,
// description, parameters, then strict and defer_loading only when set.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const require = createRequire(import.meta.url);
const { Template } = require("@huggingface/jinja");
const { Tokenizer } = require("tokenizers");

// ------------------------------------------------------------ Messages API

const kBillingHeader = "x-anthropic-billing-header";

function blocksOf(content, where) {
  if (!Array.isArray(content)) throw new Error(`${where}: content must be a string or a list of blocks`);
  return content;
}

// The system texts of a top-level `system` or of a role "system" message.
// Claude Code's billing block carries a per-request hash: vLLM skips it
// among blocks (a plain string is taken whole).
function systemTexts(system, where) {
  if (typeof system === "string") return [system];
  const texts = [];
  for (const b of blocksOf(system, where)) {
    if (b.type === "text" && b.text && !b.text.startsWith(kBillingHeader)) texts.push(b.text);
  }
  return texts;
}

// A tool_result of a user turn becomes a tool message of its own.
function toolResultMessage(block) {
  let text = "";
  if (typeof block.content === "string") {
    text = block.content;
  } else if (Array.isArray(block.content)) {
    const texts = [];
    for (const item of block.content) {
      if (item === null || typeof item !== "object" || Array.isArray(item)) continue;
      if (item.type === "text") texts.push(item.text ?? "");
      else throw new Error(`tool_result content of type ${item.type} has no text rendering`);
    }
    text = texts.join("\n");
  }
  return { role: "tool", tool_call_id: block.tool_use_id || "", content: text || "" };
}

// One non-system Anthropic message: the tool messages of its tool results
// go out first (appended to `out`), then the message itself.
function convertAnthropicMessage(m, out) {
  const msg = { role: m.role };
  if (typeof m.content === "string") {
    msg.content = m.content;
    out.push(msg);
    return;
  }
  const parts = [];
  const toolCalls = [];
  const reasoning = [];
  for (const b of blocksOf(m.content, "messages")) {
    switch (b.type) {
      case "text":
        if (b.text) parts.push({ type: "text", text: b.text });
        break;
      case "thinking":
        if (b.thinking !== undefined && b.thinking !== null) reasoning.push(b.thinking);
        break;
      case "redacted_thinking":  // opaque: nothing to render
      case "tool_reference":
        break;
      case "tool_use":
        // vLLM writes the input with json.dumps and parses it back before
        // rendering; the template sees the value, which is what this keeps.
        // A call without an id gets one from the clock in vLLM: a fixed one
        // here (no template of the test writes call ids).
        toolCalls.push({
          id: b.id || "call_0",
          type: "function",
          function: { name: b.name || "", arguments: JSON.stringify(b.input || {}) },
        });
        break;
      case "tool_result":
        if (m.role === "user") {
          out.push(toolResultMessage(b));
        } else {
          if (b.content && typeof b.content !== "string") throw new Error("assistant tool_result with block content");
          parts.push({ type: "text", text: `Tool result: ${b.content || ""}` });
        }
        break;
      default:
        throw new Error(`content block of type ${b.type} has no text rendering`);
    }
  }
  if (reasoning.length) msg.reasoning = reasoning.join("");
  if (toolCalls.length) msg.tool_calls = toolCalls;
  if (parts.length === 1) msg.content = parts[0].text;
  else if (parts.length > 1) msg.content = parts;
  // A user turn of tool results only has become those tool messages.
  if (m.role === "user" && !("content" in msg)) return;
  out.push(msg);
}

function fromMessages(body) {
  const messages = [];
  const system = [];
  if (body.system) system.push(...systemTexts(body.system, "system"));
  for (const m of body.messages) {
    if (m.role === "system") system.push(...systemTexts(m.content, "messages"));
  }
  if (system.length) messages.push({ role: "system", content: system.join("") });
  for (const m of body.messages) {
    if (m.role !== "system") convertAnthropicMessage(m, messages);
  }
  let tools = null;
  if (Array.isArray(body.tools)) {
    tools = body.tools.map((t) =>
      functionTool({
        name: t.name,
        description: t.description,
        parameters: t.input_schema,
        defer_loading: t.defer_loading,
      }),
    );
  }
  // output_config.effort is the chat request's reasoning_effort, which vLLM
  // passes to the template with enable_thinking (unless the request's
  // kwargs set it): templates that gate thinking on either read them.
  const kwargs = { ...(body.chat_template_kwargs || {}) };
  const effort = body.output_config && typeof body.output_config === "object" ? body.output_config.effort : undefined;
  if (effort !== undefined && effort !== null) {
    kwargs.reasoning_effort = effort;
    if (!("enable_thinking" in (body.chat_template_kwargs || {}))) kwargs.enable_thinking = effort !== "none";
  }
  return { messages, tools, kwargs };
}

// ------------------------------------------------------------ Responses API

// The text of a content or summary entry: an object's "text", or a string.
function entryText(entry) {
  if (typeof entry === "string") return entry;
  return entry && typeof entry === "object" ? (entry.text ?? "") : "";
}

// One input item: a new chat message, or null when it was merged into the
// assistant message before it (reasoning, tool calls and the output text
// of one turn arrive as separate items).
function itemMessage(item, prev) {
  const prevAssistant = prev && prev.role === "assistant" ? prev : null;
  if (item.type === "function_call") {
    const name = item.namespace ? `${item.namespace}__${item.name}` : item.name;
    const call = { id: item.call_id, function: { name, arguments: item.arguments }, type: "function" };
    if (prevAssistant) {
      if (prevAssistant.tool_calls === undefined || prevAssistant.tool_calls === null) {
        prevAssistant.tool_calls = [call];
        return null;
      }
      prevAssistant.tool_calls.push(call);
      return null;
    }
    return { role: "assistant", tool_calls: [call] };
  }
  if (item.type === "reasoning") {
    if (item.encrypted_content) throw new Error("encrypted reasoning content");
    let reasoning = "";
    if (Array.isArray(item.content) && item.content.length) reasoning = entryText(item.content[0]);
    else if (Array.isArray(item.summary) && item.summary.length) reasoning = entryText(item.summary[0]);
    if (prevAssistant && (prevAssistant.reasoning === undefined || prevAssistant.reasoning === null)) {
      prevAssistant.reasoning = reasoning;
      return null;
    }
    return { role: "assistant", reasoning };
  }
  if (item.type === "function_call_output") {
    return { role: "tool", content: item.output, tool_call_id: item.call_id };
  }
  if (item.role === "assistant") {
    let text = "";
    if (typeof item.content === "string") text = item.content;
    else if (Array.isArray(item.content) && item.content.length) text = entryText(item.content[0]);
    if (prevAssistant && (prevAssistant.content === undefined || prevAssistant.content === null)) {
      prevAssistant.content = text;
      return null;
    }
    return { role: "assistant", content: text };
  }
  if (item.type !== undefined && item.type !== "message") throw new Error(`input item of type ${item.type}`);
  // user, system and developer messages are chat messages as they are.
  return item;
}

function fromResponses(body) {
  const messages = [];
  if (body.instructions) messages.push({ role: "system", content: body.instructions });
  if (typeof body.input === "string") {
    messages.push({ role: "user", content: body.input });
  } else {
    for (const item of body.input) {
      const m = itemMessage(item, messages.length ? messages[messages.length - 1] : null);
      if (m) messages.push(m);
    }
  }
  // Function tools (namespaced ones flattened as ns__name); hosted tools
  // have no function to render and are left out. A request that names
  // tools gets a list, empty when none was a function.
  let tools = null;
  if (Array.isArray(body.tools) && body.tools.length) {
    tools = [];
    for (const t of body.tools) {
      if (t.type === "function") {
        tools.push(functionTool(t));
      } else if (t.type === "namespace") {
        for (const nt of t.tools || []) {
          if (nt.type === "function") tools.push(functionTool({ ...nt, name: `${t.name}__${nt.name}` }));
        }
      }
    }
  }
  const effort = body.reasoning && typeof body.reasoning === "object" ? body.reasoning.effort : undefined;
  const kwargs = typeof effort === "string" ? { reasoning_effort: effort } : null;
  return { messages, tools, kwargs };
}

// ------------------------------------------------------------ shared

// A tool as vLLM's ChatCompletionToolsParam dumps it for the template.
function functionTool(t) {
  const fn = { name: t.name, description: t.description ?? null, parameters: t.parameters ?? null };
  if (t.strict !== undefined && t.strict !== null) fn.strict = t.strict;
  if (t.defer_loading !== undefined && t.defer_loading !== null) fn.defer_loading = t.defer_loading;
  return { type: "function", function: fn };
}

const kTextPartField = { text: "text", input_text: "text", output_text: "text", refusal: "refusal", thinking: "thinking" };

// The texts of a chat message's content: a string is one text, null none.
function contentTexts(content) {
  if (content === undefined || content === null) return [];
  if (typeof content === "string") return [content];
  if (!Array.isArray(content)) throw new Error("content must be a string, a list of parts or null");
  const texts = [];
  for (const part of content) {
    if (typeof part === "string") {
      texts.push(part);
      continue;
    }
    const field = kTextPartField[part.type];
    if (!field) throw new Error(`content part of type ${part.type} has no text rendering`);
    const text = part[field];
    // vLLM skips a text or refusal part without its text.
    if ((text === undefined || text === null) && (part.type === "text" || part.type === "refusal")) continue;
    texts.push(text);
  }
  return texts;
}

// The conversation the template sees (vLLM's chat message parsing): content
// as one string (texts joined by "\n") or as text parts, by the template's
// content format; a tool message's text parts always as one string.
function conversation(messages, format) {
  const out = [];
  for (const m of messages) {
    const role = m.role;
    if (typeof role !== "string") throw new Error("a message without a role");
    const texts = contentTexts(m.content);
    const msg = { role };
    if (format === "openai" && role !== "tool") msg.content = texts.map((text) => ({ type: "text", text }));
    else msg.content = texts.join("\n");
    if (role === "assistant") {
      if (m.tool_calls !== undefined && m.tool_calls !== null) msg.tool_calls = structuredClone(m.tool_calls);
      if (m.reasoning !== undefined && m.reasoning !== null) {
        msg.reasoning = m.reasoning;
        msg.reasoning_content = m.reasoning;
      }
    } else if (role === "tool") {
      if ("tool_call_id" in m) msg.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === "string") msg.name = m.name;
    if (typeof m.task === "string") msg.task = m.task;
    if (role === "developer") msg.tools = m.tools ?? null;
    out.push(msg);
  }
  // Templates take tool-call arguments as values: the JSON strings are
  // parsed ({} when not JSON), and an empty call list is dropped so the
  // template takes its plain assistant path.
  for (const msg of out) {
    if (msg.role !== "assistant" || !Array.isArray(msg.tool_calls)) continue;
    if (!msg.tool_calls.length) {
      delete msg.tool_calls;
      continue;
    }
    for (const call of msg.tool_calls) {
      const args = call.function.arguments;
      if (typeof args === "string") {
        try {
          call.function.arguments = JSON.parse(args);
        } catch {
          call.function.arguments = {};
        }
      } else if (args === null || typeof args !== "object") {
        call.function.arguments = {};
      }
    }
  }
  return out;
}

// ------------------------------------------------------------ content format

// vLLM's content-format detection, on @huggingface/jinja's syntax tree: a
// template is "openai" (content kept as parts) when it loops over the
// `content` of a variable that iterates over `messages` (or over a name
// `set` from it, transitively); else "string". A Jinja2 For's iterable and
// its `if` filter are one SelectExpression here: the iterable is its lhs.
function walk(node, visit) {
  if (Array.isArray(node)) {
    for (const n of node) walk(n, visit);
    return;
  }
  if (node === null || typeof node !== "object") return;
  if (typeof node.type === "string") visit(node);
  for (const value of Object.values(node)) {
    if (value !== null && typeof value === "object") walk(value, visit);
  }
}

const isName = (n, name) => n && n.type === "Identifier" && n.value === name;

function isKeyOf(n, name, key) {
  if (!n || n.type !== "MemberExpression" || !isName(n.object, name)) return false;
  if (n.computed) return n.property.type === "StringLiteral" && n.property.value === key;
  return n.property.type === "Identifier" && n.property.value === key;
}

// `name` (or name[key] / name.key), seen through filters, tests and slices.
function accesses(n, name, key) {
  if (!n) return false;
  if (n.type === "FilterExpression" || n.type === "TestExpression") return accesses(n.operand, name, key);
  if (n.type === "MemberExpression" && n.computed && n.property.type === "SliceExpression") {
    return accesses(n.object, name, key);
  }
  return key === undefined ? isName(n, name) : isKeyOf(n, name, key);
}

class DetectionAborted extends Error {}

function contentFormat(program) {
  const sets = [];
  const loops = [];
  walk(program, (n) => {
    if (n.type === "Set" && n.value) sets.push(n);
    else if (n.type === "For") loops.push(n);
  });
  const iterableOf = (loop) => (loop.iterable.type === "SelectExpression" ? loop.iterable.lhs : loop.iterable);
  const loopVar = (loop) => {
    // vLLM asserts a plain name there; a failed assertion ends the
    // detection with its default.
    if (loop.loopvar.type !== "Identifier") throw new DetectionAborted();
    return loop.loopvar.value;
  };
  try {
    const listNames = ["messages"];
    for (let i = 0; i < listNames.length; ++i) {
      for (const s of sets) {
        if (!accesses(s.value, listNames[i])) continue;
        if (s.assignee.type !== "Identifier") throw new DetectionAborted();
        if (s.assignee.value !== listNames[i]) listNames.push(s.assignee.value);
      }
    }
    const messageNames = [];
    for (const loop of loops) {
      if (listNames.some((name) => accesses(iterableOf(loop), name))) messageNames.push(loopVar(loop));
    }
    for (const loop of loops) {
      if (messageNames.some((name) => accesses(iterableOf(loop), name, "content"))) {
        loopVar(loop);
        return "openai";
      }
    }
    return "string";
  } catch (e) {
    if (e instanceof DetectionAborted) return "string";
    throw e;
  }
}

// ------------------------------------------------------------ render, encode

const models = new Map();

function tokenString(config, key) {
  const v = config[key];
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof v.content === "string") return v.content;
  return undefined;
}

function model(tokenizerPath) {
  let m = models.get(tokenizerPath);
  if (m) return m;
  const config = JSON.parse(fs.readFileSync(path.join(path.dirname(tokenizerPath), "tokenizer_config.json"), "utf8"));
  if (typeof config.chat_template !== "string") throw new Error(`${tokenizerPath}: no chat_template string`);
  const template = new Template(config.chat_template);
  const tokenizer = Tokenizer.fromString(fs.readFileSync(tokenizerPath, "utf8"));
  tokenizer.disableTruncation();
  tokenizer.disablePadding();
  const specials = {};
  for (const key of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
    const v = tokenString(config, key);
    if (v !== undefined) specials[key] = v;
  }
  m = { template, tokenizer, specials, format: contentFormat(template.parsed) };
  models.set(tokenizerPath, m);
  return m;
}

function prompt(line) {
  const { api, body, tokenizer } = JSON.parse(line);
  const m = model(tokenizer);
  let request;
  if (api === "messages") request = fromMessages(structuredClone(body));
  else if (api === "responses") request = fromResponses(structuredClone(body));
  else throw new Error(`unknown api ${api}`);
  // The variables toktier's chat path passes (chat::BuildChatInputs).
  const inputs = {
    messages: conversation(request.messages, m.format),
    add_generation_prompt: true,
    tools: request.tools,
    documents: null,
    ...m.specials,
    ...(request.kwargs || {}),
  };
  return { model: m, text: m.template.render(inputs) };
}

const input = fs.readFileSync(0, "utf8").split("\n").filter((l) => l.trim() !== "");
const out = [];
for (const line of input) {
  try {
    const { model: m, text } = prompt(line);
    const encoding = await m.tokenizer.encode(text, null, { addSpecialTokens: false });
    out.push(JSON.stringify(Array.from(encoding.getIds())));
  } catch (e) {
    out.push(JSON.stringify({ error: String(e && e.message ? e.message : e) }));
  }
}
process.stdout.write(out.map((l) => l + "\n").join(""));
