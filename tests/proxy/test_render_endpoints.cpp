// vLLM's render endpoints served by toktier (docs/agents.md, "Render
// endpoints"): /v1/chat/completions/render, /v1/messages/render and
// /v1/responses/render answer the token-in request that vLLM's
// /inference/v1/generate takes (its GenerateRequest: request_id, token_ids,
// sampling_params, model, stream, ...) without calling the engine. The IDs
// are the ones the request's own endpoint would forward (the reference
// tokenization of vLLM's rendering), taken from the session's state on later
// turns, so a router that renders before it routes gets an exact, stateful
// renderer.
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

ojson Conversation(int turns) {
  ojson messages = ojson::array();
  messages.push_back({{"role", "system"}, {"content", "You are a coding agent. Résumé: ✓"}});
  for (int i = 0; i < turns; ++i) {
    messages.push_back({{"role", "user"}, {"content", "Step " + std::to_string(i) + ": list the files in src/"}});
    if (i + 1 < turns) messages.push_back({{"role", "assistant"}, {"content", "Done with step " + std::to_string(i)}});
  }
  return messages;
}

std::vector<uint32_t> ReferenceIds(const ojson& messages) {
  ojson inputs;
  REQUIRE(chat::BuildChatInputs(ojson{{"messages", messages}}, TokenizerConfig("qwen3"), &inputs).ok());
  return ReferenceChatIds(inputs, "qwen3");
}

const char* kHitSeries = R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})";

}  // namespace

TEST_CASE("chat render answers vLLM's GenerateRequest with the reference IDs and the sampling parameters, "
          "without the engine, in every chat_forward mode; later turns come from the session's state") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  const std::vector<std::vector<uint32_t>> reference = {ReferenceIds(Conversation(2)), ReferenceIds(Conversation(3))};
  for (const std::string mode : {"completions", "sglang", "dynamo", "vllm"}) {
    INFO(mode);
    MockEngine engine;
    Proxy p(ChatConfig(engine, mode));
    HttpClient client(p.port());
    for (int turns : {2, 3}) {
      INFO("turns " << turns);
      ojson body = {{"model", "qwen3"},          {"messages", Conversation(turns)},
                    {"max_tokens", 64},          {"temperature", 0.5},
                    {"stop", {"END"}},           {"stream", true},
                    {"stream_options", {{"include_usage", true}}},
                    {"priority", 2},             {"cache_salt", "salt-1"}};
      auto r = client.Request("POST", "/v1/chat/completions/render", body.dump(), {{"X-Session-Id", "render-1"}});
      REQUIRE_MESSAGE(r.status == 200, r.body);
      json g = json::parse(r.body);
      CHECK(g["request_id"].get<std::string>().rfind("chatcmpl-", 0) == 0);
      CHECK(IdsOf(g["token_ids"]) == reference[turns - 2]);
      CHECK(g["model"] == "qwen3");
      CHECK(g["sampling_params"] == json{{"temperature", 0.5}, {"stop", {"END"}}, {"max_tokens", 64}});
      CHECK(g["stream"] == true);
      CHECK(g["stream_options"] == json{{"include_usage", true}});
      CHECK(g["priority"] == 2);
      CHECK(g["cache_salt"] == "salt-1");
    }
    CHECK(engine.Requests().empty());
    // A request is counted once the server is done with it, maybe just after the answer arrived.
    CHECK(MetricEventually(p.port(), R"(toktier_requests_total{endpoint="render",outcome="ok"})", 2) == 2);
    CHECK(MetricValue(Metrics(p.port()), kHitSeries) == 1);  // the second turn repaired the first's state
  }
}

TEST_CASE("chat render answers exactly the body the vllm mode sends to /inference/v1/generate") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "vllm"));
  HttpClient client(p.port());
  const ojson body = {{"model", "qwen3"}, {"messages", Conversation(2)}, {"max_completion_tokens", 7},
                      {"top_p", 0.9},    {"seed", 11},                  {"stream", false}};
  auto rendered = client.Request("POST", "/v1/chat/completions/render", body.dump());
  REQUIRE_MESSAGE(rendered.status == 200, rendered.body);
  client.Request("POST", "/v1/chat/completions", body.dump());
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].target == "/inference/v1/generate");
  json g = json::parse(rendered.body);
  g.erase("request_id");
  CHECK(g == json::parse(reqs[0].body));
}

TEST_CASE("a chat request's reasoning_effort reaches the template as vLLM merges it: none turns Qwen3's "
          "thinking off, unless chat_template_kwargs set enable_thinking") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  auto render = [&](const ojson& extra) {
    ojson body = {{"model", "qwen3"}, {"messages", Conversation(1)}};
    body.update(extra);
    auto r = client.Request("POST", "/v1/chat/completions/render", body.dump());
    REQUIRE_MESSAGE(r.status == 200, r.body);
    return IdsOf(json::parse(r.body)["token_ids"]);
  };
  auto reference = [&](const ojson& kwargs) {
    ojson inputs;
    REQUIRE(chat::BuildChatInputs(ojson{{"messages", Conversation(1)}, {"chat_template_kwargs", kwargs}},
                                  TokenizerConfig("qwen3"), &inputs).ok());
    return ReferenceChatIds(inputs, "qwen3");
  };
  const auto thinking_off = reference({{"reasoning_effort", "none"}, {"enable_thinking", false}});
  CHECK(render({{"reasoning_effort", "none"}}) == thinking_off);
  CHECK(thinking_off != reference(ojson::object()));  // the template's empty think block
  CHECK(render({{"reasoning_effort", "low"}}) == reference({{"reasoning_effort", "low"}, {"enable_thinking", true}}));
  CHECK(render({{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", true}}}}) ==
        reference({{"enable_thinking", true}, {"reasoning_effort", "none"}}));
  // The top-level field wins over the kwargs' own reasoning_effort.
  CHECK(render({{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"reasoning_effort", "high"}}}}) == thinking_off);
  CHECK(render({{"reasoning_effort", nullptr}}) == reference(ojson::object()));
  auto bad = client.Request("POST", "/v1/chat/completions/render",
                            ojson{{"model", "qwen3"}, {"messages", Conversation(1)}, {"reasoning_effort", 3}}.dump());
  CHECK(bad.status == 400);
}

TEST_CASE("messages and responses render answer the IDs their endpoints forward, with their sampling "
          "parameters mapped by vLLM's rules") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  struct Api {
    std::string path, body, id_prefix;
    json sampling;
  };
  const std::vector<Api> apis = {
      {"/v1/messages",
       R"({"model": "qwen3", "max_tokens": 300, "temperature": 0.2, "stop_sequences": ["</done>"],
           "system": [{"type": "text", "text": "You are Claude Code."}],
           "messages": [{"role": "user", "content": [{"type": "text", "text": "List the files, café ✓"}]},
                        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                                            "input": {"command": "ls"}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                                       "content": "a.txt"}]}],
           "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]})",
       "msg_", json{{"temperature", 0.2}, {"stop", {"</done>"}}, {"max_tokens", 300}}},
      {"/v1/responses",
       R"({"model": "qwen3", "instructions": "You are Codex.", "max_output_tokens": 500, "top_p": 0.5,
           "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List files"}]},
                     {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
                     {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}],
           "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}, {"type": "web_search"}]})",
       "resp_", json{{"top_p", 0.5}, {"max_tokens", 500}}},
  };
  for (const Api& a : apis) {
    INFO(a.path);
    MockEngine engine;
    Proxy p(ChatConfig(engine, "completions"));
    HttpClient client(p.port());
    auto rendered = client.Request("POST", a.path + "/render", a.body);
    REQUIRE_MESSAGE(rendered.status == 200, rendered.body);
    CHECK(engine.Requests().empty());
    client.Request("POST", a.path, a.body);
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    json g = json::parse(rendered.body);
    CHECK(g["request_id"].get<std::string>().rfind(a.id_prefix, 0) == 0);
    CHECK(IdsOf(g["token_ids"]) == ForwardedIds("completions", reqs[0]));
    CHECK(g["model"] == "qwen3");
    CHECK(g["stream"] == false);
    CHECK(g["sampling_params"] == a.sampling);
  }
}

TEST_CASE("render endpoints: bad bodies get the API's own error shape, what the token-in request cannot "
          "carry and unknown models are relayed to the engine's render endpoint") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  auto r = client.Request("POST", "/v1/chat/completions/render", R"({"model": "qwen3", "messages": 5})");
  CHECK(r.status == 400);
  CHECK(IsOpenAiError(r.body));
  r = client.Request("POST", "/v1/messages/render?beta=true", R"({"model": "qwen3", "max_tokens": 5, "messages": [
                       {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "AA"}}]}]})");
  CHECK(r.status == 400);
  CHECK(IsAnthropicError(r.body, "invalid_request_error"));
  r = client.Request("POST", "/v1/responses/render", R"({"model": "qwen3", "input": "hi", "previous_response_id": "r1"})");
  CHECK(r.status == 400);
  CHECK(IsOpenAiError(r.body));
  CHECK(engine.Requests().empty());
  // A chat request whose meaning the token-in request would lose is the
  // engine's to render; so is a model toktier does not serve.
  const std::string json_mode = R"({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}],
                                    "response_format": {"type": "json_object"}})";
  const std::string other = R"({"model": "other", "messages": [{"role": "user", "content": "hi"}]})";
  client.Request("POST", "/v1/chat/completions/render", json_mode);
  client.Request("POST", "/v1/chat/completions/render", other);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 2);
  CHECK(reqs[0].target == "/v1/chat/completions/render");
  CHECK(reqs[0].body == json_mode);
  CHECK(reqs[1].target == "/v1/chat/completions/render");
  CHECK(reqs[1].body == other);
  CHECK(MetricValue(Metrics(p.port()), R"(toktier_passthrough_total{reason="chat_response_format"})") == 1);
}
