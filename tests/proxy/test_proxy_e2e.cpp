// End to end through a live proxy and a mock engine on 127.0.0.1.
#include <doctest/doctest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli/cli.h"
#include "proxy_fixture.h"

namespace toktier::test {
namespace {

using nlohmann::json;

std::vector<uint32_t> Ids(const json& j) { return j.get<std::vector<uint32_t>>(); }

std::vector<std::string> SessionFiles(const std::string& format, size_t n) {
  std::vector<std::string> out;
  std::string dir = SharedWorkloadsDir();
  if (dir.empty()) return out;
  for (const char* src : {"swe-agent", "mini-swe-agent"}) {
    std::vector<std::string> files;
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(dir + "/" + src + "/" + format, ec)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i < files.size() && i < n; ++i) out.push_back(files[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("proxy: replayed workload sessions reach the engine as exact IDs") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  HttpClient client(p.port());
  size_t steps_checked = 0;
  for (auto [format, model] : {std::pair{"chatml", "qwen3"}, std::pair{"llama3", "llama3"}}) {
    auto tok = LoadTokenizer(model);
    auto files = SessionFiles(format, 2);
    for (size_t fi = 0; fi < files.size(); ++fi) {
      std::vector<std::string> prompts;
      const auto read = cli::ReadSessionPrompts(files[fi], &prompts);
    REQUIRE_MESSAGE(read.ok(), read.message());
      const bool explicit_session = fi % 2 == 0;
      std::map<std::string, std::string> headers;
      if (explicit_session) headers["X-Session-Id"] = files[fi];
      const size_t steps = std::min<size_t>(prompts.size(), 25);
      for (size_t s = 0; s < steps; ++s) {
        engine.ClearRequests();
        std::string body = CompletionBody(model, prompts[s], R"("stop":["\n\n"],"user":"t\u00e9st")");
        auto r = client.Request("POST", "/v1/completions", body, headers);
        REQUIRE(r.status == 200);
        auto reqs = engine.Requests();
        REQUIRE(reqs.size() == 1);
        json got = json::parse(reqs[0].body);
        std::vector<uint32_t> want;
        tok->Encode(prompts[s], /*add_special_tokens=*/true, want);
        INFO(files[fi] << " step " << s);
        CHECK(Ids(got["prompt"]) == want);
        json sent = json::parse(body);
        sent.erase("prompt");
        got.erase("prompt");
        CHECK(got == sent);
        ++steps_checked;
      }
    }
  }
  MESSAGE("replayed " << steps_checked << " steps");
  std::string metrics = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") >
        0);
  CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="implicit",tenant="anonymous"})") >
        0);
}

TEST_CASE("proxy: add_special_tokens, prompt lists, token prompts, unknown models") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  HttpClient client(p.port());
  auto tok = LoadTokenizer("llama3");
  const std::string text = "Hello pipeline world, \"quoted\" \\ back\nslash\ttab caf\u00e9 \U0001F600";
  std::vector<uint32_t> with, without;
  tok->Encode(text, true, with);
  tok->Encode(text, false, without);

  auto r = client.Request("POST", "/v1/completions", CompletionBody("llama3", text));
  REQUIRE(r.status == 200);
  CHECK(Ids(json::parse(engine.Requests().back().body)["prompt"]) == with);

  r = client.Request("POST", "/v1/completions", CompletionBody("llama3", text, R"("add_special_tokens":false)"));
  REQUIRE(r.status == 200);
  auto fwd = json::parse(engine.Requests().back().body);
  CHECK(Ids(fwd["prompt"]) == without);
  CHECK(fwd["add_special_tokens"] == false);

  json list = {{"model", "llama3"}, {"prompt", {text, "second prompt"}}};
  r = client.Request("POST", "/v1/completions", list.dump());
  REQUIRE(r.status == 200);
  fwd = json::parse(engine.Requests().back().body);
  std::vector<uint32_t> second;
  tok->Encode("second prompt", true, second);
  REQUIRE(fwd["prompt"].is_array());
  REQUIRE(fwd["prompt"].size() == 2);
  CHECK(Ids(fwd["prompt"][0]) == with);
  CHECK(Ids(fwd["prompt"][1]) == second);

  // Token prompts and unknown models pass through byte for byte.
  std::string tokens = R"({"model":"llama3","prompt":[1, 2,3],"max_tokens":2})";
  r = client.Request("POST", "/v1/completions", tokens);
  CHECK(r.status == 200);
  CHECK(engine.Requests().back().body == tokens);
  std::string unknown = R"({"model":"gpt-unknown","prompt":"hi there"})";
  r = client.Request("POST", "/v1/completions", unknown);
  CHECK(r.status == 200);
  CHECK(engine.Requests().back().body == unknown);
  std::string m = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, R"(toktier_passthrough_total{reason="token_prompt"})") == 1);
  CHECK(MetricValue(m, R"(toktier_passthrough_total{reason="unknown_model"})") == 1);
}

TEST_CASE("proxy: SSE streams event by event; a client that leaves cancels the backend" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  engine.mode = MockMode::kStream;
  engine.stream_events = 5;
  engine.stream_delay_ms = 150;
  Proxy p(TestConfig(engine));
  {
    HttpClient client(p.port());
    auto r = client.Stream("/v1/completions", CompletionBody("qwen3", "Say hi", R"("stream":true)"));
    REQUIRE(r.status == 200);
    CHECK(r.headers["content-type"] == "text/event-stream");
    CHECK(r.pieces.size() >= 5);
    // The first event reached the client before the engine wrote the last.
    REQUIRE(!r.pieces.empty());
    CHECK(r.pieces.front().first < engine.last_event_time());
    CHECK(r.pieces.front().second.find("tok0") != std::string::npos);
    // In order, complete.
    size_t last = 0;
    for (int i = 0; i < 5; ++i) {
      size_t at = r.body.find("tok" + std::to_string(i));
      REQUIRE(at != std::string::npos);
      CHECK(at >= last);
      last = at;
    }
    CHECK(r.body.find("data: [DONE]") != std::string::npos);
  }
  // Client disconnect after the first event.
  engine.events_sent = 0;
  engine.write_failures = 0;
  engine.stream_events = 40;
  engine.stream_delay_ms = 25;
  {
    HttpClient client(p.port());
    auto r = client.Stream("/v1/completions", CompletionBody("qwen3", "Say hi", R"("stream":true)"), {}, 1);
    CHECK(r.pieces.size() == 1);
  }
  for (int i = 0; i < 200 && engine.write_failures == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(engine.write_failures == 1);
  CHECK(engine.events_sent < 40);
}

TEST_CASE("proxy: a client that leaves before the backend answers cancels the backend request" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  engine.mode = MockMode::kStall;
  engine.stall_ms = 3000;
  Proxy p(TestConfig(engine));
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket sock(ioc);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), p.port()});
    boost::asio::write(sock, boost::asio::buffer(RawCompletionRequest(CompletionBody("qwen3", "a long generation"))));
    // Up to 2.5 s: under a loaded ctest -j the first request (tokenizer
    // load, backend connect) can take over a second to reach the engine.
    for (int i = 0; i < 500 && engine.requests_seen == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    REQUIRE(engine.requests_seen == 1);
  }  // the client closes while the engine is still working
  const auto t0 = std::chrono::steady_clock::now();
  HttpClient metrics_client(p.port());
  double cancelled = 0;
  for (int i = 0; i < 100 && cancelled < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    cancelled = MetricValue(metrics_client.Request("GET", "/metrics", "").body,
                            R"(toktier_backend_requests_total{outcome="cancelled"})");
  }
  CHECK(cancelled == 1);
  // Noticed at once, not when the engine answers (3 s after it saw the
  // request, a few ms before the close).
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(2000));
  std::string metrics = metrics_client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="completions",outcome="client_closed"})") == 1);
  // A client that leaves while its prompt is still being tokenized: the
  // backend request that follows is cancelled at once, and the cancelled
  // connect or write is not taken for a backend failure.
  engine.mode = MockMode::kOk;
  {
    boost::asio::io_context ioc;
    boost::asio::ip::tcp::socket sock(ioc);
    sock.connect({boost::asio::ip::make_address("127.0.0.1"), p.port()});
    std::string big;
    while (big.size() < 600000) big += "def handler(event, context):\n    return {'status': 200}  # é\n";
    std::string req = RawCompletionRequest(CompletionBody("qwen3", big), "X-Session-Id: leaver\r\n");
    boost::asio::write(sock, boost::asio::buffer(req));
  }
  // Up to 10 s: the 600 KB prompt is tokenized first, which takes seconds
  // under TSan on a loaded machine (milliseconds in the release build).
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (MetricValue(metrics_client.Request("GET", "/metrics", "").body,
                    R"(toktier_requests_total{endpoint="completions",outcome="client_closed"})") == 2)
      break;
  }
  metrics = metrics_client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="completions",outcome="client_closed"})") == 2);
  CHECK(MetricValue(metrics, R"(toktier_backend_requests_total{outcome="failover"})") <= 0);
  CHECK(metrics_client.Request("GET", "/readyz", "").status == 200);
  CHECK(metrics_client.Request("POST", "/v1/completions", CompletionBody("qwen3", "still fine")).status == 200);
  // A pipelined second request on one connection is not mistaken for a leave.
  HttpClient raw(p.port());
  std::string out = raw.Raw(RawCompletionRequest(CompletionBody("qwen3", "first")) +
                                RawCompletionRequest(CompletionBody("qwen3", "second")),
                            1500);
  size_t first = out.find("HTTP/1.1 200"), second = out.find("HTTP/1.1 200", first + 1);
  CHECK(first != std::string::npos);
  CHECK(second != std::string::npos);
}

TEST_CASE("proxy: passthrough is byte-exact") {
  MockEngine engine;
  auto cfg = TestConfig(engine);
  cfg.models.clear();
  Proxy p(cfg);
  HttpClient client(p.port());
  std::string body;
  for (int i = 0; i < 300000; ++i) body.push_back(static_cast<char>((i * 131) & 0xff));
  auto r = client.Request("POST", "/v1/embeddings?x=1", body, {{"Content-Type", "application/octet-stream"},
                                                                 {"X-Custom", "kept"}});
  REQUIRE(r.status == 200);
  CHECK(r.body == body);  // the mock echoes
  CHECK(r.headers["x-mock"] == "1");
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].body == body);
  CHECK(reqs[0].target == "/v1/embeddings?x=1");
  CHECK(reqs[0].headers["x-custom"] == "kept");
  r = client.Request("POST", "/tokenize", R"({"model":"m","prompt":"x"})");
  CHECK(r.status == 404);  // the mock offers no /tokenize: relayed
  r = client.Request("POST", "/detokenize", R"({"tokens":[1]})");
  CHECK(r.status == 200);
  CHECK(r.body == R"({"tokens":[1]})");
  // Streaming passthrough (chat completions are not rewritten).
  engine.mode = MockMode::kStream;
  engine.stream_delay_ms = 100;
  engine.stream_events = 3;
  auto s = client.Stream("/v1/chat/completions", R"({"model":"m","messages":[],"stream":true})");
  CHECK(s.status == 200);
  INFO("error: " << s.error << " body: " << s.body);
  CHECK(s.pieces.size() >= 3);
  CHECK(s.pieces.front().first < engine.last_event_time());
}

TEST_CASE("proxy: errors") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto cfg = TestConfig(engine);
  cfg.max_body_bytes = 1 << 20;
  cfg.backend_timeout_ms = 400;
  Proxy p(cfg);
  HttpClient client(p.port());
  auto check_error = [&](const HttpResponse& r, int status, const std::string& param = "") {
    CHECK(r.status == status);
    json j = json::parse(r.body, nullptr, false);
    REQUIRE(j.is_object());
    REQUIRE(j.contains("error"));
    CHECK(j["error"]["message"].is_string());
    CHECK(j["error"]["type"].is_string());
    CHECK(j["error"].contains("param"));
    CHECK(j["error"].contains("code"));
    if (!param.empty()) CHECK(j["error"]["param"] == param);
  };
  check_error(client.Request("POST", "/v1/completions", "{\"model\": \"qwen3\", \"prompt\": "), 400);
  check_error(client.Request("POST", "/v1/completions", "not json"), 400);
  check_error(client.Request("POST", "/v1/completions", "[1,2]"), 400);
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":42})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":{"a":1}})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":7,"prompt":"x"})"), 400, "model");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":"x","stream":"yes"})"), 400,
              "stream");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3"})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":""})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":[]})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":["a",1]})"), 400, "prompt");
  // Prompt strings are unescaped by the worker (not the parser): its errors
  // are 400s too, for plain and session requests, items of a list included.
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":"a\qb"})"), 400, "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":"\ud800 lone"})"), 400,
              "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":"\u12G4"})"), 400, "prompt");
  // A raw control character is invalid JSON (the parser rejects the body).
  check_error(client.Request("POST", "/v1/completions", std::string(R"({"model":"qwen3","prompt":"a)") + '\x01' +
                                                             R"(b"})"),
              400);
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":["ok","bad\x"]})"), 400,
              "prompt");
  check_error(client.Request("POST", "/v1/completions", R"({"model":"qwen3","prompt":"bad\x"})",
                             {{"X-Session-Id", "err-session"}}),
              400, "prompt");
  check_error(client.Request("GET", "/nope", ""), 404);
  CHECK(engine.Requests().empty());  // none of these reached the engine
  {
    HttpClient c2(p.port());
    check_error(c2.Request("POST", "/v1/completions", CompletionBody("qwen3", std::string(2 << 20, 'a'))), 413);
  }
  // Still serving after the errors.
  CHECK(client.Request("POST", "/v1/completions", CompletionBody("qwen3", "fine")).status == 200);
  // Backend errors are relayed as they are.
  engine.mode = MockMode::kFail;
  auto r = client.Request("POST", "/v1/completions", CompletionBody("qwen3", "fine"));
  CHECK(r.status == 503);
  CHECK(r.body.find("mock engine overloaded") != std::string::npos);
  // Backend timeout: 504.
  engine.mode = MockMode::kStall;
  engine.stall_ms = 1500;
  check_error(client.Request("POST", "/v1/completions", CompletionBody("qwen3", "slow")), 504);
  // Closed early: 502.
  engine.mode = MockMode::kCloseEarly;
  HttpClient c3(p.port());
  check_error(c3.Request("POST", "/v1/completions", CompletionBody("qwen3", "x")), 502);
  // Unreachable backend: 502.
  uint16_t dead_port;
  {
    MockEngine gone;
    dead_port = gone.port();
  }
  auto cfg2 = TestConfig(engine);
  cfg2.backends = {"http://127.0.0.1:" + std::to_string(dead_port)};
  Proxy p2(cfg2);
  HttpClient c4(p2.port());
  check_error(c4.Request("POST", "/v1/completions", CompletionBody("qwen3", "x")), 502);
  check_error(c4.Request("GET", "/v1/models", ""), 502);
  CHECK(c4.Request("GET", "/readyz", "").status == 503);
  CHECK(c4.Request("GET", "/healthz", "").status == 200);
}

TEST_CASE("proxy: tenants never share state; concurrent sessions" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  auto tok = LoadTokenizer("qwen3");
  std::string base;
  for (int i = 0; i < 60; ++i) base += "<|im_start|>user\nline " + std::to_string(i) + " of the shared system prompt\n";
  constexpr int kTenants = 4, kSteps = 6;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kTenants; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c(p.port());
      std::string prompt = base;
      for (int s = 0; s < kSteps; ++s) {
        prompt += "<|im_start|>assistant\nstep " + std::to_string(s) + "<|im_end|>\n";
        std::map<std::string, std::string> h = {{"Authorization", "Bearer tenant-" + std::to_string(t)}};
        if (t % 2) h["X-Session-Id"] = "same-id-for-everyone";
        auto r = c.Request("POST", "/v1/completions", CompletionBody("qwen3", prompt), h);
        if (r.status != 200) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
  // Every request's IDs are exact.
  for (const auto& r : engine.Requests()) {
    json j = json::parse(r.body);
    (void)j;
  }
  HttpClient c(p.port());
  std::string m = c.Request("GET", "/metrics", "").body;
  // Each tenant: the first request misses (even with the same text or the same
  // session id as another tenant), the rest hit.
  double hits = MetricValue(m, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="authenticated"})") +
                MetricValue(m, R"(toktier_state_lookups_total{result="hit",session="implicit",tenant="authenticated"})");
  double misses =
      std::max(0.0, MetricValue(m, R"(toktier_state_lookups_total{result="miss",session="explicit",tenant="authenticated"})")) +
      std::max(0.0, MetricValue(m, R"(toktier_state_lookups_total{result="miss",session="implicit",tenant="authenticated"})"));
  CHECK(misses == kTenants);
  CHECK(hits == kTenants * (kSteps - 1));
  CHECK(MetricValue(m, "toktier_tenants") == kTenants);
}

TEST_CASE("proxy: metric values after a known sequence") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  HttpClient c(p.port());
  std::string prompt(2000, 'x');
  for (int i = 0; i < 200; ++i) prompt += " word" + std::to_string(i);
  std::map<std::string, std::string> h = {{"X-Session-Id", "s1"}};
  REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("qwen3", prompt), h).status == 200);  // miss, full
  REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("qwen3", prompt + " more text"), h).status == 200);
  REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("qwen3", prompt + " more text"), h).status == 200);
  REQUIRE(c.Request("POST", "/v1/completions", R"({"model":"other","prompt":"x"})").status == 200);
  REQUIRE(c.Request("POST", "/v1/completions", "{bad").status == 400);
  REQUIRE(c.Request("GET", "/v1/models", "").status == 200);
  std::string m = c.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="ok"})") == 4);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="client_error"})") == 1);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="passthrough",outcome="ok"})") == 1);
  CHECK(MetricValue(m, R"(toktier_state_lookups_total{result="miss",session="explicit",tenant="anonymous"})") == 1);
  CHECK(MetricValue(m, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") == 2);
  CHECK(MetricValue(m, R"(toktier_repair_outcomes_total{path="full"})") == 1);
  CHECK(MetricValue(m, R"(toktier_full_tokenizations_total{reason="no_state"})") == 1);
  CHECK(MetricValue(m, R"(toktier_repair_outcomes_total{path="unchanged"})") == 1);
  CHECK(MetricValue(m, R"(toktier_repair_outcomes_total{path="first_try"})") +
            std::max(0.0, MetricValue(m, R"(toktier_repair_outcomes_total{path="widened"})")) ==
        1);
  CHECK(MetricValue(m, R"(toktier_passthrough_total{reason="unknown_model"})") == 1);
  CHECK(MetricValue(m, R"(toktier_backend_requests_total{outcome="ok"})") == 5);
  CHECK(MetricValue(m, "toktier_live_sessions") == 1);
  CHECK(MetricValue(m, "toktier_state_bytes") > 2000);
  CHECK(MetricValue(m, R"(toktier_backend_healthy{backend=")" + engine.url() + "\"}") == 1);
  CHECK(MetricValue(m, R"(toktier_tokenization_seconds_count{path="full"})") == 1);
  CHECK(MetricValue(m, R"(toktier_request_duration_seconds_count{endpoint="completions"})") == 5);
}

TEST_CASE("proxy: the tokenizer guard switches a model to text on a mismatch") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto qwen = LoadTokenizer("qwen3");
  auto llama = LoadTokenizer("llama3");
  // The engine serves qwen3 correctly, but "llama3" with another tokenizer.
  engine.tokenize = [&](const std::string& prompt, bool add) {
    std::vector<uint32_t> ids;
    (prompt.empty() ? qwen : qwen)->Encode(prompt, add, ids);
    return ids;
  };
  auto cfg = TestConfig(engine);
  cfg.guard_enabled = true;
  Proxy p(cfg);
  HttpClient c(p.port());
  std::string m = c.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="qwen3"})") == 0);
  CHECK(MetricValue(m, R"(toktier_tokenizer_guard_text_mode{model="llama3"})") == 1);
  CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="llama3",result="mismatch"})") >= 1);
  CHECK(MetricValue(m, R"(toktier_tokenizer_guard_checks_total{model="qwen3",result="match"})") >= 1);
  std::string body = CompletionBody("llama3", "text goes through unchanged");
  REQUIRE(c.Request("POST", "/v1/completions", body).status == 200);
  CHECK(engine.Requests().back().body == body);
  body = CompletionBody("qwen3", "ids for this one");
  REQUIRE(c.Request("POST", "/v1/completions", body).status == 200);
  std::vector<uint32_t> want;
  qwen->Encode("ids for this one", true, want);
  CHECK(Ids(json::parse(engine.Requests().back().body)["prompt"]) == want);
  (void)llama;
}

TEST_CASE("proxy: a full tokenization queue forwards text (overload passthrough)" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto cfg = TestConfig(engine);
  cfg.workers = 1;
  cfg.worker_queue_capacity = 0;  // always full
  Proxy p(cfg);
  HttpClient c(p.port());
  for (int i = 0; i < 3; ++i) {
    std::string body = CompletionBody("qwen3", "busy " + std::to_string(i));
    auto r = c.Request("POST", "/v1/completions", body);
    CHECK(r.status == 200);
    CHECK(engine.Requests().back().body == body);
  }
  std::string m = c.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, "toktier_overload_passthrough_total") == 3);
}

TEST_CASE("proxy: failover to a healthy backend; rendezvous affinity" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine a, b;
  auto cfg = TestConfig(a);
  cfg.backends = {a.url(), b.url()};
  auto p = std::make_unique<Proxy>(cfg);
  HttpClient c(p->port());
  // One session sticks to one backend.
  for (int i = 0; i < 5; ++i) {
    REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("qwen3", "hello " + std::to_string(i)),
                      {{"X-Session-Id", "sticky"}})
                .status == 200);
  }
  CHECK((a.Requests().size() == 5) != (b.Requests().size() == 5));
  // Sessions spread over both.
  for (int i = 0; i < 40; ++i) {
    c.Request("POST", "/v1/completions", CompletionBody("qwen3", "x"), {{"X-Session-Id", "s" + std::to_string(i)}});
  }
  CHECK(a.Requests().size() > 5);
  CHECK(b.Requests().size() > 5);
}

}  // namespace toktier::test

namespace toktier::test {

TEST_CASE("proxy: passthrough requests go to their model's own pool") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine shared_pool, qwen_pool;
  auto cfg = TestConfig(shared_pool);
  for (auto& m : cfg.models) {
    if (m.name == "qwen3") m.backends = {qwen_pool.url()};
  }
  cfg.models[0].aliases = {"Qwen/Qwen3-8B"};
  Proxy p(cfg);
  HttpClient client(p.port());
  const std::string chat = R"({"messages":[{"role":"user","content":"hi"}],"model":"Qwen/Qwen3-8B"})";
  REQUIRE(client.Request("POST", "/v1/chat/completions", chat).status == 200);
  REQUIRE(client.Request("POST", "/tokenize", R"({"model":"qwen3","prompt":"hi"})").status == 404);
  REQUIRE(client.Request("POST", "/v1/chat/completions", R"({"model":"llama3","messages":[]})").status == 200);
  REQUIRE(client.Request("POST", "/v1/embeddings", "not json").status == 200);  // echo path of the mock
  REQUIRE(client.Request("GET", "/v1/models", "").status == 200);
  auto targets = [](MockEngine& e) {
    std::vector<std::string> out;
    for (const auto& r : e.Requests()) out.push_back(r.target);
    return out;
  };
  CHECK(targets(qwen_pool) == std::vector<std::string>{"/v1/chat/completions", "/tokenize"});
  CHECK(targets(shared_pool) == std::vector<std::string>{"/v1/chat/completions", "/v1/embeddings", "/v1/models"});
  // Byte for byte, also when routed by the body.
  CHECK(qwen_pool.Requests()[0].body == chat);
}

}  // namespace toktier::test

namespace toktier::test {

TEST_CASE("proxy: a prompt the regex engine gives up on is forwarded as text") {
  // A tokenizer whose pre-tokenizer backtracks catastrophically: PCRE2 stops
  // at its match limit, core throws, and the worker forwards the prompt as
  // text (the engine tokenizes it), counted, and drops the session's state.
  // (tests/proxy/data/backtracking_tokenizer.json: a tiny BPE whose Split
  // pattern is "(a+)+b|\\p{L}+|\\s+".)
  const std::string path = std::string(TOKTIER_SOURCE_DIR) + "/tests/proxy/data/backtracking_tokenizer.json";
  MockEngine engine;
  auto cfg = TestConfig(engine);
  proxy::ModelConfig m;
  m.name = "backtracking";
  m.tokenizer = path;
  cfg.models = {m};
  Proxy p(cfg);
  HttpClient client(p.port());
  const std::string ok_body = R"({"model":"backtracking","prompt":"hello world"})";
  REQUIRE(client.Request("POST", "/v1/completions", ok_body, {{"X-Session-Id", "bt"}}).status == 200);
  CHECK(nlohmann::json::parse(engine.Requests().back().body)["prompt"].is_array());
  const std::string evil = R"({"model":"backtracking","prompt":"hello world )" + std::string(40, 'a') + R"(c"})";
  engine.ClearRequests();
  REQUIRE(client.Request("POST", "/v1/completions", evil, {{"X-Session-Id", "bt"}}).status == 200);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].body == evil);  // unchanged, byte for byte
  std::string metrics = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_passthrough_total{reason="tokenizer_error"})") == 1);
  // The session goes on (its state was dropped: a miss, then exact IDs again).
  engine.ClearRequests();
  REQUIRE(client.Request("POST", "/v1/completions", ok_body, {{"X-Session-Id", "bt"}}).status == 200);
  CHECK(nlohmann::json::parse(engine.Requests().back().body)["prompt"].is_array());
}

}  // namespace toktier::test
