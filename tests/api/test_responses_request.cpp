// OpenAI Responses -> the chat request vLLM builds from it
// (api/responses_request.h, vllm/entrypoints/openai/responses/utils.py).
#include <doctest/doctest.h>

#include <string>

#include "api/api.h"

using namespace toktier;
using ojson = nlohmann::ordered_json;

namespace {

api::ResponsesRequest Map(const std::string& body) {
  api::ResponsesRequest out;
  api::RequestError err;
  REQUIRE_MESSAGE(api::ParseResponsesRequest(body, &out, &err), err.message);
  return out;
}

std::string Refused(const std::string& body) {
  api::ResponsesRequest out;
  api::RequestError err;
  CHECK_FALSE(api::ParseResponsesRequest(body, &out, &err));
  CHECK(err.status == 400);
  return err.message;
}

}  // namespace

TEST_CASE("responses mapping: instructions, a string input, message items of every role") {
  auto s = Map(R"({"model": "m", "instructions": "Be terse.", "input": "hi"})");
  CHECK(s.chat["messages"] == ojson::parse(R"([{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}])"));
  // Codex's shape: developer and user messages with input_text parts.
  auto c = Map(R"({"model": "m", "input": [
      {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]}]})");
  const ojson& m = c.chat["messages"];
  REQUIRE(m.size() == 3);
  CHECK(m[0]["role"] == "developer");
  CHECK(m[0]["content"][0]["text"] == "rules");  // the item itself, as vLLM passes it
  CHECK(m[1]["content"].size() == 2);
  CHECK(m[2] == ojson::parse(R"({"role": "assistant", "content": "done"})"));
}

TEST_CASE("responses mapping: reasoning, function calls and outputs merge into assistant turns as vLLM's do") {
  auto r = Map(R"({"model": "m", "input": [
      {"type": "message", "role": "user", "content": "go"},
      {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "think"}]},
      {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":[\"ls\"]}"},
      {"type": "function_call", "call_id": "c2", "name": "shell", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
      {"type": "function_call_output", "call_id": "c2", "output": "b.txt"},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "two files"}]},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "from summary"}]}]})");
  const ojson& m = r.chat["messages"];
  REQUIRE(m.size() == 5);
  CHECK(m[1]["role"] == "assistant");
  CHECK(m[1]["reasoning"] == "think");
  REQUIRE(m[1]["tool_calls"].size() == 2);
  CHECK(m[1]["tool_calls"][0] == ojson::parse(R"({"id": "c1", "type": "function", "function": {"name": "shell",
                                                   "arguments": "{\"cmd\":[\"ls\"]}"}})"));
  CHECK(m[2] == ojson::parse(R"({"role": "tool", "content": "a.txt", "tool_call_id": "c1"})"));
  CHECK(m[3]["tool_call_id"] == "c2");
  CHECK(m[4] == ojson::parse(R"({"role": "assistant", "content": "two files", "reasoning": "from summary"})"));
}

TEST_CASE("responses mapping: function tools flattened, hosted tools left out and counted, sampling, session") {
  auto r = Map(R"({"model": "m", "input": "x", "stream": true, "max_output_tokens": 100, "temperature": 0.2,
      "tools": [{"type": "function", "name": "shell", "description": "run", "strict": false,
                 "parameters": {"type": "object"}},
                {"type": "web_search"}, {"type": "custom", "name": "apply_patch"}],
      "tool_choice": "auto", "parallel_tool_calls": true, "reasoning": {"effort": "high", "summary": "auto"},
      "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "thread-9"})");
  CHECK(r.stream);
  CHECK(r.session_id == "thread-9");
  CHECK(r.hosted_tools_dropped == 2);
  CHECK(r.chat["tools"] == ojson::parse(R"([{"type": "function", "function": {"name": "shell", "description": "run",
                                            "parameters": {"type": "object"}, "strict": false}}])"));
  CHECK(r.chat["max_tokens"] == 100);
  CHECK(r.chat["temperature"] == 0.2);
  CHECK(r.chat["tool_choice"] == "auto");
  CHECK(r.chat["stream_options"]["include_usage"] == true);
  CHECK(r.chat["chat_template_kwargs"]["reasoning_effort"] == "high");
  CHECK(r.echo["store"] == false);
  CHECK(r.echo["parallel_tool_calls"] == true);
}

TEST_CASE("responses mapping: a function tool keeps its definition's fields only; a namespace's tools are "
          "flattened to namespace__name, and calls by namespace named so") {
  auto r = Map(R"({"model": "m",
      "input": [{"role": "user", "content": "go"},
                {"type": "function_call", "call_id": "c1", "namespace": "mcp__gh", "name": "search", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "namespace": "", "name": "shell", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
      "tools": [{"type": "function", "name": "shell", "strict": null, "x-extra": 1, "defer_loading": null,
                 "description": "run", "parameters": {"type": "object"}},
                {"type": "namespace", "name": "mcp__gh", "description": "GitHub",
                 "tools": [{"type": "function", "name": "search", "defer_loading": true, "strict": true},
                           {"type": "web_search"}]}]})");
  CHECK(r.chat["tools"] == ojson::parse(R"([
      {"type": "function", "function": {"name": "shell", "description": "run", "parameters": {"type": "object"}}},
      {"type": "function", "function": {"name": "mcp__gh__search", "strict": true, "defer_loading": true}}])"));
  CHECK(r.hosted_tools_dropped == 1);
  const ojson& calls = r.chat["messages"][1]["tool_calls"];
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["function"]["name"] == "mcp__gh__search");
  CHECK(calls[1]["function"]["name"] == "shell");
  CHECK(r.echo["tools"][1]["type"] == "namespace");
  // How the answer names a call of one back.
  REQUIRE(r.namespaced_tools.size() == 1);
  CHECK(r.namespaced_tools.at("mcp__gh__search").ns == "mcp__gh");
  CHECK(r.namespaced_tools.at("mcp__gh__search").name == "search");
  CHECK(Refused(R"({"model": "m", "input": "x", "tools": [{"type": "namespace", "tools": []}]})").find("namespace") !=
        std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": 3}]})")
            .find("parameters") != std::string::npos);
}

TEST_CASE("responses mapping: what toktier cannot serve is a 400 naming it, never a shortened conversation") {
  CHECK(Refused(R"({"model": "m", "input": "x", "previous_response_id": "resp_1"})").find("previous_response_id") !=
        std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": [{"type": "reasoning", "encrypted_content": "gAAA", "summary": []}]})")
            .find("encrypted") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": [{"type": "message", "role": "user", "content": [{"type": "input_image",
             "image_url": "data:x"}]}]})").find("input_image") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]})").find("item_reference") !=
        std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": "x", "tool_choice": "required"})").find("tool_choice") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})")
            .find("json_schema") != std::string::npos);
  CHECK(Refused(R"({"model": "m"})").find("input") != std::string::npos);
  CHECK(Refused(R"({"input": "x"})").find("model") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "input": [{"type": "web_search_call", "id": "ws"}]})").find("web_search_call") !=
        std::string::npos);
}
