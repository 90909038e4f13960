// Issue 9: fault injection at the engine. For each misbehaviour of the mock
// engine two tenants alternate on the proxy's pooled backend connections;
// every answer must be the asking client's own (the mock echoes a nonce per
// request) or an OpenAI error with the right status, and the proxy must keep
// serving both tenants correctly once the engine behaves again.
#include <doctest/doctest.h>

#include <thread>

#include "proxy_fixture.h"

namespace toktier::test {
namespace {

using nlohmann::json;

struct FaultCase {
  MockMode mode;
  const char* name;
  int status;         // expected status of every answer
  bool streamed;      // the answer starts, then the engine resets it
  int delay_ms;       // fault_delay_ms
  bool own_tenant;    // an answer may carry another request's nonce, but only the same tenant's
};

const FaultCase kCases[] = {
    {MockMode::kInterim, "interim 103 before the response", 200, false, 40, false},
    {MockMode::kSwitching, "101 without an upgrade request", 502, false, 40, false},
    {MockMode::kTrailingBytes, "bytes after the declared body", 200, false, 50, true},
    {MockMode::kResetMidStream, "reset mid-stream", 200, true, 50, false},
    {MockMode::kBadStatusLine, "malformed status line", 502, false, 0, false},
    {MockMode::kBadHeader, "malformed header field", 502, false, 0, false},
    {MockMode::kHugeHeaders, "256 KiB of small header fields", 502, false, 0, false},
    {MockMode::kNoAnswer, "no answer", 504, false, 0, false},
    {MockMode::kSlowRead, "slow request reads", 200, false, 1, false},
    {MockMode::kCloseEarly, "close without an answer", 502, false, 0, false},
};

std::string NonceOf(const std::string& body) {
  // JSON bodies carry "nonce":"..."; SSE events too.
  const std::string key = "\"nonce\":\"";
  size_t at = body.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return body.substr(at, body.find('"', at) - at);
}

}  // namespace

TEST_CASE("engine faults: two tenants on pooled connections only ever get their own responses" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  auto cfg = TestConfig(engine);
  cfg.models.clear();
  cfg.backend_timeout_ms = 300;
  Proxy p(cfg);
  const std::string tenants[2] = {"Bearer tenant-a", "Bearer tenant-b"};
  // A 256 KiB body, so that slow reads by the engine back up the proxy's writes.
  const std::string big_body = R"({"model":"m","prompt":")" + std::string(256 * 1024, 'p') + R"("})";
  int seq = 0;
  auto ask = [&](int t, bool streamed, const std::string& body) {
    const std::string nonce = "t" + std::to_string(t) + "-" + std::to_string(seq++);
    std::map<std::string, std::string> h = {{"Authorization", tenants[t]}, {"X-Nonce", nonce}};
    HttpClient c(p.port());
    HttpResponse r = streamed ? c.Stream("/v1/completions", body, h) : c.Request("POST", "/v1/completions", body, h);
    return std::pair{nonce, r};
  };
  auto healthy_round = [&] {
    engine.mode = MockMode::kOk;
    for (int round = 0; round < 2; ++round) {
      for (int t = 0; t < 2; ++t) {
        auto [nonce, r] = ask(t, false, R"({"model":"m","prompt":"x"})");
        CHECK(r.status == 200);
        CHECK(NonceOf(r.body) == nonce);
      }
    }
  };
  healthy_round();  // fills the pool
  for (const FaultCase& fc : kCases) {
    INFO(std::string(fc.name));
    engine.fault_delay_ms = fc.delay_ms;
    engine.mode = fc.mode;
    const std::string body = fc.mode == MockMode::kSlowRead ? big_body : R"({"model":"m","prompt":"x"})";
    for (int round = 0; round < 3; ++round) {
      for (int t = 0; t < 2; ++t) {
        auto [nonce, r] = ask(t, fc.streamed, body);
        CHECK(r.status == fc.status);
        const std::string got = NonceOf(r.body);
        if (fc.status == 200) {
          if (fc.own_tenant) {
            CHECK(got.substr(0, 2) == nonce.substr(0, 2));
          } else {
            CHECK(got == nonce);
          }
        } else {
          CHECK(got.empty());
          json j = json::parse(r.body, nullptr, false);
          REQUIRE(j.is_object());
          CHECK(j["error"]["message"].is_string());
          CHECK(j["error"]["type"] == (fc.status == 504 ? "timeout" : "server_error"));
          CHECK(j["error"].contains("param"));
          CHECK(j["error"].contains("code"));
        }
        if (fc.streamed) CHECK(!r.error.empty());  // cut off, not completed
      }
    }
    // Bytes after the body that arrive while the connection is idle: the
    // pool notices them, so a later request gets its own response.
    if (fc.mode == MockMode::kTrailingBytes) {
      for (int t = 0; t < 2; ++t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * fc.delay_ms));
        auto [nonce, r] = ask(t, false, body);
        CHECK(r.status == 200);
        CHECK(NonceOf(r.body) == nonce);
      }
    }
    // Stray bytes still on their way land on idle connections, not in the
    // next round's answers.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 * fc.delay_ms));
    healthy_round();
    CHECK(HttpClient(p.port()).Request("GET", "/healthz", "").status == 200);
  }
  std::string m = HttpClient(p.port()).Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="backend_truncated"})") == 6);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="gateway_timeout"})") == 6);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="bad_gateway"})") == 30);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="backend_error"})") == -1);
  CHECK(MetricValue(m, R"(toktier_backend_requests_total{outcome="bad_response"})") == 24);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="completions",outcome="client_closed"})") == -1);
}

}  // namespace toktier::test
