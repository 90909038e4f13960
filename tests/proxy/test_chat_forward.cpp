// Issue 11 part 2: /v1/chat/completions through the token tier. For every
// turn of replayed conversations (the chatml workloads parsed back into
// messages), the IDs the engine receives in each chat_forward mode equal the
// reference tokenization (HF) of the reference rendering (@huggingface/jinja);
// "completions" answers come back in the chat format, plain and streamed, and
// parse with the openai npm client; what cannot take the token path is relayed
// as is and counted.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "cli/cli.h"
#include "chat_reference.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string ExpectedTarget(const std::string& mode) {
  if (mode == "vllm") return "/inference/v1/generate";
  return mode == "completions" ? "/v1/completions" : "/v1/chat/completions";
}

// Conversations at each turn of the first `sessions` chatml workload files
// (calls while the prompt stays under max_bytes).
std::vector<std::vector<ojson>> Conversations(size_t sessions, size_t max_calls, size_t max_bytes) {
  std::vector<std::vector<ojson>> out;
  const std::string root = SharedWorkloadsDir();
  if (root.empty()) return out;
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(root) / "mini-swe-agent" / "chatml")) {
    files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  for (size_t i = 0; i < files.size() && out.size() < sessions; ++i) {
    std::vector<std::string> prompts;
    const auto read = cli::ReadSessionPrompts(files[i], &prompts);
    REQUIRE_MESSAGE(read.ok(), read.message());
    std::vector<ojson> turns;
    for (const auto& p : prompts) {
      if (turns.size() >= max_calls || p.size() > max_bytes) break;
      ojson messages = ChatmlMessages(p);
      if (!messages.empty()) turns.push_back(std::move(messages));
    }
    if (!turns.empty()) out.push_back(std::move(turns));
  }
  return out;
}

}  // namespace

TEST_CASE("every turn of replayed conversations reaches the engine as the reference tokenization of the "
          "reference rendering, in each chat_forward mode") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  auto convs = Conversations(2, 8, 80000);
  REQUIRE_MESSAGE(!convs.empty(), "no conversation found in " << SharedWorkloadsDir());
  const ojson cfg = TokenizerConfig("qwen3");
  const std::string tmpl = cfg["chat_template"].get<std::string>();
  // Reference inputs: the same variables transformers(.js) passes.
  std::string ref_render_in;
  size_t turns = 0;
  for (const auto& conv : convs) {
    for (const auto& messages : conv) {
      ojson inputs;
      REQUIRE(chat::BuildChatInputs(ojson{{"messages", messages}}, cfg, &inputs).ok());
      ref_render_in += ojson{{"template", tmpl}, {"inputs", inputs}}.dump() + "\n";
      ++turns;
    }
  }
  auto rendered = RunNodeTool("ref_render.js", ref_render_in);
  REQUIRE(rendered.has_value());
  REQUIRE(rendered->size() == turns);
  std::string ref_encode_in;
  for (const auto& line : *rendered) {
    json r = json::parse(line);
    REQUIRE_MESSAGE(r.is_string(), line);
    ref_encode_in += json{{"text", r.get<std::string>()}}.dump() + "\n";
  }
  auto ref_ids = RunNodeTool("ref_encode.js --tokenizer " + TokenizerPath("qwen3"), ref_encode_in);
  REQUIRE(ref_ids.has_value());
  REQUIRE(ref_ids->size() == turns);

  for (const std::string mode : {"completions", "sglang", "dynamo", "vllm"}) {
    MockEngine engine;
    Proxy p(ChatConfig(engine, mode));
    HttpClient client(p.port());
    size_t k = 0;
    for (size_t ci = 0; ci < convs.size(); ++ci) {
      std::map<std::string, std::string> headers;
      if (ci == 0) headers["X-Session-Id"] = "conversation-0";  // the other one is found by content
      for (const auto& messages : convs[ci]) {
        INFO(mode << " conversation " << ci << " turn " << k);
        engine.ClearRequests();
        ojson req = {{"model", "qwen3"}, {"messages", messages}, {"max_tokens", 8}, {"temperature", 0}};
        auto r = client.Request("POST", "/v1/chat/completions", req.dump(), headers);
        REQUIRE_MESSAGE(r.status == 200, r.body);
        auto reqs = engine.Requests();
        REQUIRE(reqs.size() == 1);
        CHECK(reqs[0].target == ExpectedTarget(mode));
        CHECK(ForwardedIds(mode, reqs[0]) == IdsOf(json::parse(ref_ids->at(k))));
        json fwd = json::parse(reqs[0].body);
        if (mode == "completions") {
          CHECK(fwd["max_tokens"] == 8);
          CHECK(!fwd.contains("messages"));
          json ans = json::parse(r.body);
          CHECK(ans["object"] == "chat.completion");
          CHECK(ans["choices"][0]["message"]["role"] == "assistant");
          CHECK(ans["choices"][0]["message"]["content"] == "ok");
          CHECK(ans["choices"][0]["finish_reason"] == "length");
        } else if (mode == "vllm") {
          // Tokens in, tokens out: the sampling parameters in their object;
          // the mock's answer (no IDs, "length") comes back as chat.
          CHECK(fwd["sampling_params"]["max_tokens"] == 8);
          CHECK(fwd["sampling_params"]["temperature"] == 0);
          CHECK(fwd["model"] == "qwen3");
          CHECK(fwd["stream"] == false);
          CHECK(!fwd.contains("messages"));
          json ans = json::parse(r.body);
          CHECK(ans["object"] == "chat.completion");
          CHECK(ans["choices"][0]["message"]["content"] == "");
          CHECK(ans["choices"][0]["finish_reason"] == "length");
        } else {
          CHECK(fwd["messages"] == json::parse(req.dump())["messages"]);  // kept for stop words and tools
        }
        ++k;
      }
    }
    std::string metrics = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") >
          0);
    CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="implicit",tenant="anonymous"})") >
          0);
    CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="chat",outcome="ok"})") == static_cast<double>(k));
  }
  MESSAGE(turns << " turns x 4 modes, every one equal to the reference");
}

TEST_CASE("completions-mode answers translate back to chat (tool calls, reasoning, streaming) and parse "
          "with the openai client") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  engine.SetCompletionText(
      "<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\"}}\n</tool_call>");
  ojson req = {{"model", "qwen3"},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
               {"tools", {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}}}};
  auto r = client.Request("POST", "/v1/chat/completions", req.dump());
  REQUIRE(r.status == 200);
  json ans = json::parse(r.body);
  const json& msg = ans["choices"][0]["message"];
  CHECK(ans["choices"][0]["finish_reason"] == "tool_calls");
  CHECK(msg["reasoning_content"] == "\nThe user wants weather.\n");
  CHECK(msg["content"].is_null());
  REQUIRE(msg["tool_calls"].size() == 1);
  CHECK(msg["tool_calls"][0]["function"]["name"] == "get_weather");
  CHECK(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()) == json{{"city", "Paris"}});

  // Streaming: the engine's SSE events become chat.completion.chunk deltas.
  engine.mode = MockMode::kStream;
  engine.stream_events = 3;
  engine.stream_delay_ms = 1;
  ojson sreq = {{"model", "qwen3"}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}};
  auto s = client.Stream("/v1/chat/completions", sreq.dump());
  REQUIRE(s.status == 200);
  ChatStreamRead read = ReadChatStream(s.body);
  CHECK(read.all_chunks);
  CHECK(read.done);
  CHECK(read.role);
  CHECK(read.content == "tok0tok1tok2");
  CHECK(read.chunks >= 2);

  // The openai npm client reads both (plain and its stream helper).
  engine.mode = MockMode::kOk;
  auto lines = RunNodeTool("../tests/proxy/data/openai_chat_check.mjs http://127.0.0.1:" +
                               std::to_string(p.port()) + "/v1 qwen3",
                           "");
  REQUIRE(lines.has_value());
  REQUIRE(lines->size() == 2);
  json plain = json::parse(lines->at(0));
  CHECK(plain["finish_reason"] == "tool_calls");
  REQUIRE(plain["tool_calls"].size() == 1);
  CHECK(plain["tool_calls"][0]["name"] == "get_weather");
  CHECK(plain["reasoning"] == "\nThe user wants weather.\n");
  json streamed = json::parse(lines->at(1));
  CHECK(streamed["mode"] == "stream");
  CHECK(streamed["finish_reason"] == "tool_calls");
  REQUIRE(streamed["tool_calls"].size() == 1);
  CHECK(streamed["tool_calls"][0]["arguments"] == plain["tool_calls"][0]["arguments"]);
}

TEST_CASE("chat requests that cannot take the token path are relayed unchanged and counted") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(ChatConfig(engine, "completions"));
  HttpClient client(p.port());
  auto send = [&](const ojson& body) {
    engine.ClearRequests();
    auto r = client.Request("POST", "/v1/chat/completions", body.dump());
    CHECK(r.status == 200);
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0].target == "/v1/chat/completions");
    CHECK(reqs[0].body == body.dump());
  };
  const ojson msgs = {{{"role", "user"}, {"content", "hi"}}};
  send({{"model", "unknown-model"}, {"messages", msgs}});  // relayed as every other /v1/ request
  send({{"model", "qwen3"}, {"messages", msgs}, {"response_format", {{"type", "json_object"}}}});
  send({{"model", "qwen3"}, {"messages", msgs}, {"tool_choice", "required"}});
  send({{"model", "qwen3"}, {"messages", msgs}, {"logprobs", true}});
  send({{"model", "qwen3"}, {"messages", msgs}, {"n", 2}});
  // A response_format whose type is not a string is a format the token path
  // cannot carry either; reading it used to throw: the connection was dropped
  // on the I/O thread, and a body large enough for the prepare pool
  // (64 KiB) ended the process.
  send({{"model", "qwen3"}, {"messages", msgs}, {"response_format", {{"type", 5}}}});
  send({{"model", "qwen3"},
        {"messages", {{{"role", "user"}, {"content", std::string(70000, 'x')}}}},
        {"response_format", {{"type", 5}}}});
  std::string metrics = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_passthrough_total{reason="chat_response_format"})") == 3);
  for (const char* reason : {"chat_tool_choice", "chat_logprobs", "chat_n"}) {
    CHECK(MetricValue(metrics, std::string("toktier_passthrough_total{reason=\"") + reason + "\"}") == 1);
  }
  // Malformed chat bodies for a token-path model are the client's error
  // (400), never forwarded.
  for (const char* bad : {R"({"model":"qwen3"})", R"({"model":"qwen3","messages":[]})",
                          R"({"model":"qwen3","messages":[{"content":"x"}]})", R"({"model":"qwen3","messages":{}})",
                          R"({"model":"qwen3","messages":[{"role":"user","content":"x"}]}{"x":1})"}) {
    engine.ClearRequests();
    auto r = client.Request("POST", "/v1/chat/completions", bad);
    CHECK_MESSAGE(r.status == 400, std::string(bad));
    CHECK(json::parse(r.body)["error"]["message"].is_string());
    CHECK(engine.Requests().empty());
  }
}
