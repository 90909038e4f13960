// Deeply nested JSON never reaches a recursive copy, dump or render
// (api/json_limits.h): a 100 KB chat body with 50,000 nested brackets used
// to overflow an I/O thread's stack in PlanChatForward (issue 34). Every API
// the proxy parses answers a body nested deeper than limits.json_max_depth
// with a 400 in its error shape; bodies at the bound take the token path; the
// engine's answers and the model's tool-call text are bounded the same way.
#include <doctest/doctest.h>

#include <functional>
#include <random>
#include <string>

#include "api/api.h"
#include "proxy_fixture.h"

namespace toktier::test {
namespace {

using nlohmann::json;

// `levels` arrays, one inside the other: "[[...]]".
std::string Nested(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

// `levels` objects, one inside the other, as a JSON Schema would nest them.
std::string NestedObjects(size_t levels) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += R"({"a":)";
  s += "1";
  s += std::string(levels, '}');
  return s;
}

// The nesting depth of a parsed value, recursively (the test's reference).
size_t DepthOf(const json& j) {
  if (!j.is_structured()) return 0;
  size_t inner = 0;
  for (const auto& v : j) inner = std::max(inner, DepthOf(v));
  return inner + 1;
}

const char* kChatPrefix = R"({"model":"qwen3","max_tokens":1,"messages":[{"role":"user","content":"hi"}])";

// A chat body with the deep value placed where the probe put it.
std::vector<std::pair<std::string, std::string>> DeepChatBodies(size_t levels) {
  const std::string deep = Nested(levels);
  const std::string tool_prefix = R"({"model":"qwen3","max_tokens":1,"messages":[{"role":"user","content":"hi"}],)"
                                  R"("tools":[{"type":"function","function":{"name":"f","parameters":)";
  return {
      {"an extra top-level field", std::string(kChatPrefix) + R"(,"x":)" + deep + "}"},
      {"message content", R"({"model":"qwen3","max_tokens":1,"messages":[{"role":"user","content":)" + deep + "}]}"},
      {"tool parameters", tool_prefix + NestedObjects(levels) + "}}]}"},
      {"stop", std::string(kChatPrefix) + R"(,"stop":)" + deep + "}"},
      {"an extra field on a message",
       R"({"model":"qwen3","max_tokens":1,"messages":[{"role":"user","content":"hi","x":)" + deep + "}]}"},
  };
}

}  // namespace

TEST_CASE("json nesting: the scan agrees with the parsed depth, brackets in strings and escapes included") {
  std::mt19937 rng(34);
  const std::vector<std::string> strings = {"", "[", "]", "{[", "\"", "\\", "\\\"]", "a\\\\", "]]}}", "x[\\]y"};
  // Random values: nested arrays and objects whose strings hold brackets,
  // quotes and backslashes, so the scan must follow strings and escapes.
  std::function<json(int)> make = [&](int budget) -> json {
    const int kind = budget <= 0 ? 2 : static_cast<int>(rng() % 4);
    if (kind == 0) {
      json a = json::array();
      for (int i = rng() % 3; i >= 0; --i) a.push_back(make(budget - 1));
      return a;
    }
    if (kind == 1) {
      json o = json::object();
      for (int i = rng() % 3; i >= 0; --i) o[strings[rng() % strings.size()] + std::to_string(i)] = make(budget - 1);
      return o;
    }
    if (kind == 2) return strings[rng() % strings.size()];
    return static_cast<int>(rng() % 100);
  };
  for (int i = 0; i < 2000; ++i) {
    const json v = make(static_cast<int>(rng() % 12));
    const std::string text = v.dump();
    const size_t depth = DepthOf(v);
    INFO(text);
    CHECK_FALSE(api::JsonNestingExceeds(text, depth));
    if (depth > 0) CHECK(api::JsonNestingExceeds(text, depth - 1));
  }
  CHECK(api::JsonNestingExceeds(Nested(50000), 128));
  CHECK_FALSE(api::JsonNestingExceeds("\"" + std::string(1000, '[') + "\"", 1));
  CHECK_FALSE(api::JsonNestingExceeds("[\"\\\"[[[\"]", 1));
  // Not JSON at all: never more than the brackets outside strings.
  CHECK_FALSE(api::JsonNestingExceeds("\"\\", 0));
  CHECK(api::JsonNestingExceeds("x[y", 0));
}

TEST_CASE("json nesting: ParseBoundedJson refuses too deep before parsing and parses what is within") {
  nlohmann::ordered_json out;
  CHECK(api::ParseBoundedJson(Nested(129), 128, &out) == api::JsonParseOutcome::kTooDeep);
  CHECK(out.is_discarded());
  CHECK(api::ParseBoundedJson(Nested(128), 128, &out) == api::JsonParseOutcome::kOk);
  CHECK(api::ParseBoundedJson("{\"a\":1} x", 128, &out) == api::JsonParseOutcome::kMalformed);
  CHECK(api::ParseBoundedJson("\"\xff\"", 128, &out) == api::JsonParseOutcome::kMalformed);
}

TEST_CASE("a chat body nested 50,000 deep anywhere is a 400 in every chat mode, and the proxy keeps serving") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  for (const char* mode : {"completions", "sglang", "dynamo", "vllm"}) {
    MockEngine engine;
    Proxy p(ChatConfig(engine, mode));
    HttpClient c(p.port());
    for (const auto& [where, body] : DeepChatBodies(50000)) {
      INFO(mode << ": " << where);
      const uint64_t seen = engine.requests_seen.load();
      HttpResponse r = c.Request("POST", "/v1/chat/completions", body);
      CHECK(r.status == 400);
      CHECK(IsOpenAiError(r.body));
      CHECK(r.body.find("levels deep") != std::string::npos);
      CHECK(engine.requests_seen.load() == seen);  // nothing forwarded
    }
    // Still up, same connection and a new one.
    CHECK(c.Request("POST", "/v1/chat/completions", std::string(kChatPrefix) + "}").status == 200);
    CHECK(HttpClient(p.port()).Request("GET", "/healthz", "").status == 200);
  }
}

TEST_CASE("chat bodies nested exactly to the bound take the token path; one level more is a 400") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  proxy::Config cfg = ChatConfig(engine, "sglang");
  // The largest bound --check-config accepts, so the renderer's and the
  // serializer's recursion at that depth is what runs (under ASan too).
  cfg.json_max_depth = api::kMaxJsonMaxDepth;
  Proxy p(cfg);
  HttpClient c(p.port());
  const auto shapes = DeepChatBodies(10);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string& where = shapes[i].first;
    // The levels around the deep value (10 levels are deeper than the rest
    // of the body), so that the body's depth is the bound.
    const size_t around = DepthOf(json::parse(shapes[i].second)) - 10;
    const std::string at_bound = DeepChatBodies(cfg.json_max_depth - around)[i].second;
    const std::string over = DeepChatBodies(cfg.json_max_depth - around + 1)[i].second;
    INFO(where);
    REQUIRE(DepthOf(json::parse(at_bound)) == cfg.json_max_depth);
    HttpResponse r = c.Request("POST", "/v1/chat/completions", at_bound);
    CHECK(r.status == 200);
    // Content that is a list of lists is no conversation the template can
    // render: relayed as is (counted); every other shape renders to IDs.
    if (where != "message content") {
      const auto reqs = engine.Requests();
      REQUIRE(!reqs.empty());
      CHECK(json::parse(reqs.back().body).contains("input_ids"));
    }
    r = c.Request("POST", "/v1/chat/completions", over);
    CHECK(r.status == 400);
    CHECK(IsOpenAiError(r.body));
  }
}

TEST_CASE("a completions body nested deeper than the bound is a 400, before or after the prompt") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  proxy::Config cfg = TestConfig(engine);
  cfg.json_max_depth = 32;
  Proxy p(cfg);
  HttpClient c(p.port());
  // The object is level 1: a field value nested 31 deep is at the bound.
  const std::string at_bound = Nested(31), over = Nested(32);
  const std::pair<std::string, int> bodies[] = {
      {R"({"model":"qwen3","x":)" + at_bound + R"(,"prompt":"hi","max_tokens":1})", 200},
      {R"({"model":"qwen3","prompt":"hi","max_tokens":1,"x":)" + at_bound + "}", 200},
      {R"({"model":"qwen3","x":)" + over + R"(,"prompt":"hi","max_tokens":1})", 400},
      {R"({"model":"qwen3","prompt":"hi","max_tokens":1,"x":)" + over + "}", 400},
      {R"({"model":"qwen3","prompt":"hi","max_tokens":1,"x":)" + Nested(50000) + "}", 400},
      {R"({"model":"unknown","prompt":"hi","x":)" + Nested(50000) + "}", 400},
      // Brackets inside the prompt are text, however many.
      {R"({"model":"qwen3","prompt":")" + std::string(5000, '[') + R"(","max_tokens":1})", 200},
  };
  for (const auto& [body, want] : bodies) {
    INFO(body.substr(0, 120));
    HttpResponse r = c.Request("POST", "/v1/completions", body);
    CHECK(r.status == want);
    if (want == 400) CHECK(r.body.find("levels deep") != std::string::npos);
  }
}

TEST_CASE("a model's tool call nested 50,000 deep is answered as text, not a crash") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  const std::string call = R"(<tool_call>{"name":"f","arguments":)" + Nested(50000) + "}</tool_call>";
  engine.SetCompletionText(call);
  const std::string body = R"({"model":"qwen3","max_tokens":1,"messages":[{"role":"user","content":"hi"}],)"
                           R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})";
  HttpClient c(p.port());
  HttpResponse r = c.Request("POST", "/v1/chat/completions", body);
  REQUIRE(r.status == 200);
  json j = json::parse(r.body);
  CHECK(j["choices"][0]["message"]["tool_calls"].is_null());
  CHECK(j["choices"][0]["message"]["content"].get<std::string>().size() >= call.size() - 32);
  CHECK(c.Request("GET", "/healthz", "").status == 200);
}

}  // namespace toktier::test
