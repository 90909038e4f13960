// Differential test of the agent APIs' request mappings (docs/agents.md):
// for Qwen3, Llama 3.1 and DeepSeek-V3, the IDs toktier's
// /v1/messages/render and /v1/responses/render answer equal those of an
// independent reference (tools/ref_agent_render.mjs: vLLM's conversion
// rules written in JS, @huggingface/jinja, HF tokenizers), for replayed
// agent conversations and for synthetic requests that cover each rule
// (tools, tool results, reasoning, system placement, non-ASCII, ...).
// The models' templates differ in what they render of a conversation
// (Llama 3.1's renders no tools, DeepSeek-V3's drops reasoning), so each
// rule is checked where some template shows it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "chat_reference.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

const std::vector<std::string> kModels = {"qwen3", "llama3_1", "deepseek_v3"};

proxy::Config DifferentialConfig(const MockEngine& engine) {
  proxy::Config c = ChatConfig(engine, "completions");
  for (const char* name : {"llama3_1", "deepseek_v3"}) {
    proxy::ModelConfig m;
    m.name = name;
    m.tokenizer = TokenizerPath(name);
    c.models.push_back(m);
  }
  return c;
}

struct Case {
  std::string name;
  std::string api;  // "messages" or "responses"
  ojson body;       // the client's request, without "model"
};

// Text of IDs (TokenBytes concatenated: the three vocabularies are
// byte-level), as JSON so control characters and cut characters show.
std::string Text(const core::Tokenizer& tok, const std::vector<uint32_t>& ids, size_t from, size_t to) {
  std::string bytes;
  for (size_t i = from; i < std::min(to, ids.size()); ++i) bytes += tok.TokenBytes(ids[i]);
  return json(bytes).dump(-1, ' ', false, json::error_handler_t::replace);
}

// Where toktier's IDs part from the reference's, with the text on both
// sides of that point decoded.
std::string Divergence(const std::string& model, const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const auto tok = LoadTokenizer(model);
  const size_t from = i >= 16 ? i - 16 : 0;
  return "first differing ID at index " + std::to_string(i) + " (toktier " + std::to_string(got.size()) +
         " IDs, reference " + std::to_string(want.size()) + ")\n  before:    " + Text(*tok, got, from, i) +
         "\n  toktier:   " + Text(*tok, got, i, i + 16) + "\n  reference: " + Text(*tok, want, i, i + 16);
}

// Every case through both sides for every model; returns how many diverged.
// The reference runs once for all of them (node starts in ~0.3 s).
size_t Differential(const std::vector<Case>& cases) {
  struct Rendered {
    std::string label, model;
    std::vector<uint32_t> ids;
  };
  MockEngine engine;
  Proxy p(DifferentialConfig(engine));
  HttpClient client(p.port());
  std::string ref_in;
  std::vector<Rendered> rendered;
  for (const Case& c : cases) {
    for (const std::string& model : kModels) {
      const std::string label = c.api + " " + c.name + " [" + model + "]";
      ojson body = c.body;
      body["model"] = model;
      auto r = client.Request("POST", "/v1/" + c.api + "/render", body.dump());
      REQUIRE_MESSAGE(r.status == 200, label << ": " << r.body);
      rendered.push_back({label, model, IdsOf(json::parse(r.body)["token_ids"])});
      ref_in += ojson{{"api", c.api}, {"body", body}, {"tokenizer", TokenizerPath(model)}}.dump() + "\n";
    }
  }
  CHECK(engine.Requests().empty());
  auto ref = RunNodeTool("ref_agent_render.mjs", ref_in);
  REQUIRE(ref.has_value());
  REQUIRE(ref->size() == rendered.size());
  size_t divergences = 0;
  for (size_t k = 0; k < rendered.size(); ++k) {
    const Rendered& r = rendered[k];
    json want = json::parse(ref->at(k));
    REQUIRE_MESSAGE(want.is_array(), r.label << ": the reference failed: " << ref->at(k));
    const std::vector<uint32_t> want_ids = IdsOf(want);
    const bool same = r.ids == want_ids;
    CHECK_MESSAGE(same, r.label << ": " << (same ? "" : Divergence(r.model, r.ids, want_ids)));
    if (!same) ++divergences;
  }
  MESSAGE(rendered.size() << " renders compared, " << divergences << " diverged");
  return divergences;
}

// ------------------------------------------------------------ workloads

// Splits text at its first blank line: two text blocks (or parts) where the
// text has one, so every conversation also has turns of several blocks.
std::vector<std::string> SplitAtBlankLine(const std::string& text) {
  const size_t cut = text.find("\n\n");
  if (cut == std::string::npos || cut == 0) return {text};
  return {text.substr(0, cut), text.substr(cut + 2)};
}

ojson TextBlocks(const std::vector<std::string>& texts, const char* type) {
  ojson blocks = ojson::array();
  for (const auto& t : texts) blocks.push_back({{"type", type}, {"text", t}});
  return blocks;
}

// A chat conversation as a Messages request: the first system message as
// `system` (a string, or text blocks with cache_control), later ones as
// role "system" messages; user turns as a string or text blocks in turn;
// a tool turn as the tool_result of a tool_use the assistant turn before it
// gets (the workloads keep only the assistant's text).
ojson AsMessages(const ojson& conversation, size_t variant) {
  ojson body = {{"max_tokens", 256}};
  ojson messages = ojson::array();
  size_t turn = 0, calls = 0;
  for (const auto& m : conversation) {
    const std::string role = m["role"];
    const std::string text = m["content"];
    ++turn;
    if (role == "system" && !body.contains("system")) {
      if (variant % 2 == 0) {
        body["system"] = text;
      } else {
        body["system"] = TextBlocks(SplitAtBlankLine(text), "text");
        body["system"].back()["cache_control"] = {{"type", "ephemeral"}};
      }
    } else if (role == "system") {
      messages.push_back({{"role", "system"}, {"content", text}});
    } else if (role == "user") {
      if ((turn + variant) % 2 == 0) messages.push_back({{"role", "user"}, {"content", text}});
      else messages.push_back({{"role", "user"}, {"content", TextBlocks(SplitAtBlankLine(text), "text")}});
    } else if (role == "assistant") {
      messages.push_back({{"role", "assistant"}, {"content", TextBlocks({text}, "text")}});
    } else if (role == "tool") {
      const std::string id = "toolu_" + std::to_string(++calls);
      if (!messages.empty() && messages.back()["role"] == "assistant") {
        messages.back()["content"].push_back(
            {{"type", "tool_use"}, {"id", id}, {"name", "bash"}, {"input", {{"step", calls}}}});
      }
      ojson content = calls % 2 ? ojson(text) : TextBlocks({text}, "text");
      messages.push_back({{"role", "user"},
                          {"content", ojson::array({{{"type", "tool_result"}, {"tool_use_id", id}, {"content", content}}})}});
    }
  }
  body["messages"] = std::move(messages);
  return body;
}

// The same conversation as a Responses request: the first system message
// as `instructions`, user turns as input_text parts or a string in turn,
// assistant turns as output_text, a tool turn as a function_call (merged
// into the assistant turn before it) and its function_call_output.
ojson AsResponses(const ojson& conversation, size_t variant) {
  ojson body = ojson::object();
  ojson input = ojson::array();
  size_t turn = 0, calls = 0;
  for (const auto& m : conversation) {
    const std::string role = m["role"];
    const std::string text = m["content"];
    ++turn;
    if (role == "system" && !body.contains("instructions")) {
      body["instructions"] = text;
    } else if (role == "user" || role == "system") {
      ojson content = (turn + variant) % 2 == 0 ? ojson(text) : TextBlocks(SplitAtBlankLine(text), "input_text");
      input.push_back({{"type", "message"}, {"role", role}, {"content", content}});
    } else if (role == "assistant") {
      input.push_back({{"type", "message"}, {"role", "assistant"}, {"content", TextBlocks({text}, "output_text")}});
    } else if (role == "tool") {
      const std::string id = "call_" + std::to_string(++calls);
      input.push_back({{"type", "function_call"}, {"call_id", id}, {"name", "bash"},
                       {"arguments", json{{"step", calls}}.dump()}});
      input.push_back({{"type", "function_call_output"}, {"call_id", id}, {"output", text}});
    }
  }
  body["input"] = std::move(input);
  return body;
}

// Replayed agent sessions: swe-agent's with tool turns and with two user
// turns in a row, mini-swe-agent's with CRLF tool output. Each is cut to
// its first messages (at most 20, about 30 KB) to keep the test fast.
std::vector<Case> WorkloadCases() {
  std::vector<Case> cases;
  const std::string root = SharedWorkloadsDir();
  if (root.empty()) return cases;
  const std::vector<std::string> sessions = {
      "mini-swe-agent/chatml/astropy__astropy-12907.jsonl", "mini-swe-agent/chatml/sympy__sympy-20590.jsonl",
      "swe-agent/chatml/function_calling_simple.jsonl",     "swe-agent/chatml/pydicom__pydicom-1458.jsonl",
      "swe-agent/chatml/BabyEncryption.jsonl"};
  for (size_t s = 0; s < sessions.size(); ++s) {
    std::vector<std::string> prompts;
    const auto read = cli::ReadSessionPrompts((std::filesystem::path(root) / sessions[s]).string(), &prompts);
    REQUIRE_MESSAGE(read.ok(), read.message());
    REQUIRE(!prompts.empty());
    const ojson all = ChatmlMessages(prompts.back());
    ojson conversation = ojson::array();
    size_t bytes = 0;
    for (const auto& m : all) {
      if (conversation.size() >= 20 || bytes > 30000) break;
      bytes += m["content"].get_ref<const std::string&>().size();
      conversation.push_back(m);
    }
    REQUIRE(conversation.size() >= 4);
    const std::string name = std::filesystem::path(sessions[s]).stem().string();
    cases.push_back({name, "messages", AsMessages(conversation, s)});
    cases.push_back({name, "responses", AsResponses(conversation, s)});
  }
  return cases;
}

// ------------------------------------------------------------ synthetic

std::vector<Case> SyntheticCases() {
  std::vector<Case> cases;
  auto messages = [&](const char* name, const char* body) { cases.push_back({name, "messages", ojson::parse(body)}); };
  auto responses = [&](const char* name, const char* body) { cases.push_back({name, "responses", ojson::parse(body)}); };

  messages("Claude Code turn: billing block, cached system blocks, tools (one deferred), thinking, tool_use, "
           "tool_result with is_error, mid-conversation system",
           R"({"max_tokens": 32000, "stream": true,
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.abc; cc_entrypoint=cli;"},
               {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": " Be brief."}],
    "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object",
               "properties": {"command": {"type": "string"}}, "required": ["command"]}},
              {"name": "Read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}},
              {"name": "mcp__github__search", "description": "Search GitHub", "defer_loading": true,
               "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
    "thinking": {"type": "adaptive"}, "context_management": {"edits": []}, "output_config": {"effort": "high"},
    "metadata": {"user_id": "{\"device_id\":\"d1\",\"session_id\":\"differential-1\"}"},
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                                    {"type": "text", "text": "List the files, café ✓"}]},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should run ls.", "signature": "sig"},
        {"type": "text", "text": "Running ls."},
        {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls -la ~/日本"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "is_error": true,
         "content": [{"type": "text", "text": "ls: cannot access"}, {"type": "text", "text": "exit 2"}]}]},
      {"role": "system", "content": "Mid-conversation note."},
      {"role": "assistant", "content": "The directory does not exist."},
      {"role": "user", "content": "Try /tmp."}]})");

  messages("parallel tool_use in one turn, their results with string, block and empty content, then text in the "
           "same user turn",
           R"({"max_tokens": 100, "system": "You run tools.",
    "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object",
               "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}}},
              {"name": "Grep", "description": "Search", "input_schema": {"type": "object",
               "properties": {"pattern": {"type": "string"}}}}],
    "tool_choice": {"type": "auto"},
    "messages": [
      {"role": "user", "content": "Read a.txt and find TODOs"},
      {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_a", "name": "Read", "input": {"path": "a.txt", "limit": 20}},
        {"type": "tool_use", "id": "toolu_b", "name": "Grep", "input": {"pattern": "TODO"}},
        {"type": "tool_use", "id": "toolu_c", "name": "Grep", "input": {}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "line 1\nline 2"},
        {"type": "tool_result", "tool_use_id": "toolu_b", "content": [{"type": "text", "text": "a.txt:3: TODO"}]},
        {"type": "tool_result", "tool_use_id": "toolu_c", "content": ""},
        {"type": "text", "text": "Summarize both."}]}]})");

  // Ending on tool results keeps the assistant turns after the last user
  // query, where Qwen3's template renders their reasoning.
  messages("thinking blocks joined, redacted_thinking left out, an assistant turn of only a tool call, reasoning "
           "rendered after the last user turn",
           R"({"max_tokens": 100, "system": [{"type": "text", "text": "Think first."}],
    "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}],
    "messages": [
      {"role": "user", "content": "What is in /etc?"},
      {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
        {"type": "thinking", "thinking": "First part. ", "signature": "s1"},
        {"type": "thinking", "thinking": "Second part.", "signature": "s2"},
        {"type": "tool_use", "id": "toolu_x", "name": "Bash", "input": {"command": "ls /etc"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "hosts\npasswd"}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Two files.", "signature": "s3"},
                                         {"type": "text", "text": "Reading hosts."},
                                         {"type": "tool_use", "id": "toolu_y", "name": "Bash",
                                          "input": {"command": "cat /etc/hosts"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_y", "content": "127.0.0.1 localhost"}]}]})");

  messages("system messages in the conversation (string and blocks, one a billing block) move to the system prompt",
           R"({"max_tokens": 100,
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.9; cch=00000;"},
               {"type": "text", "text": "Top."}],
    "messages": [
      {"role": "user", "content": "one"},
      {"role": "system", "content": [{"type": "text", "text": "x-anthropic-billing-header: cch=1;"},
                                      {"type": "text", "text": " Inline block."}]},
      {"role": "assistant", "content": "two"},
      {"role": "system", "content": " Inline string."},
      {"role": "user", "content": "three"}]})");

  messages("several text blocks in one turn (an empty one among them) and non-ASCII text",
           R"({"max_tokens": 100, "system": "Réponds en français. 日本語も可。",
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "Première ligne é"},
                                    {"type": "text", "text": ""},
                                    {"type": "text", "text": "日本 🚀 emoji 👩‍💻, combining é, zero-width\u200bjoin"},
                                    {"type": "text", "text": "  trailing spaces and tabs\t"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "D'accord — 了解 ✓"},
                                         {"type": "text", "text": "Deuxième bloc."}]},
      {"role": "user", "content": [{"type": "text", "text": "Ñandú 🦤"}]}]})");

  messages("tool_use inputs with nested values, numbers, null and escapes reach the template as values",
           R"({"max_tokens": 100,
    "tools": [{"name": "Write", "description": "Write a file", "input_schema": {"type": "object",
               "properties": {"path": {"type": "string"}, "content": {"type": "string"}, "opts": {"type": "object"}},
               "required": ["path", "content"], "additionalProperties": false}}],
    "messages": [
      {"role": "user", "content": "Write the config"},
      {"role": "assistant", "content": [
        {"type": "text", "text": "Writing."},
        {"type": "tool_use", "id": "toolu_w", "name": "Write",
         "input": {"path": "/tmp/x \"quoted\".json", "content": "{\"a\": [1, 2.5, -3e-7]}\n\ttab\\back",
                   "opts": {"mode": 420, "append": false, "owner": null, "tags": ["日本", "é", "🚀"], "nested": {"z": 1, "a": 2}}}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_w"}]},
      {"role": "assistant", "content": "Done."},
      {"role": "user", "content": "ok"}]})");

  messages("plain strings only, no system, no tools",
           R"({"max_tokens": 10, "temperature": 0.2, "top_k": 5, "stop_sequences": ["END"],
    "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                 {"role": "user", "content": "How are you?"}]})");

  messages("output_config effort none turns thinking off (Qwen3's empty think block); an empty inline system "
           "message still makes a system prompt",
           R"({"max_tokens": 100, "output_config": {"effort": "none"},
    "messages": [{"role": "user", "content": "one"}, {"role": "system", "content": ""},
                 {"role": "assistant", "content": "two"}, {"role": "user", "content": "three"}]})");

  messages("the request's own enable_thinking wins over output_config effort, which still reaches the template",
           R"({"max_tokens": 100, "system": "", "output_config": {"effort": "none"},
    "chat_template_kwargs": {"enable_thinking": true, "custom_flag": 1},
    "messages": [{"role": "user", "content": "Think about it."}]})");

  responses("Codex turn: instructions, developer and user items, reasoning, function call and output, function "
            "and web_search tools, reasoning effort",
            R"({"instructions": "You are Codex, a coding agent.", "stream": false, "store": false,
    "input": [
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: read-only."}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env>cwd=/tmp</env>"},
                                                       {"type": "input_text", "text": "List files, café ✓"}]},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Need ls."}],
       "encrypted_content": null},
      {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": "{\"command\":[\"ls\",\"-la\"]}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Two files."}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks"}]}],
    "tools": [{"type": "function", "name": "shell", "description": "Runs a shell command", "strict": false,
               "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                              "required": ["command"]}},
              {"type": "web_search"}],
    "tool_choice": "auto", "parallel_tool_calls": false, "reasoning": {"effort": "medium", "summary": "auto"},
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "differential-thread"})");

  responses("input as a string, a function tool without description and with strict true",
            R"({"instructions": "Be terse.", "input": "What is 2+2? ünïcödé 日本 🚀",
    "tools": [{"type": "function", "name": "calc", "strict": true,
               "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"],
                              "additionalProperties": false}}],
    "max_output_tokens": 50, "temperature": 0.3})");

  responses("reasoning from its summary, parallel function calls merged into one assistant turn, empty reasoning, "
            "the output text and a call after them, rendered after the last user turn",
            R"({"instructions": "Agent.",
    "input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Check both files"}]},
      {"type": "reasoning", "id": "rs_2", "summary": [{"type": "summary_text", "text": "Read both."},
                                                      {"type": "summary_text", "text": "Not this one."}]},
      {"type": "function_call", "call_id": "c_a", "name": "read", "arguments": "{\"path\": \"a\"}"},
      {"type": "function_call", "call_id": "c_b", "name": "read", "arguments": "{\"path\": \"b\"}"},
      {"type": "function_call_output", "call_id": "c_a", "output": "A"},
      {"type": "function_call_output", "call_id": "c_b", "output": [{"type": "input_text", "text": "B1"},
                                                                     {"type": "input_text", "text": "B2"}]},
      {"type": "reasoning", "id": "rs_3", "summary": [], "content": []},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A and B."}]},
      {"type": "function_call", "call_id": "c_c", "name": "read", "arguments": "{\"path\": \"c\"}"},
      {"type": "function_call_output", "call_id": "c_c", "output": "C"}],
    "tools": [{"type": "function", "name": "read", "description": "Read a file",
               "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]})");

  responses("system item mid-conversation, developer and user items with string content, several input_text parts",
            R"({"input": [
      {"type": "message", "role": "developer", "content": "Prefer short answers."},
      {"role": "user", "content": "Hello"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi."}]},
      {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Mid-conversation rule."}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Part one é"},
                                                       {"type": "input_text", "text": "Part two 日本"},
                                                       {"type": "input_text", "text": "Part three 🚀"}]}]})");

  responses("assistant items in a row, a function call after text, reasoning after a turn that has reasoning, "
            "arguments that are not JSON",
            R"({"instructions": "You are helpful.",
    "input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Start"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "First."}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Second."},
                                                            {"type": "output_text", "text": "Not rendered."}]},
      {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{\"x\": 1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "done"},
      {"type": "reasoning", "id": "rs_a", "summary": [], "content": [{"type": "reasoning_text", "text": "R1"}]},
      {"type": "reasoning", "id": "rs_b", "summary": [], "content": [{"type": "reasoning_text", "text": "R2"}]},
      {"type": "function_call", "call_id": "c2", "name": "run", "arguments": "not json"},
      {"type": "function_call_output", "call_id": "c2", "output": ""}],
    "tools": [{"type": "function", "name": "run", "description": "Run", "parameters": {"type": "object"}}]})");

  responses("hosted tools only (left out), tool_choice none, reasoning effort high",
            R"({"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Search the web"}]}],
    "tools": [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}],
    "tool_choice": "none", "reasoning": {"effort": "high"}, "text": {"verbosity": "low"}, "truncation": "disabled",
    "metadata": {"k": "v"}})");
  responses("namespace tools (Codex's MCP servers) flattened to namespace__name, a call of one by namespace, "
            "function tools with extra keys and a null strict",
            R"({"instructions": "Agent.",
    "input": [
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Find the issue"}]},
      {"type": "function_call", "call_id": "c_ns", "namespace": "mcp__github", "name": "search_issues",
       "arguments": "{\"q\": \"crash\"}"},
      {"type": "function_call_output", "call_id": "c_ns", "output": "#12 crash on start"}],
    "tools": [{"type": "function", "name": "shell", "description": "Run", "strict": null, "x-extra": {"a": 1},
               "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}}},
              {"type": "namespace", "name": "mcp__github", "description": "GitHub tools",
               "tools": [{"type": "function", "name": "search_issues", "description": "Search issues",
                          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}},
                         {"type": "function", "name": "get_issue", "strict": true, "defer_loading": true,
                          "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}]},
              {"type": "web_search"}]})");
  return cases;
}

}  // namespace

TEST_CASE("messages and responses renders of replayed agent conversations equal the reference conversion by "
          "vLLM's rules for Qwen3, Llama 3.1 and DeepSeek-V3") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  const std::vector<Case> cases = WorkloadCases();
  REQUIRE_MESSAGE(!cases.empty(), "no conversation found in " << SharedWorkloadsDir());
  CHECK(Differential(cases) == 0);
}

TEST_CASE("messages and responses renders of tools, tool results, reasoning, system placement and non-ASCII "
          "text equal the reference conversion by vLLM's rules for Qwen3, Llama 3.1 and DeepSeek-V3") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  CHECK(Differential(SyntheticCases()) == 0);
}
