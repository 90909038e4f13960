// Issue 11 with the real engine: chat completions through toktier in
// "completions" mode reach llama.cpp (tools/engine/) as the IDs of the
// rendered conversation, and the chat answers equal what llama.cpp generates
// for the same rendered prompt sent to it directly, plain and streamed.
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine_process.h"
#include "http_client.h"
#include "api/api.h"
#include "cli/cli.h"
#include "proxy/server.h"
#include "proxy/tokenize_service.h"  // LoadChatModel
#include "test_support.h"

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
using namespace toktier;
using namespace toktier::test;

namespace {

struct Family {
  const char* model;
  const char* tokenizer;
};
constexpr Family kFamilies[] = {{"llama3.1", "llama3_1"}, {"qwen3", "qwen3"}};

std::string Rendered(const Family& f, const ojson& request) {
  proxy::ModelConfig mc;
  mc.name = f.model;
  mc.tokenizer = TokenizerPath(f.tokenizer);
  mc.chat_forward = api::ChatForward::kCompletions;
  api::ChatModel cm;
  const core::Status loaded = proxy::LoadChatModel(mc, api::ChatForward::kText, &cm);
  REQUIRE_MESSAGE(loaded.ok(), loaded.message());
  api::ChatRequest req;
  api::RequestError rerr;
  REQUIRE(api::ParseChatRequest(request.dump(), &req, &rerr));
  std::string prompt;
  auto s = api::RenderChatPrompt(cm, req, 0, &prompt);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return prompt;
}

std::string StreamedContent(const std::string& body) {
  std::string content;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    std::string ev = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (ev == "[DONE]") continue;
    json c = json::parse(ev);
    REQUIRE(c["object"] == "chat.completion.chunk");
    if (c["choices"].empty()) continue;
    const json& d = c["choices"][0]["delta"];
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
  }
  return content;
}

}  // namespace

TEST_CASE("chat through toktier (completions mode) in front of llama.cpp equals direct generation on the "
          "rendered prompt") {
  RequireEngine({"llama3.1", "qwen3"});
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  REQUIRE_MESSAGE((LoadTokenizer("qwen3") && LoadTokenizer("llama3_1")), "tokenizer files missing: run tools/dev.sh setup");
  auto log = std::filesystem::temp_directory_path() / ("toktier_llama_chat_" + std::to_string(getpid()) + ".log");
  EngineProcess engine({"llama3.1", "qwen3"}, 32768, log.string());
  proxy::Config c;
  c.port = 0;
  c.backends = {engine.url()};
  c.data_dir = "";
  c.health_interval_ms = 100;
  c.shadow_sample_rate = 0;
  c.chat_forward = api::ChatForward::kCompletions;
  for (const auto& f : kFamilies) {
    proxy::ModelConfig m;
    m.name = f.model;
    m.tokenizer = TokenizerPath(f.tokenizer);
    c.models.push_back(m);
  }
  proxy::Server server(c);
  const core::Status started = server.Start();
  REQUIRE_MESSAGE(started.ok(), started.message());
  HttpClient client(server.port()), direct(engine.port);

  // Turns of one workload conversation (chatml parsed back into messages).
  std::vector<std::string> prompts;
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(SharedWorkloadsDir()) /
                                                           "mini-swe-agent" / "chatml")) {
    if (file.empty() || e.path().string() < file) file = e.path().string();
  }
  REQUIRE(cli::ReadSessionPrompts(file, &prompts).ok());
  size_t checked = 0, evaluated = 0, prompt_tokens = 0;
  for (const auto& f : kFamilies) {
    for (size_t s = 0; s < prompts.size() && s < 4 && prompts[s].size() < 24000; ++s) {
      INFO(f.model << " turn " << s);
      ojson req = {{"model", f.model}, {"messages", ChatmlMessages(prompts[s])}, {"max_tokens", 8},
                   {"temperature", 0}};
      auto r = client.Request("POST", "/v1/chat/completions", req.dump(), {{"X-Session-Id", "chat-" + file}});
      REQUIRE_MESSAGE(r.status == 200, r.body);
      json ans = json::parse(r.body);
      CHECK(ans["object"] == "chat.completion");
      evaluated += ans["usage"]["prompt_tokens"].get<size_t>() -
                   ans["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>();
      prompt_tokens += ans["usage"]["prompt_tokens"].get<size_t>();
      // The same rendered prompt straight to llama.cpp, both from scratch.
      const std::string text = Rendered(f, req);
      ojson plain = req;
      plain["cache_prompt"] = false;
      ojson dreq = {{"model", f.model}, {"prompt", text}, {"add_special_tokens", false}, {"max_tokens", 8},
                    {"temperature", 0}, {"cache_prompt", false}, {"return_token_ids", true}};
      auto a = client.Request("POST", "/v1/chat/completions", plain.dump());
      auto b = direct.Request("POST", "/v1/completions", dreq.dump());
      REQUIRE(a.status == 200);
      REQUIRE(b.status == 200);
      json ja = json::parse(a.body), jb = json::parse(b.body);
      CHECK(ja["choices"][0]["message"]["content"] == jb["choices"][0]["text"]);
      CHECK(ja["choices"][0]["finish_reason"] == jb["choices"][0]["finish_reason"]);
      CHECK(ja["usage"]["prompt_tokens"] == jb["usage"]["prompt_tokens"]);
      // Streamed through toktier: the deltas add up to the same text.
      plain["stream"] = true;
      auto st = client.Stream("/v1/chat/completions", plain.dump());
      REQUIRE(st.status == 200);
      CHECK(StreamedContent(st.body) == jb["choices"][0]["text"].get<std::string>());
      ++checked;
    }
  }
  MESSAGE(checked << " turns; the engine evaluated " << evaluated << " of " << prompt_tokens << " prompt tokens");
  CHECK(checked >= 4);  // both families, at least two turns each
  server.Shutdown();
}
