// Shared setup of the proxy end-to-end tests: a mock engine and a proxy
// configured for the npm tokenizers, both on ephemeral 127.0.0.1 ports.
#pragma once

#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "http_client.h"
#include "mock_engine.h"
#include "proxy/server.h"
#include "test_support.h"

namespace toktier::test {

// Sanitizer builds (tools/dev.sh: build/asan, build/tsan) run the same
// tests; their bounds on time and RSS do not hold there (shadow memory,
// quarantine, 2-15x slower code), so those assertions are skipped and
// everything else is checked.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
// How much smaller the multi-megabyte prompts of load cases are under the
// sanitizers (TSan runs tokenization 10-20x slower: 6 MiB prompts took
// minutes and timed CI out).
inline constexpr size_t kSanitizerShrink = kSanitizedBuild ? 8 : 1;

inline proxy::Config TestConfig(const MockEngine& engine) {
  proxy::Config c;
  c.port = 0;
  c.io_threads = 2;
  c.workers = 2;
  c.backends = {engine.url()};
  c.data_dir = "";  // memory-only store
  c.health_interval_ms = 100;
  c.guard_enabled = false;
  c.shadow_sample_rate = 0;
  c.drain_timeout_ms = 2000;
  for (const char* name : {"qwen3", "llama3"}) {
    proxy::ModelConfig m;
    m.name = name;
    m.tokenizer = TokenizerPath(name);
    c.models.push_back(m);
  }
  return c;
}

// TestConfig with every model on the chat token path in `mode` (qwen3 with
// its Hermes tool calls and <think> reasoning).
inline proxy::Config ChatConfig(const MockEngine& engine, const std::string& mode) {
  proxy::Config c = TestConfig(engine);
  const core::Status st = config::ApplyConfigJson(R"({"chat_forward": ")" + mode + "\"}", &c);
  REQUIRE_MESSAGE(st.ok(), st.message());
  for (auto& m : c.models) {
    if (m.name == "qwen3") {
      m.tool_parser = api::ToolCallFormat::kHermes;
      m.reasoning = true;
    }
  }
  return c;
}

// The two tokenizers of TestConfig. Cases REQUIRE it: the README's test
// command installs the files, so a missing one fails the case (LoadTokenizer
// already fails it) instead of letting it pass without checking anything.
inline bool TokenizersPresent() {
  return LoadTokenizer("qwen3") != nullptr && LoadTokenizer("llama3") != nullptr;
}

struct Proxy {
  explicit Proxy(proxy::Config c) : server(std::move(c)) {
    const core::Status started = server.Start();
    ok = started.ok();
    if (!ok) FAIL("proxy start: " << started.message());
  }
  uint16_t port() const { return server.port(); }
  proxy::Server server;
  bool ok = false;
};

// Value of one series in the /metrics text ("name{labels}"), -1 if absent.
inline double MetricValue(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series, pos)) != std::string::npos) {
    bool line_start = pos == 0 || text[pos - 1] == '\n';
    size_t after = pos + series.size();
    if (line_start && after < text.size() && text[after] == ' ') {
      return std::stod(text.substr(after + 1, text.find('\n', after) - after - 1));
    }
    pos = after;
  }
  return -1;
}

// A proxy without models (every request passes through; no tokenizer files
// needed) in front of `engine`.
inline proxy::Config PlainConfig(const MockEngine& engine) {
  auto c = TestConfig(engine);
  c.models.clear();
  return c;
}

// {"error": {"message": str, "type": str, "param", "code"}}: OpenAI's shape.
inline bool IsOpenAiError(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.contains("error") && j["error"].is_object() && j["error"]["message"].is_string() &&
         j["error"]["type"].is_string() && j["error"].contains("param") && j["error"].contains("code");
}

// {"type": "error", "error": {"type": str, "message": str}}: Anthropic's
// shape; `type` non-empty: the error's type too.
inline bool IsAnthropicError(const std::string& body, const std::string& type = "") {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_object() && j.value("type", "") == "error" && j.contains("error") && j["error"].is_object() &&
         j["error"]["type"].is_string() && (type.empty() || j["error"]["type"] == type) &&
         j["error"]["message"].is_string();
}

inline std::string Metrics(uint16_t port) { return HttpClient(port).Request("GET", "/metrics", "").body; }

// A connection's outcome is counted when the server has finished with it,
// which may be just after the client saw the close (later still under the
// sanitizers): poll until the series reaches `want` or 5 s pass.
inline double MetricEventually(uint16_t port, const std::string& series, double want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  double v = MetricValue(Metrics(port), series);
  while (v != want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    v = MetricValue(Metrics(port), series);
  }
  return v;
}

inline std::string CompletionBody(const std::string& model, const std::string& prompt, const std::string& extra = "") {
  nlohmann::json j = {{"model", model}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  std::string s = j.dump();
  if (!extra.empty()) s.insert(s.size() - 1, "," + extra);
  return s;
}

// The data of each SSE event of a response body, in order ("[DONE]" too).
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  for (size_t pos = 0; (pos = body.find("data: ", pos)) != std::string::npos;) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// A chat.completion.chunk stream read back, by its first choice's deltas.
struct ChatStreamRead {
  std::string content, reasoning;  // the deltas, concatenated
  int chunks = 0;                  // events with a choice
  bool done = false;               // [DONE] seen
  bool role = false;               // a delta carried the role
  bool all_chunks = true;          // every event's object was chat.completion.chunk
  nlohmann::json finish;           // the last non-null finish_reason
  nlohmann::json usage;            // the last usage object
};

inline ChatStreamRead ReadChatStream(const std::string& body) {
  ChatStreamRead r;
  for (const std::string& ev : SseData(body)) {
    if (ev == "[DONE]") {
      r.done = true;
      continue;
    }
    nlohmann::json c = nlohmann::json::parse(ev);
    r.all_chunks = r.all_chunks && c["object"] == "chat.completion.chunk";
    if (c.contains("usage")) r.usage = c["usage"];
    if (c["choices"].empty()) continue;
    const nlohmann::json& d = c["choices"][0]["delta"];
    r.role = r.role || d.contains("role");
    if (d.contains("content") && d["content"].is_string()) r.content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) r.reasoning += d["reasoning_content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) r.finish = c["choices"][0]["finish_reason"];
    ++r.chunks;
  }
  return r;
}

// POST /v1/completions as raw bytes, for tests that write to the socket
// themselves (pipelining, a client that leaves). extra_headers: "Name: v\r\n"...
inline std::string RawCompletionRequest(const std::string& body, const std::string& extra_headers = "") {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace toktier::test
