// The agent APIs' entry points as untrusted input (docs/security.md, the
// threat rows of issue 34's pass over issue 36): /v1/messages,
// /v1/messages/count_tokens, /v1/responses and the three render endpoints.
// Each bounds what it parses before it parses it and answers in its own
// API's error shape; a session a body names belongs to the caller's tenant;
// nothing a client sends can make toktier read a stored response.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;

namespace {

struct Endpoint {
  const char* path;
  bool anthropic;  // error shape
  // A valid body around `inner` (placed in a message's content, a tool's
  // schema, and a field the mapping never reads).
  std::string (*body)(const std::string& where, const std::string& inner);
};

std::string MessagesBody(const std::string& where, const std::string& inner) {
  const std::string content = where == "content" ? R"([{"type": "text", "text": "hi", "x": )" + inner + "}]" : R"("hi")";
  std::string body = R"({"model": "qwen3", "max_tokens": 5, "messages": [{"role": "user", "content": )" + content + "}]";
  if (where == "schema") body += R"(, "tools": [{"name": "t", "input_schema": {"type": "object", "x": )" + inner + "}}]";
  if (where == "unread") body += R"(, "context_management": )" + inner;
  return body + "}";
}

std::string ResponsesBody(const std::string& where, const std::string& inner) {
  const std::string part =
      where == "content" ? R"({"type": "input_text", "text": "hi", "x": )" + inner + "}" : R"({"type": "input_text", "text": "hi"})";
  std::string body = R"({"model": "qwen3", "input": [{"type": "message", "role": "user", "content": [)" + part + "]}]";
  if (where == "schema") body += R"(, "tools": [{"type": "function", "name": "t", "parameters": {"x": )" + inner + "}}]";
  if (where == "unread") body += R"(, "metadata": )" + inner;
  return body + "}";
}

std::string ChatBody(const std::string& where, const std::string& inner) {
  const std::string content = where == "content" ? R"([{"type": "text", "text": "hi", "x": )" + inner + "}]" : R"("hi")";
  std::string body = R"({"model": "qwen3", "messages": [{"role": "user", "content": )" + content + "}]";
  if (where == "schema") {
    body += R"(, "tools": [{"type": "function", "function": {"name": "t", "parameters": {"x": )" + inner + "}}}]";
  }
  if (where == "unread") body += R"(, "metadata": )" + inner;
  return body + "}";
}

const std::vector<Endpoint> kEndpoints = {
    {"/v1/messages", true, MessagesBody},
    {"/v1/messages/count_tokens", true, MessagesBody},
    {"/v1/messages/render", true, MessagesBody},
    {"/v1/responses", false, ResponsesBody},
    {"/v1/responses/render", false, ResponsesBody},
    {"/v1/chat/completions/render", false, ChatBody},
};

bool ErrorShapeOf(const Endpoint& e, const std::string& body) {
  return e.anthropic ? IsAnthropicError(body) : IsOpenAiError(body);
}

}  // namespace

TEST_CASE("agent API bodies nested 50,000 deep anywhere are a 400 in the API's own error shape before they are "
          "parsed, and the proxy keeps serving") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  for (const Endpoint& e : kEndpoints) {
    for (const std::string where : {"content", "schema", "unread"}) {
      INFO(e.path << " " << where);
      auto r = client.Request("POST", e.path, e.body(where, deep));
      CHECK(r.status == 400);
      CHECK(ErrorShapeOf(e, r.body));
      CHECK(r.body.find("levels deep") != std::string::npos);
    }
    // The same body within the bound is served (engine or toktier itself).
    INFO(e.path);
    auto ok = client.Request("POST", e.path, e.body("unread", "[[1]]"));
    CHECK_MESSAGE(ok.status == 200, ok.body);
  }
  // Nothing deep reached the engine: only the bounded /v1/messages and /v1/responses.
  for (const auto& r : engine.Requests()) CHECK(r.body.find("[[[[") == std::string::npos);
}

TEST_CASE("agent API bodies that are not UTF-8 are a 400 in the API's own error shape, whatever the model") {
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  for (const Endpoint& e : kEndpoints) {
    INFO(e.path);
    for (const std::string model : {"qwen3", "not-served"}) {
      std::string body = e.body("content", "1");
      body.replace(body.find("qwen3"), 5, model);
      body.insert(body.find("hi") + 1, "\xC3\x28");  // a broken two-byte character
      auto r = client.Request("POST", e.path, body);
      CHECK(r.status == 400);
      CHECK(ErrorShapeOf(e, r.body));
      CHECK(r.body.find("UTF-8") != std::string::npos);
    }
  }
  CHECK(engine.Requests().empty());
}

TEST_CASE("a session named in the body belongs to the caller's tenant: another tenant's same key never reaches "
          "its state, and every answer carries the caller's own IDs") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  const std::string hits = R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="authenticated"})";
  // The session each API's body names: Codex's prompt_cache_key, Claude
  // Code's metadata.user_id.
  auto body = [](bool messages, const std::string& key, const std::string& text) {
    if (!messages) return json{{"model", "qwen3"}, {"prompt_cache_key", key}, {"input", text}}.dump();
    return json{{"model", "qwen3"},
                {"max_tokens", 5},
                {"metadata", {{"user_id", json{{"session_id", key}}.dump()}}},
                {"messages", {{{"role", "user"}, {"content", text}}}}}
        .dump();
  };
  for (const bool messages : {false, true}) {
    const char* path = messages ? "/v1/messages/render" : "/v1/responses/render";
    const std::string key = messages ? "shared-key-m" : "shared-key-r";
    INFO(path);
    const std::string base(4000, 'a');
    auto as = [&](const char* tenant, const std::string& text) {
      return HttpClient(p.port()).Request("POST", path, body(messages, key, text),
                                          {{"Authorization", std::string("Bearer ") + tenant}});
    };
    const double before = std::max(0.0, MetricValue(Metrics(p.port()), hits));
    auto a1 = as("tenant-a", base + " first");
    auto a2 = as("tenant-a", base + " first and more");
    REQUIRE(a1.status == 200);
    REQUIRE(a2.status == 200);
    CHECK(MetricValue(Metrics(p.port()), hits) == before + 1);  // tenant a's second turn: its own state
    // Tenant b names the same session with a prompt that differs from a's
    // only at the end: a lookup in a's state would be a hit.
    auto b1 = as("tenant-b", base + " first and more!");
    REQUIRE(b1.status == 200);
    CHECK(MetricValue(Metrics(p.port()), hits) == before + 1);
    // Each answer is the tokenization of its own request, whatever was stored.
    auto fresh = as("tenant-c", base + " first and more!");
    CHECK(json::parse(b1.body)["token_ids"] == json::parse(fresh.body)["token_ids"]);
  }
  CHECK(engine.Requests().empty());
}

TEST_CASE("toktier stores no responses: previous_response_id and item_reference are refused, so no request can "
          "read another's conversation") {
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  for (const char* path : {"/v1/responses", "/v1/responses/render"}) {
    INFO(path);
    auto r = client.Request("POST", path, R"({"model": "qwen3", "input": "hi", "previous_response_id": "resp_1"})");
    CHECK(r.status == 400);
    CHECK(IsOpenAiError(r.body));
    CHECK(r.body.find("previous_response_id") != std::string::npos);
    r = client.Request("POST", path, R"({"model": "qwen3", "input": [{"type": "item_reference", "id": "msg_1"}]})");
    CHECK(r.status == 400);
    CHECK(IsOpenAiError(r.body));
  }
  CHECK(engine.Requests().empty());
}
