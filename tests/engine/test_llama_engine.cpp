// Issue 10: a real engine behind the proxy. llama.cpp (node-llama-cpp 3.21.1,
// tools/engine/llama_engine.mjs) serves tiny GGUF models that carry the real
// Llama 3.1 and Qwen3 vocabularies, so llama.cpp's own tokenizer is a second,
// independent reference beside HF, and greedy decoding on the IDs toktier
// forwards can be compared with decoding on the text sent straight to it.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine_process.h"
#include "http_client.h"
#include "proxy/server.h"
#include "cli/cli.h"
#include "test_support.h"

using nlohmann::json;
using namespace toktier;
using namespace toktier::test;

namespace {

// Model name -> (tokenizer for toktier, workload rendering).
struct Family {
  const char* model;
  const char* tokenizer;
  const char* format;
};
constexpr Family kFamilies[] = {{"llama3.1", "llama3_1", "llama3"}, {"qwen3", "qwen3", "chatml"}};

// One engine for the whole binary: each model loads in 2-3 s.
EngineProcess& Engine() {
  static std::unique_ptr<EngineProcess> engine;
  if (!engine) {
    auto log = std::filesystem::temp_directory_path() / ("toktier_llama_engine_" + std::to_string(getpid()) + ".log");
    engine = std::make_unique<EngineProcess>(std::vector<std::string>{"llama3.1", "qwen3"}, 32768, log.string());
  }
  return *engine;
}

// The engine, its models and the tokenizer files: a missing one fails the
// calling case.
void RequireEngineAndTokenizers() {
  RequireEngine({"llama3.1", "qwen3"});
  REQUIRE_MESSAGE((LoadTokenizer("llama3_1") && LoadTokenizer("qwen3")), "tokenizer files missing: run tools/dev.sh setup");
}

proxy::Config ProxyConfig(const std::string& engine_url, std::vector<std::string> extra_canaries = {}) {
  proxy::Config c;
  c.port = 0;
  c.backends = {engine_url};
  c.data_dir = "";
  c.health_interval_ms = 100;
  c.guard_enabled = true;  // at start: the engine's /tokenize against ours
  c.guard_extra_canaries = std::move(extra_canaries);
  c.shadow_sample_rate = 0;
  c.drain_timeout_ms = 2000;
  for (const auto& f : kFamilies) {
    proxy::ModelConfig m;
    m.name = f.model;
    m.tokenizer = TokenizerPath(f.tokenizer);
    c.models.push_back(m);
  }
  return c;
}

std::vector<uint32_t> Ids(const json& a) {
  std::vector<uint32_t> out;
  for (const auto& x : a) out.push_back(x.get<uint32_t>());
  return out;
}

std::vector<uint32_t> EngineTokenize(HttpClient& direct, const std::string& model, const std::string& text) {
  auto r = direct.Request("POST", "/tokenize", json{{"model", model}, {"prompt", text}}.dump());
  REQUIRE(r.status == 200);
  return Ids(json::parse(r.body)["tokens"]);
}

std::vector<uint32_t> Ours(const char* tokenizer, const std::string& text) {
  std::vector<uint32_t> ids;
  LoadTokenizer(tokenizer)->Encode(text, /*add_special_tokens=*/true, ids);
  return ids;
}

double Metric(HttpClient& c, const std::string& series) {
  std::string text = c.Request("GET", "/metrics", "").body;
  size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + series.size() + 2));
}

// The first `n` session files of a workload rendering, sorted.
std::vector<std::string> Sessions(const std::string& format, size_t n) {
  std::vector<std::string> out;
  const std::string root = SharedWorkloadsDir();
  if (root.empty()) return out;
  for (const char* agent : {"mini-swe-agent", "swe-agent"}) {
    std::filesystem::path dir = std::filesystem::path(root) / agent / format;
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) continue;
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i < files.size() && out.size() < n; ++i) out.push_back(files[i]);
  }
  return out;
}

// A session's prompts, shortened to what the tiny model evaluates quickly:
// the calls while the prompt stays under max_bytes (at least the first).
std::vector<std::string> ShortPrompts(const std::string& file, size_t max_calls, size_t max_bytes) {
  std::vector<std::string> prompts, out;
  const auto read = cli::ReadSessionPrompts(file, &prompts);
    REQUIRE_MESSAGE(read.ok(), read.message());
  for (const auto& p : prompts) {
    if (out.size() >= max_calls || (p.size() > max_bytes && !out.empty())) break;
    out.push_back(p.size() > max_bytes ? p.substr(0, max_bytes - max_bytes % 4) : p);
  }
  // A cut may split a UTF-8 character: back up to a character start.
  for (auto& p : out) {
    while (!p.empty() && (static_cast<unsigned char>(p.back()) & 0xC0) == 0x80) p.pop_back();
    if (!p.empty() && static_cast<unsigned char>(p.back()) >= 0xC0) p.pop_back();
  }
  return out;
}

size_t CommonPrefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// SSE events of a completion stream without the fields that name the call
// (id, created) or time it (timings).
std::vector<json> Events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    if (ev.rfind("data: ", 0) != 0) continue;
    ev = ev.substr(6);
    if (ev == "[DONE]") {
      out.push_back("[DONE]");
      continue;
    }
    json j = json::parse(ev);
    j.erase("id");
    j.erase("created");
    j.erase("timings");
    out.push_back(j);
  }
  return out;
}

}  // namespace

TEST_CASE("replayed sessions through toktier reach llama.cpp as its own tokenization; the guard "
          "matches; the engine evaluates only each call's new tail") {
  RequireEngineAndTokenizers();
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  HttpClient direct(Engine().port);
  proxy::Server server(ProxyConfig(Engine().url()));
  const core::Status started = server.Start();
  REQUIRE_MESSAGE(started.ok(), started.message());
  HttpClient client(server.port());
  for (const auto& f : kFamilies) {
    const std::string m = f.model;
    CHECK(Metric(client, "toktier_tokenizer_guard_checks_total{model=\"" + m + "\",result=\"match\"}") == 3);
    CHECK(Metric(client, "toktier_tokenizer_guard_checks_total{model=\"" + m + "\",result=\"mismatch\"}") == -1);
  }

  size_t calls = 0, prompt_tokens = 0, evaluated = 0;
  for (const auto& f : kFamilies) {
    std::vector<uint32_t> context;  // what the engine's sequence holds: last prompt + generated
    auto files = Sessions(f.format, 2);
    REQUIRE(!files.empty());
    for (size_t fi = 0; fi < files.size(); ++fi) {
      auto prompts = ShortPrompts(files[fi], 10, 60000);
      std::map<std::string, std::string> headers;
      if (fi == 0) headers["X-Session-Id"] = files[fi];  // the other one is found by content
      for (size_t s = 0; s < prompts.size(); ++s) {
        INFO(files[fi] << " call " << s);
        json body = {{"model", f.model}, {"prompt", prompts[s]}, {"max_tokens", 2},
                     {"temperature", 0}, {"return_token_ids", true}};
        auto r = client.Request("POST", "/v1/completions", body.dump(), headers);
        REQUIRE_MESSAGE(r.status == 200, r.body);
        json j = json::parse(r.body);
        auto forwarded = Ids(j["choices"][0]["prompt_token_ids"]);
        // The IDs toktier sent equal llama.cpp's own tokenization of the text
        // and toktier's full tokenization (= HF, tests/differential).
        CHECK(forwarded == EngineTokenize(direct, f.model, prompts[s]));
        CHECK(forwarded == Ours(f.tokenizer, prompts[s]));
        // Prompt cache: the engine keeps the common prefix with what it last
        // held and evaluates the rest (the last prompt token at least).
        size_t cached = std::min(CommonPrefix(context, forwarded), forwarded.size() - 1);
        CHECK(j["usage"]["prompt_tokens_details"]["cached_tokens"].get<size_t>() == cached);
        CHECK(j["timings"]["prompt_n"].get<size_t>() == forwarded.size() - cached);
        context = forwarded;
        for (const auto& t : j["choices"][0]["token_ids"]) context.push_back(t.get<uint32_t>());
        // A length stop leaves the last sampled token unevaluated.
        if (j["choices"][0]["finish_reason"] == "length") context.pop_back();
        ++calls;
        prompt_tokens += forwarded.size();
        evaluated += forwarded.size() - cached;
      }
    }
  }
  MESSAGE(calls << " calls, " << prompt_tokens << " prompt tokens, " << evaluated << " evaluated by the engine");
  CHECK(evaluated * 3 < prompt_tokens);
  // A sample against the Node HF reference as well (the last prompt of one session).
  auto prompts = ShortPrompts(Sessions("llama3", 1).at(0), 10, 60000);
  auto ref = RunNodeTool("ref_encode.js --tokenizer " + TokenizerPath("llama3_1") + " --add-special-tokens",
                         json{{"text", prompts.back()}}.dump() + "\n");
  REQUIRE(ref.has_value());
  CHECK(Ids(json::parse(ref->at(0))) == EngineTokenize(direct, "llama3.1", prompts.back()));
  server.Shutdown();
}

TEST_CASE("greedy completions and their streams through toktier equal those for the text sent "
          "straight to llama.cpp") {
  RequireEngineAndTokenizers();
  std::vector<std::pair<std::string, std::string>> cases = {
      {"llama3.1", "The quick brown fox jumps over the lazy dog. def main():\n    print(\"hello\")\n"},
      {"qwen3", "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n"},
      {"llama3.1", "<|start_header_id|>user<|end_header_id|>\n\nsummarize: caf\u00e9 na\u00efve \u65e5\u672c "
                   "\U0001F600<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"}};
  if (!SharedWorkloadsDir().empty()) {
    for (const auto& f : kFamilies) cases.emplace_back(f.model, ShortPrompts(Sessions(f.format, 1).at(0), 3, 12000).back());
  }
  HttpClient direct(Engine().port);
  proxy::Server server(ProxyConfig(Engine().url()));
  const core::Status started = server.Start();
  REQUIRE_MESSAGE(started.ok(), started.message());
  HttpClient client(server.port());
  size_t nonempty = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& [model, text] = cases[i];
    INFO("case " << i << " (" << model << ")");
    // cache_prompt false: both sides evaluate the whole prompt in the same
    // batches, so the logits are computed identically.
    json body = {{"model", model}, {"prompt", text}, {"max_tokens", 12}, {"temperature", 0},
                 {"return_token_ids", true}, {"cache_prompt", false}};
    if (i == 1) body["stop"] = {"\n\n", "<|im_end|>"};
    auto a = direct.Request("POST", "/v1/completions", body.dump());
    auto b = client.Request("POST", "/v1/completions", body.dump());
    REQUIRE_MESSAGE(a.status == 200, a.error);
    REQUIRE_MESSAGE(b.status == 200, b.error);
    json ja = json::parse(a.body), jb = json::parse(b.body);
    CHECK(jb["choices"][0]["prompt_token_ids"] == ja["choices"][0]["prompt_token_ids"]);
    CHECK(jb["choices"][0]["token_ids"] == ja["choices"][0]["token_ids"]);
    CHECK(jb["choices"][0]["text"] == ja["choices"][0]["text"]);
    CHECK(jb["choices"][0]["finish_reason"] == ja["choices"][0]["finish_reason"]);
    CHECK(jb["usage"]["prompt_tokens"] == ja["usage"]["prompt_tokens"]);
    CHECK(jb["usage"]["completion_tokens"] == ja["usage"]["completion_tokens"]);
    nonempty += !jb["choices"][0]["text"].get<std::string>().empty();

    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    auto sa = direct.Stream("/v1/completions", body.dump());
    auto sb = client.Stream("/v1/completions", body.dump());
    REQUIRE(sa.status == 200);
    REQUIRE(sb.status == 200);
    CHECK(sb.headers["content-type"] == "text/event-stream");
    auto ea = Events(sa.body), eb = Events(sb.body);
    CHECK(ea.size() >= 3);
    CHECK(eb == ea);
    // The stream says what the plain response said.
    std::string streamed;
    for (const auto& e : eb) {
      if (e.is_object() && !e["choices"].empty()) streamed += e["choices"][0]["text"].get<std::string>();
    }
    CHECK(streamed == jb["choices"][0]["text"].get<std::string>());
    CHECK(sb.pieces.size() > 1);  // relayed as it came, not buffered
  }
  CHECK(nonempty == cases.size());
  server.Shutdown();
}

TEST_CASE("where llama.cpp tokenizes differently from HF, the guard switches the model to text") {
  RequireEngineAndTokenizers();
  // Findings (docs/engine.md): llama.cpp as bundled by node-llama-cpp 3.21.1
  // applies no NFC normalizer for Qwen3 (U+2126 OHM SIGN stays itself; HF
  // maps it to U+03A9), and its Unicode tables predate Unicode 16 (U+10D52,
  // a Garay letter of Unicode 16, is no letter to it, which moves the split
  // of "'s").
  const std::string qwen_canary = "resistance in \u2126 (ohm sign)";
  const std::string llama_canary = "\U00010D52's";
  HttpClient direct(Engine().port);
  CHECK(EngineTokenize(direct, "qwen3", qwen_canary) != Ours("qwen3", qwen_canary));
  CHECK(EngineTokenize(direct, "llama3.1", llama_canary) != Ours("llama3_1", llama_canary));
  CHECK(EngineTokenize(direct, "qwen3", "resistance in \u03a9") == Ours("qwen3", "resistance in \u03a9"));

  proxy::Server server(ProxyConfig(Engine().url(), {qwen_canary, llama_canary}));
  const core::Status started = server.Start();
  REQUIRE_MESSAGE(started.ok(), started.message());
  HttpClient client(server.port());
  for (const auto& f : kFamilies) {
    const std::string m = f.model;
    CHECK(Metric(client, "toktier_tokenizer_guard_checks_total{model=\"" + m + "\",result=\"mismatch\"}") == 1);
    CHECK(Metric(client, "toktier_tokenizer_guard_text_mode{model=\"" + m + "\"}") == 1);
  }
  // Text forwarding: the engine tokenizes the prompt itself.
  json body = {{"model", "qwen3"}, {"prompt", qwen_canary}, {"max_tokens", 1}, {"temperature", 0},
               {"return_token_ids", true}};
  auto r = client.Request("POST", "/v1/completions", body.dump());
  REQUIRE(r.status == 200);
  CHECK(Ids(json::parse(r.body)["choices"][0]["prompt_token_ids"]) == EngineTokenize(direct, "qwen3", qwen_canary));
  server.Shutdown();
}
