// Issue 13 / 14 in the proxy: a long state miss is encoded on the encode pool
// (cut at proven cut points), offered to the GPU first (no device here: the
// route is counted), and the engine receives exactly the reference IDs;
// misses below the thresholds stay on their worker.
#include <doctest/doctest.h>

#include "proxy_fixture.h"

namespace toktier::test {
namespace {

using nlohmann::json;

std::string LongPrompt(size_t bytes, const std::string& salt) {
  std::string s = salt;
  const char* words[] = {" The", " state", " tier", " keeps", " every", " session", "'s", " tokens", ",", ".\n",
                         " caf\xC3\xA9", " 1234", "\n\n", "    int x = f(y);", " <|im_end|>", " naïve"};
  for (size_t i = 0; s.size() < bytes; ++i) s += words[(i * 7 + i / 3) % 16];
  return s;
}

}  // namespace

TEST_CASE("long misses use the encode pool, exact IDs, counted; the GPU route is counted" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  proxy::Config c = TestConfig(engine);
  c.encode_threads = 2;
  c.encode_parallel_min_bytes = 64 << 10;
  Proxy p(c);
  HttpClient client(p.port());
  size_t i = 0;
  for (const char* model : {"qwen3", "llama3"}) {
    auto tok = LoadTokenizer(model);
    for (size_t bytes : {size_t{300} << 10, size_t{1} << 10}) {
      engine.ClearRequests();
      // A new session each time (a miss), with and without a session header.
      const std::string prompt = LongPrompt(bytes, "case " + std::to_string(i++) + ":");
      std::map<std::string, std::string> headers;
      if (i % 2) headers["X-Session-Id"] = "parallel-miss-" + std::to_string(i);
      auto r = client.Request("POST", "/v1/completions", CompletionBody(model, prompt), headers);
      REQUIRE(r.status == 200);
      auto reqs = engine.Requests();
      REQUIRE(reqs.size() == 1);
      std::vector<uint32_t> want;
      tok->Encode(prompt, true, want);
      CHECK(json::parse(reqs[0].body)["prompt"].get<std::vector<uint32_t>>() == want);
    }
  }
  const std::string m = client.Request("GET", "/metrics", "").body;
  // The two long misses went parallel; the short ones never reached the pool.
  CHECK(MetricValue(m, "toktier_encode_parallel_total{result=\"parallel\"}") == 2);
  CHECK(MetricValue(m, "toktier_encode_parallel_total{result=\"pool_busy\"}") == 0);
  // No device in this build's tests: long misses are counted as no_device
  // (a device machine's run counts them as device), short ones below_threshold.
  const double device = MetricValue(m, "toktier_gpu_route_total{route=\"device\"}");
  const double no_device = MetricValue(m, "toktier_gpu_route_total{route=\"no_device\"}");
  CHECK(device + no_device == 2);
  CHECK(MetricValue(m, "toktier_gpu_route_total{route=\"below_threshold\"}") == 2);
}

TEST_CASE("encode.threads 1 keeps every miss on its worker; gpu.enabled false offers nothing" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  proxy::Config c = TestConfig(engine);
  c.encode_threads = 1;
  c.gpu_enabled = false;
  c.state_enabled = false;  // stateless: every prompt a full tokenization
  Proxy p(c);
  HttpClient client(p.port());
  auto tok = LoadTokenizer("llama3");
  const std::string prompt = LongPrompt(200 << 10, "stateless:");
  auto r = client.Request("POST", "/v1/completions", CompletionBody("llama3", prompt));
  REQUIRE(r.status == 200);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  std::vector<uint32_t> want;
  tok->Encode(prompt, true, want);
  CHECK(json::parse(reqs[0].body)["prompt"].get<std::vector<uint32_t>>() == want);
  const std::string m = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, "toktier_encode_parallel_total{result=\"parallel\"}") == 0);
  CHECK(MetricValue(m, "toktier_gpu_route_total{route=\"no_device\"}") == 0);
  CHECK(MetricValue(m, "toktier_gpu_route_total{route=\"below_threshold\"}") == 0);
}

}  // namespace toktier::test
