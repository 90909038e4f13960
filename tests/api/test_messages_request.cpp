// Anthropic Messages -> the chat request vLLM builds from it
// (api/messages_request.h, vllm/entrypoints/anthropic/serving.py's rules).
#include <doctest/doctest.h>

#include <string>

#include "api/api.h"

using namespace toktier;
using ojson = nlohmann::ordered_json;

namespace {

api::MessagesRequest Map(const std::string& body, bool count_tokens = false, bool drop_billing = true) {
  api::MessagesRequest out;
  api::RequestError err;
  api::MessagesOptions o;
  o.drop_billing_header = drop_billing;
  REQUIRE_MESSAGE(api::ParseMessagesRequest(body, o, count_tokens, &out, &err), err.message);
  return out;
}

std::string Refused(const std::string& body, bool count_tokens = false) {
  api::MessagesRequest out;
  api::RequestError err;
  CHECK_FALSE(api::ParseMessagesRequest(body, {}, count_tokens, &out, &err));
  CHECK(err.status == 400);
  return err.message;
}

}  // namespace

TEST_CASE("messages mapping: system blocks joined without a separator, billing block dropped, "
          "mid-conversation system text moved up") {
  auto m = Map(R"({"model": "m", "max_tokens": 10, "system": [
      {"type": "text", "text": "x-anthropic-billing-header: cc_version=1; cc_entrypoint=cli;"},
      {"type": "text", "text": "A.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "B."}],
    "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": [{"type": "text", "text": "C."}]},
                 {"role": "assistant", "content": "yo"}]})");
  CHECK(m.chat["messages"] == ojson::parse(R"([{"role": "system", "content": "A.B.C."}, {"role": "user", "content": "hi"},
                                               {"role": "assistant", "content": "yo"}])"));
  CHECK(m.chat["max_tokens"] == 10);
  auto kept = Map(R"({"model": "m", "max_tokens": 1, "system": [{"type": "text", "text": "x-anthropic-billing-header: h"}],
                     "messages": [{"role": "user", "content": "hi"}]})", false, /*drop_billing=*/false);
  CHECK(kept.chat["messages"][0]["content"] == "x-anthropic-billing-header: h");
}

TEST_CASE("messages mapping: thinking, tool_use and tool_result become reasoning, tool calls and tool messages") {
  auto m = Map(R"({"model": "m", "max_tokens": 10, "messages": [
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""}, {"type": "text", "text": "b"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "t1", "signature": "s"},
      {"type": "redacted_thinking", "data": "xx"}, {"type": "thinking", "thinking": "t2"},
      {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"cmd": "ls é", "n": [1, 2.5, true, null]}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "out", "is_error": true},
                                 {"type": "text", "text": "next"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu2",
                                  "content": [{"type": "text", "text": "l1"}, {"type": "text", "text": "l2"}]}]}]})");
  const ojson& msgs = m.chat["messages"];
  REQUIRE(msgs.size() == 5);
  CHECK(msgs[0]["content"] == ojson::parse(R"([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])"));
  CHECK(msgs[1]["reasoning"] == "t1t2");
  CHECK_FALSE(msgs[1].contains("content"));
  CHECK(msgs[1]["tool_calls"][0]["id"] == "tu1");
  // Python's json.dumps: ", " and ": ", non-ASCII escaped.
  CHECK(msgs[1]["tool_calls"][0]["function"]["arguments"] == R"({"cmd": "ls \u00e9", "n": [1, 2.5, true, null]})");
  CHECK(msgs[2] == ojson::parse(R"({"role": "tool", "tool_call_id": "tu1", "content": "out"})"));
  CHECK(msgs[3] == ojson::parse(R"({"role": "user", "content": "next"})"));
  CHECK(msgs[4] == ojson::parse(R"({"role": "tool", "tool_call_id": "tu2", "content": "l1\nl2"})"));
}

TEST_CASE("messages mapping: tools, tool_choice, sampling, stream, session from metadata.user_id") {
  auto m = Map(R"({"model": "m", "max_tokens": 5, "stream": true, "temperature": 0.5, "top_k": 3,
    "stop_sequences": ["END"], "thinking": {"type": "adaptive"}, "context_management": {}, "output_config": {},
    "metadata": {"user_id": "{\"session_id\": \"s-1\"}"},
    "tools": [{"name": "f", "description": "d", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}]})");
  CHECK(m.stream);
  CHECK(m.session_id == "s-1");
  CHECK(m.stop_sequences == std::vector<std::string>{"END"});
  CHECK(m.chat["stop"] == ojson::parse(R"(["END"])"));
  CHECK(m.chat["temperature"] == 0.5);
  CHECK(m.chat["stream_options"]["include_usage"] == true);
  CHECK(m.chat["tools"] == ojson::parse(R"([{"type": "function", "function": {"name": "f", "description": "d",
                                             "parameters": {"type": "object"}}}])"));
  CHECK(m.chat["tool_choice"] == "auto");
  auto none = Map(R"({"model": "m", "max_tokens": 5, "tool_choice": {"type": "none"}, "messages": [{"role": "user", "content": "x"}]})");
  CHECK(none.chat["tool_choice"] == "none");
  auto counted = Map(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": true})", true);
  CHECK_FALSE(counted.stream);
  CHECK_FALSE(counted.chat.contains("max_tokens"));
}

TEST_CASE("messages mapping: a tool's defer_loading goes to the template with the tool, as vLLM passes it") {
  auto m = Map(R"({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
    "tools": [{"name": "mcp__x", "defer_loading": true, "input_schema": {"type": "object"}},
              {"name": "g", "defer_loading": null, "input_schema": {"type": "object"}}]})");
  CHECK(m.chat["tools"] == ojson::parse(R"([{"type": "function", "function": {"name": "mcp__x",
      "parameters": {"type": "object"}, "defer_loading": true}},
    {"type": "function", "function": {"name": "g", "parameters": {"type": "object"}}}])"));
  // What the template sees: vLLM's FunctionDefinition order, the flag last.
  ojson dicts;
  api::RequestError err;
  REQUIRE(api::BuildToolDicts(m.chat["tools"], &dicts, &err));
  CHECK(dicts[0]["function"].dump() ==
        R"({"name":"mcp__x","description":null,"parameters":{"type":"object"},"defer_loading":true})");
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"name": "f", "defer_loading": "yes", "input_schema": {"type": "object"}}]})")
            .find("defer_loading") != std::string::npos);
}

TEST_CASE("messages mapping: output_config.effort reaches the template as reasoning_effort, and turns thinking "
          "off for none unless the request's own kwargs say otherwise") {
  const std::string head = R"({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], )";
  CHECK(Map(head + R"("output_config": {"effort": "none"}})").chat["chat_template_kwargs"] ==
        ojson::parse(R"({"reasoning_effort": "none", "enable_thinking": false})"));
  CHECK(Map(head + R"("output_config": {"effort": "high"}})").chat["chat_template_kwargs"] ==
        ojson::parse(R"({"reasoning_effort": "high", "enable_thinking": true})"));
  CHECK(Map(head + R"("output_config": {"effort": "none"}, "chat_template_kwargs": {"enable_thinking": true, "k": 1}})")
            .chat["chat_template_kwargs"] == ojson::parse(R"({"enable_thinking": true, "k": 1, "reasoning_effort": "none"})"));
  CHECK_FALSE(Map(head + R"("output_config": {"effort": null}})").chat.contains("chat_template_kwargs"));
  CHECK_FALSE(Map(head + R"("output_config": {"format": {"type": "text"}}})").chat.contains("chat_template_kwargs"));
  CHECK(Refused(head + R"("output_config": {"effort": 3}})").find("effort") != std::string::npos);
}

TEST_CASE("messages mapping: an empty inline system message still makes a system prompt; an empty top-level "
          "system does not") {
  auto inline_empty = Map(R"({"model": "m", "max_tokens": 1, "system": "",
      "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": ""}]})");
  CHECK(inline_empty.chat["messages"][0] == ojson::parse(R"({"role": "system", "content": ""})"));
  auto top_empty = Map(R"({"model": "m", "max_tokens": 1, "system": "", "messages": [{"role": "user", "content": "hi"}]})");
  CHECK(top_empty.chat["messages"][0]["role"] == "user");
  auto blocks_empty = Map(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"},
      {"role": "system", "content": [{"type": "text", "text": ""}]}]})");
  CHECK(blocks_empty.chat["messages"][0]["role"] == "user");
}

TEST_CASE("messages mapping: what the token path cannot carry or Anthropic would refuse is a 400 naming it") {
  CHECK(Refused(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})").find("max_tokens") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]})").find("max_tokens") !=
        std::string::npos);
  CHECK(Refused(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})").find("model") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": []})").find("messages") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image",
                 "source": {"type": "url", "url": "http://x"}}]}]})").find("image") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "document",
                 "source": {}}]}]})").find("document") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result",
                 "tool_use_id": "t", "content": [{"type": "image", "source": {}}]}]}]})").find("image") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "tool", "name": "f"},
                 "messages": [{"role": "user", "content": "x"}]})").find("tool_choice") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "tools": [{"type": "web_search_20250305", "name": "web_search"}],
                 "messages": [{"role": "user", "content": "x"}]})").find("web_search") != std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]})").find("role") !=
        std::string::npos);
  CHECK(Refused(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "mystery"}]}]})")
            .find("mystery") != std::string::npos);
  CHECK(Refused("[1]").find("JSON object") != std::string::npos);
  std::string deep = R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "x": )" +
                     std::string(500, '[') + std::string(500, ']') + "}";
  CHECK_FALSE(Refused(deep).empty());
}

TEST_CASE("python json.dumps: escapes, astral characters as surrogate pairs, key order kept") {
  CHECK(api::PythonJsonDumps(ojson::parse(R"({"z": "a\"b\\c\n\t\u0001\u007f", "a": "😀日", "n": -0.0, "f": 1e-07, "i": 100})")) ==
        R"({"z": "a\"b\\c\n\t\u0001\u007f", "a": "\ud83d\ude00\u65e5", "n": -0.0, "f": 1e-07, "i": 100})");
  CHECK(api::PythonJsonDumps(ojson::object()) == "{}");
  CHECK(api::PythonJsonDumps(ojson::array()) == "[]");
  CHECK(api::CountTokensJson(42) == R"({"input_tokens":42})");
}
