// Issue 11: the compatibility guard also compares chat rendering. For a
// model on the chat token path it has the engine render a canary
// conversation (vLLM: POST /v1/chat/completions/render, else POST /tokenize
// with "messages") and compares those IDs
// with its own rendering's; a difference switches the model to text, an
// engine that cannot render counts chat_unavailable and changes nothing.
// The mock's "engine rendering" is the reference: @huggingface/jinja's
// rendering of the model's template, tokenized by HF tokenizers.
#include <doctest/doctest.h>

#include <filesystem>

#include "chat/chat_template.h"
#include "api/api.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

// The reference IDs of the guard's canary conversation for qwen3, with the
// generation prompt.
std::vector<uint32_t> ReferenceCanaryIds() {
  auto cfg_path = std::filesystem::path(TokenizerPath("qwen3")).parent_path() / "tokenizer_config.json";
  ojson cfg = ojson::parse(ReadFile(cfg_path.string()).value_or("{}"));
  ojson body = api::ChatGuardCanary("qwen3");
  body["add_generation_prompt"] = true;
  ojson inputs;
  REQUIRE(chat::BuildChatInputs(body, cfg, &inputs).ok());
  auto rendered = RunNodeTool("ref_render.js", ojson{{"template", cfg["chat_template"]}, {"inputs", inputs}}.dump() + "\n");
  REQUIRE(rendered.has_value());
  REQUIRE(rendered->size() == 1);
  auto ids = RunNodeTool("ref_encode.js --tokenizer " + TokenizerPath("qwen3"),
                         json{{"text", json::parse(rendered->at(0)).get<std::string>()}, {"add_special_tokens", false}}
                                 .dump() +
                             "\n");
  REQUIRE(ids.has_value());
  REQUIRE(ids->size() == 1);
  return json::parse(ids->at(0)).get<std::vector<uint32_t>>();
}

struct GuardedProxy {
  explicit GuardedProxy(MockEngine& engine) {
    auto qwen = LoadTokenizer("qwen3"), llama = LoadTokenizer("llama3");
    engine.tokenize = [qwen, llama](const std::string& prompt, bool add) {
      std::vector<uint32_t> ids;
      qwen->Encode(prompt, add, ids);  // plain canaries match for qwen3
      return ids;
    };
    c = TestConfig(engine);
    c.guard_enabled = true;
    c.chat_forward = api::ChatForward::kCompletions;
  }
  proxy::Config c;
};

}  // namespace

TEST_CASE("the guard compares the engine's chat rendering with ours and switches a differing model to "
          "text") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  const std::vector<uint32_t> reference = ReferenceCanaryIds();
  const ojson msgs = {{{"role", "user"}, {"content", "hi"}}};

  SUBCASE("the engine renders as the reference: match, IDs forwarded") {
    MockEngine engine;
    GuardedProxy g(engine);
    engine.tokenize_chat = [&](const std::string& request) {
      json j = json::parse(request);
      CHECK(j["add_generation_prompt"] == true);
      CHECK(j["add_special_tokens"] == false);
      CHECK(j["messages"] == json::parse(api::ChatGuardCanary("qwen3").dump())["messages"]);
      return j["model"] == "qwen3" ? reference : std::vector<uint32_t>{};
    };
    Proxy p(g.c);
    HttpClient client(p.port());
    std::string m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="chat_match"})") >= 1);
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 0);
    auto r = client.Request("POST", "/v1/chat/completions", ojson{{"model", "qwen3"}, {"messages", msgs}}.dump());
    CHECK(r.status == 200);
    CHECK(engine.Requests().back().target == "/v1/completions");
  }
  SUBCASE("the engine renders differently (another template): mismatch, the model goes to text") {
    MockEngine engine;
    GuardedProxy g(engine);
    engine.tokenize_chat = [&](const std::string&) {
      std::vector<uint32_t> other = reference;
      other.erase(other.begin() + 3);  // e.g. a template without the system block's newline
      return other;
    };
    Proxy p(g.c);
    HttpClient client(p.port());
    std::string m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="chat_mismatch"})") >= 1);
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 1);
    const std::string body = ojson{{"model", "qwen3"}, {"messages", msgs}}.dump();
    auto r = client.Request("POST", "/v1/chat/completions", body);
    CHECK(r.status == 200);
    CHECK(engine.Requests().back().target == "/v1/chat/completions");
    CHECK(engine.Requests().back().body == body);
    m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_passthrough_total{reason="text_mode"})") == 1);
  }
  SUBCASE("the engine's render endpoint is the reference where it has one") {
    MockEngine engine;
    GuardedProxy g(engine);
    // /tokenize with messages would disagree: the render endpoint is asked first.
    engine.tokenize_chat = [&](const std::string&) { return std::vector<uint32_t>{1, 2, 3}; };
    engine.render_chat = [&](const std::string& request) {
      json j = json::parse(request);
      CHECK(j["messages"] == json::parse(api::ChatGuardCanary("qwen3").dump())["messages"]);
      return j["model"] == "qwen3" ? reference : std::vector<uint32_t>{};
    };
    g.c.guard_interval_ms = 50;
    Proxy p(g.c);
    HttpClient client(p.port());
    std::string m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="chat_match"})") >= 1);
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="chat_mismatch"})") <= 0);
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 0);
    // And a render endpoint that renders differently switches the model to text.
    {
      std::lock_guard<std::mutex> lock(engine.tokenize_mu);  // the guard's thread reads it
      engine.render_chat = [&](const std::string&) {
        std::vector<uint32_t> other = reference;
        other.pop_back();
        return other;
      };
    }
    for (int i = 0; i < 200 && MetricValue(Metrics(p.port()), R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") != 1;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    CHECK(MetricValue(Metrics(p.port()), R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 1);
  }
  SUBCASE("the engine cannot render chat (ignores messages): unavailable, nothing switched") {
    MockEngine engine;
    GuardedProxy g(engine);
    Proxy p(g.c);
    HttpClient client(p.port());
    std::string m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="chat_unavailable"})") >= 1);
    CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 0);
  }
}
