// /v1/responses through the token tier (docs/agents.md): a Codex shaped
// request reaches the engine, in every chat_forward mode, as the reference
// tokenization (HF) of the reference rendering (@huggingface/jinja) of the
// conversation vLLM's Responses conversion builds (written out here by its
// rules); the answers parse with the openai client's Responses API, whole
// and streamed; hosted tools are left out and counted; what toktier cannot
// serve is a 400 in OpenAI's error shape.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "chat_reference.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// What Codex sends (shape of 0.169): instructions, developer and user
// messages with input_text parts, a reasoning item and a function call
// from the last turn with its output, function tools plus the hosted
// web_search, store false, reasoning effort, prompt_cache_key.
ojson CodexRequest() {
  return ojson::parse(R"({
    "model": "qwen3", "instructions": "You are Codex, a coding agent.", "stream": false, "store": false,
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
    "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199-thread"})");
}

// vLLM's conversion of CodexRequest (construct_input_messages, then
// chat_utils): instructions as the system message, the developer item as
// is (its content joined; a developer message carries "tools": null), the
// reasoning item and the function call merged into one assistant turn
// (arguments as a value), the output as a tool message, tools flattened
// into model_dump()s, reasoning_effort as a template variable.
ojson CodexTemplateInputs(const ojson& cfg) {
  ojson messages = ojson::parse(R"([
    {"role": "system", "content": "You are Codex, a coding agent."},
    {"role": "developer", "content": "Sandbox: read-only.", "tools": null},
    {"role": "user", "content": "<env>cwd=/tmp</env>\nList files, café ✓"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": {"command": ["ls", "-la"]}}}],
     "reasoning": "Need ls.", "reasoning_content": "Need ls."},
    {"role": "tool", "content": "a.txt\nb.txt", "tool_call_id": "call_1"},
    {"role": "assistant", "content": "Two files."},
    {"role": "user", "content": "Thanks"}])");
  ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "shell", "description": "Runs a shell command",
      "parameters": {"type": "object", "properties": {"command": {"type": "array", "items": {"type": "string"}}},
                     "required": ["command"]}, "strict": false}}])");
  ojson inputs;
  REQUIRE(chat::BuildChatInputs(ojson{{"messages", messages}, {"tools", tools},
                                      {"chat_template_kwargs", {{"reasoning_effort", "medium"}}}},
                                cfg, &inputs)
              .ok());
  return inputs;
}

}  // namespace

TEST_CASE("responses: a Codex request reaches the engine as the reference IDs of vLLM's conversion in every "
          "chat_forward mode; hosted tools are left out and counted") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  const std::vector<uint32_t> want = ReferenceChatIds(CodexTemplateInputs(TokenizerConfig("qwen3")), "qwen3");
  for (const std::string mode : {"completions", "sglang", "dynamo", "vllm"}) {
    INFO(mode);
    MockEngine engine;
    Proxy p(ChatConfig(engine, mode));
    HttpClient client(p.port());
    auto r = client.Request("POST", "/v1/responses", CodexRequest().dump(), {{"session-id", "0199-thread"}});
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    CHECK(ForwardedIds(mode, reqs[0]) == want);
    if (mode == "completions") {
      REQUIRE_MESSAGE(r.status == 200, r.body);
      json resp = json::parse(r.body);
      CHECK(resp["object"] == "response");
      CHECK(resp["model"] == "qwen3");
      // The mock engine's answer stops at its length limit.
      CHECK(resp["status"] == "incomplete");
      CHECK(resp["incomplete_details"]["reason"] == "max_output_tokens");
      CHECK(resp["store"] == false);
    }
    // A second turn of the same thread hits its state.
    ojson next = CodexRequest();
    next["input"].push_back(ojson::parse(R"({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]})"));
    next["input"].push_back(ojson::parse(R"({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "More"}]})"));
    r = client.Request("POST", "/v1/responses", next.dump(), {{"session-id", "0199-thread"}});
    const std::string metrics = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="responses",outcome="ok"})") == 2);
    CHECK(MetricValue(metrics, "toktier_hosted_tools_dropped_total") == 2);
    CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") == 1);
  }
}

TEST_CASE("responses: answers with reasoning, text and function calls parse with the openai client, whole and "
          "streamed") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  auto qwen = LoadTokenizer("qwen3");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "vllm"));
  std::vector<uint32_t> ids;
  qwen->Encode("<think>\nWeather needs a tool.\n</think>\n\nChecking Paris.\n<tool_call>\n{\"name\": \"get_weather\", "
               "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
               false, ids);
  engine.SetGenerateIds(ids, "stop");
  auto lines = RunNodeTool("../tests/proxy/data/openai_responses_check.mjs http://127.0.0.1:" +
                               std::to_string(p.port()) + "/v1 qwen3",
                           "");
  REQUIRE(lines.has_value());
  REQUIRE(lines->size() == 2);
  for (const auto& line : *lines) {
    json got = json::parse(line);
    INFO(line);
    CHECK(got["status"] == "completed");
    REQUIRE(got["output"].size() == 3);
    CHECK(got["output"][0]["type"] == "reasoning");
    CHECK(got["output"][1]["type"] == "message");
    CHECK(got["output"][1]["text"].get<std::string>().find("Checking Paris.") != std::string::npos);
    CHECK(got["output"][2]["type"] == "function_call");
    CHECK(got["output"][2]["name"] == "get_weather");
    CHECK(json::parse(got["output"][2]["arguments"].get<std::string>()) == json{{"city", "Paris"}});
    CHECK(got["usage"]["output_tokens"] == ids.size());
  }
}

TEST_CASE("responses: what toktier cannot serve is a 400 in OpenAI's error shape; unknown models are relayed") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  auto post = [&](const std::string& body) { return client.Request("POST", "/v1/responses", body); };
  auto r = post(R"({"model": "qwen3", "input": "hi", "previous_response_id": "resp_123"})");
  CHECK(r.status == 400);
  CHECK(IsOpenAiError(r.body));
  CHECK(r.body.find("previous_response_id") != std::string::npos);
  r = post(R"({"model": "qwen3", "input": [{"type": "message", "role": "user", "content": [{"type": "input_image",
             "image_url": "data:image/png;base64,AAAA"}]}]})");
  CHECK(r.status == 400);
  CHECK(IsOpenAiError(r.body));
  r = post(R"({"model": "qwen3"})");
  CHECK(r.status == 400);
  r = post("{\"model\": \"qwen3\", \"input\": " + std::string(300, '[') + std::string(300, ']') + "}");
  CHECK(r.status == 400);
  CHECK(IsOpenAiError(r.body));
  CHECK(engine.Requests().empty());
  const std::string other = R"({"model": "other", "input": "hi"})";
  r = post(other);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].target == "/v1/responses");
  CHECK(reqs[0].body == other);
}
