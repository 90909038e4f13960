// /v1/messages and /v1/messages/count_tokens through the token tier
// (docs/agents.md): a Claude Code shaped conversation reaches the engine, in
// every chat_forward mode, as the reference tokenization (HF) of the
// reference rendering (@huggingface/jinja) of the conversation vLLM's
// Anthropic conversion builds (written out here by its rules); count_tokens
// counts exactly those IDs without an engine call; answers parse with the
// @anthropic-ai/sdk client, whole and streamed; bad input gets Anthropic's
// error shape.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "api/api.h"
#include "chat_reference.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// What Claude Code sends (shape captured from 2.1.x): the billing-header
// block, a cached system block, tools with input_schema, thinking, a
// mid-conversation system message, tool_use and tool_result (with
// is_error), several text blocks in one user turn, non-ASCII.
ojson ClaudeCodeRequest() {
  return ojson::parse(R"({
    "model": "qwen3", "max_tokens": 32000, "stream": false,
    "system": [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.abc; cc_entrypoint=cli;"},
               {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}},
               {"type": "text", "text": " Be brief."}],
    "tools": [{"name": "Bash", "description": "Run a command", "input_schema": {"type": "object",
               "properties": {"command": {"type": "string"}}, "required": ["command"]}},
              {"name": "Read", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
    "thinking": {"type": "adaptive"},
    "metadata": {"user_id": "{\"device_id\":\"d1\",\"session_id\":\"5b1c-session\"}"},
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
      {"role": "user", "content": "Try /tmp."}
    ]})");
}

// vLLM's conversion of ClaudeCodeRequest, by its rules (serving.py and
// chat_utils.py): system texts joined (billing block dropped, the
// mid-conversation system text moved up), text blocks joined by "\n" for
// Qwen3's string-content template, thinking as reasoning, tool_use as a tool
// call whose arguments the template receives as a value, tool_result as a
// tool message, tools as model_dump()s (description null when absent).
ojson ClaudeCodeTemplateInputs(const ojson& cfg) {
  ojson messages = ojson::parse(R"([
    {"role": "system", "content": "You are Claude Code. Be brief.Mid-conversation note."},
    {"role": "user", "content": "<system-reminder>ctx</system-reminder>\nList the files, café ✓"},
    {"role": "assistant", "content": "Running ls.",
     "tool_calls": [{"id": "toolu_01", "type": "function",
                     "function": {"name": "Bash", "arguments": {"command": "ls -la ~/日本"}}}],
     "reasoning": "I should run ls.", "reasoning_content": "I should run ls."},
    {"role": "tool", "content": "ls: cannot access\nexit 2", "tool_call_id": "toolu_01"},
    {"role": "assistant", "content": "The directory does not exist."},
    {"role": "user", "content": "Try /tmp."}])");
  ojson tools = ojson::parse(R"([
    {"type": "function", "function": {"name": "Bash", "description": "Run a command", "parameters": {"type": "object",
      "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "Read", "description": null, "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}}}}}])");
  ojson inputs;
  REQUIRE(chat::BuildChatInputs(ojson{{"messages", messages}, {"tools", tools}}, cfg, &inputs).ok());
  return inputs;
}

}  // namespace

TEST_CASE("messages: a Claude Code conversation reaches the engine as the reference IDs of vLLM's conversion "
          "in every chat_forward mode; count_tokens counts them without the engine") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  const std::vector<uint32_t> want = ReferenceChatIds(ClaudeCodeTemplateInputs(TokenizerConfig("qwen3")), "qwen3");
  for (const std::string mode : {"completions", "sglang", "dynamo", "vllm"}) {
    INFO(mode);
    MockEngine engine;
    Proxy p(ChatConfig(engine, mode));
    HttpClient client(p.port());
    auto r = client.Request("POST", "/v1/messages?beta=true", ClaudeCodeRequest().dump(),
                            {{"anthropic-version", "2023-06-01"}});
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    CHECK(ForwardedIds(mode, reqs[0]) == want);
    if (mode == "completions") {
      REQUIRE_MESSAGE(r.status == 200, r.body);
      json msg = json::parse(r.body);
      CHECK(msg["type"] == "message");
      CHECK(msg["role"] == "assistant");
      CHECK(msg["model"] == "qwen3");
      CHECK(msg["usage"]["input_tokens"].get<size_t>() + msg["usage"]["cache_read_input_tokens"].get<size_t>() > 0);
      json fwd = json::parse(reqs[0].body);
      CHECK(fwd["max_tokens"] == 32000);
    }
    if (mode == "sglang") {
      // SGLang gets the mapped chat request beside the IDs.
      json fwd = json::parse(reqs[0].body);
      CHECK(fwd["messages"][0]["role"] == "system");
      CHECK(fwd["tool_choice"] == "auto");
    }
    engine.ClearRequests();
    auto c = client.Request("POST", "/v1/messages/count_tokens", ClaudeCodeRequest().dump());
    REQUIRE_MESSAGE(c.status == 200, c.body);
    CHECK(json::parse(c.body)["input_tokens"] == want.size());
    CHECK(engine.Requests().empty());
    const std::string metrics = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="messages",outcome="ok"})") >= 2);
    // The second request of the session (metadata.user_id) hits its state.
    CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") >= 1);
  }
}

TEST_CASE("messages: answers with thinking, text and tool calls parse with the Anthropic SDK, whole and streamed") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  auto qwen = LoadTokenizer("qwen3");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "vllm"));
  std::vector<uint32_t> ids;
  qwen->Encode("<think>\nWeather needs a tool.\n</think>\n\nChecking Paris.\n<tool_call>\n{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               false, ids);
  engine.SetGenerateIds(ids, "stop");
  auto lines = RunNodeTool("../tests/proxy/data/anthropic_messages_check.mjs http://127.0.0.1:" +
                               std::to_string(p.port()) + " qwen3",
                           "");
  REQUIRE(lines.has_value());
  REQUIRE(lines->size() == 3);
  for (size_t i = 0; i < 2; ++i) {
    json got = json::parse(lines->at(i));
    INFO(lines->at(i));
    CHECK(got["type"] == "message");
    CHECK(got["stop_reason"] == "tool_use");
    REQUIRE(got["blocks"].size() == 3);
    CHECK(got["blocks"][0]["type"] == "thinking");
    CHECK(got["blocks"][0]["thinking"] == "\nWeather needs a tool.\n");
    CHECK(got["blocks"][1]["type"] == "text");
    CHECK(got["blocks"][1]["text"].get<std::string>().find("Checking Paris.") != std::string::npos);
    CHECK(got["blocks"][2]["type"] == "tool_use");
    CHECK(got["blocks"][2]["name"] == "get_weather");
    CHECK(got["blocks"][2]["input"] == json{{"city", "Paris"}});
    CHECK(got["usage"]["output_tokens"] == ids.size());
  }
  json counted = json::parse(lines->at(2));
  CHECK(counted["input_tokens"].get<size_t>() > 10);
  // The billing block never reaches the prompt.
  for (const auto& r : engine.Requests()) {
    if (r.target != "/inference/v1/generate") continue;
    std::vector<uint32_t> fwd = IdsOf(json::parse(r.body)["token_ids"]);
    api::TokenTextOptions o;
    o.skip_special_tokens = false;
    api::TokenTextStream decode(qwen, o);
    std::string prompt;
    REQUIRE(decode.Feed(fwd, &prompt));
    decode.Finish(&prompt);
    CHECK(prompt.find("You call tools.") != std::string::npos);
    CHECK(prompt.find("billing") == std::string::npos);
  }
}

TEST_CASE("messages: bad input gets Anthropic's error shape; what the token path cannot carry is refused, "
          "unknown models are relayed") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  auto post = [&](const std::string& body) { return client.Request("POST", "/v1/messages", body); };
  auto r = post(R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}]})");
  CHECK(r.status == 400);
  CHECK(IsAnthropicError(r.body, "invalid_request_error"));
  CHECK(r.body.find("max_tokens") != std::string::npos);
  r = post(R"({"model": "qwen3", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image",
             "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]})");
  CHECK(r.status == 400);
  CHECK(IsAnthropicError(r.body, "invalid_request_error"));
  CHECK(r.body.find("image") != std::string::npos);
  r = post(R"({"model": "qwen3", "max_tokens": 5, "tool_choice": {"type": "any"}, "messages": [{"role": "user",
             "content": "hi"}], "tools": [{"name": "t", "input_schema": {"type": "object"}}]})");
  CHECK(r.status == 400);
  CHECK(IsAnthropicError(r.body, "invalid_request_error"));
  r = post(R"({"model": "qwen3", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]})");
  CHECK(r.status == 400);
  r = post("{\"model\": \"qwen3\", \"max_tokens\": 5, " + std::string(200, '[') + std::string(200, ']') + "}");
  CHECK(r.status == 400);
  CHECK(IsAnthropicError(r.body, "invalid_request_error"));
  CHECK(engine.Requests().empty());
  // A model not on the token path, or a body without a readable model:
  // relayed byte for byte (the engine judges), as on every endpoint.
  const std::string other = R"({"model": "other", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})";
  r = post(other);
  r = post("not json");
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[0].target == "/v1/messages");
  CHECK(reqs[0].body == other);
  CHECK(reqs[1].body == "not json");
}
