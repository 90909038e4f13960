// RFC 9112 rules a held-out probe found missing (issue 34): Host, HTTP/1.0
// persistence, closing after a request line the proxy will not serve, one
// invalid-UTF-8 rule for every API, and a client that stops reading a
// stream, which must not hold the engine's stream for backend_timeout_ms.
#include <doctest/doctest.h>

#include <thread>

#include "proxy_fixture.h"
#include "raw_socket.h"

namespace toktier::test {
namespace {

using Clock = std::chrono::steady_clock;

// The value of `name` in the first response's header ("" when absent).
std::string RawHeader(const std::string& raw, const std::string& name) {
  const std::string head = raw.substr(0, raw.find("\r\n\r\n"));
  std::string lower_head = head;
  for (char& ch : lower_head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const size_t at = lower_head.find("\r\n" + name + ":");
  if (at == std::string::npos) return "";
  const size_t from = at + name.size() + 3;
  std::string v = head.substr(from, head.find("\r\n", from) - from);
  while (!v.empty() && v.front() == ' ') v.erase(0, 1);
  return v;
}

}  // namespace

TEST_CASE("Host: an HTTP/1.1 request needs exactly one valid Host field, else 400 and close") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  const std::string next = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
  const char* bad[] = {
      "GET /v1/models HTTP/1.1\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
      "GET /v1/models HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a/b\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a@b\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a:b\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: a:80:80\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: [::1\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: [zz]\r\n\r\n",
  };
  for (const char* request : bad) {
    INFO(std::string(request));
    RawSocket s(p.port());
    REQUIRE(s.Send(std::string(request) + next));
    std::string out = s.Read(3000);
    CHECK(RawStatus(out) == 400);
    CHECK(IsOpenAiError(RawBody(out)));
    CHECK(out.find("HTTP/1.1 200") == std::string::npos);  // the next request was not served
    CHECK(s.closed_by_peer());
  }
  CHECK(engine.requests_seen.load() == 0);
  const char* good[] = {
      "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: [::1]:8000\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost: my-gateway.example\r\n\r\n",
      "GET /v1/models HTTP/1.1\r\nHost:\r\n\r\n",           // empty: allowed (RFC 9112 3.2)
      "GET /v1/models HTTP/1.0\r\n\r\n",                     // HTTP/1.0 may leave it out
  };
  for (const char* request : good) {
    INFO(std::string(request));
    RawSocket s(p.port());
    REQUIRE(s.Send(request));
    CHECK(RawStatus(s.Read(3000, "\r\n\r\n")) == 200);
  }
}

TEST_CASE("HTTP/1.0 keep-alive: the answer says keep-alive and the connection serves the next request") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  {  // Local answers and relayed ones alike.
    RawSocket s(p.port());
    for (const char* target : {"/healthz", "/v1/models", "/healthz"}) {
      INFO(target);
      REQUIRE(s.Send(std::string("GET ") + target + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
      std::string out = s.Read(3000, "\r\n\r\n");
      REQUIRE(RawStatus(out) == 200);
      CHECK(RawHeader(out, "connection") == "keep-alive");
      // The body follows with a Content-Length: read it out before the next.
      const size_t len = std::stoul(RawHeader(out, "content-length"));
      while (RawBody(out).size() < len && !s.closed_by_peer()) out += s.Read(500);
      CHECK_FALSE(s.closed_by_peer());
    }
  }
  {  // Without keep-alive an HTTP/1.0 client waits for the close: it gets it.
    RawSocket s(p.port());
    REQUIRE(s.Send("GET /v1/models HTTP/1.0\r\n\r\n"));
    const auto t0 = Clock::now();
    std::string out = s.Read(3000);
    CHECK(RawStatus(out) == 200);
    CHECK(s.closed_by_peer());
    CHECK(Clock::now() - t0 < std::chrono::seconds(2));
  }
}

TEST_CASE("a request line the proxy will not serve (CONNECT, absolute URI) is answered 400 and the connection closed") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  const char* lines[] = {
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
      "GET http://example.com/v1/models HTTP/1.1\r\nHost: example.com\r\n\r\n",
      "GET /v1/../admin HTTP/1.1\r\nHost: x\r\n\r\n",
  };
  for (const char* line : lines) {
    INFO(std::string(line));
    RawSocket s(p.port());
    // What a tunnel would carry next must not be read as a request.
    REQUIRE(s.Send(std::string(line) + "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string out = s.Read(3000);
    CHECK(RawStatus(out) == 400);
    CHECK(IsOpenAiError(RawBody(out)));
    CHECK(out.find("HTTP/1.1 200") == std::string::npos);
    CHECK(s.closed_by_peer());
  }
  CHECK(engine.requests_seen.load() == 0);
}

TEST_CASE("invalid UTF-8 in a request body is a 400 on every API the proxy reads, whatever the model") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  proxy::Config cfg = TestConfig(engine);
  cfg.chat_forward = api::ChatForward::kSglang;
  Proxy p(cfg);
  HttpClient c(p.port());
  const std::string bad = "caf\xe9 \xff\xfe";
  const std::pair<std::string, std::string> requests[] = {
      {"/v1/chat/completions", R"({"model":"qwen3","messages":[{"role":"user","content":")" + bad + R"("}]})"},
      {"/v1/chat/completions", R"({"model":"not-configured","messages":[{"role":"user","content":")" + bad + R"("}]})"},
      {"/v1/chat/completions", R"({"model":")" + bad + R"(","messages":[{"role":"user","content":"hi"}]})"},
      {"/v1/completions", R"({"model":"qwen3","prompt":")" + bad + R"("})"},
      {"/v1/completions", R"({"model":"not-configured","prompt":")" + bad + R"("})"},
  };
  for (const auto& [target, body] : requests) {
    INFO(target << " " << body);
    HttpResponse r = c.Request("POST", target, body);
    CHECK(r.status == 400);
    CHECK(IsOpenAiError(r.body));
  }
  CHECK(engine.requests_seen.load() == 0);
}

TEST_CASE("a client that stops reading a stream is cut off after client_write_timeout_ms and the engine's stream cancelled" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  engine.mode = MockMode::kStream;
  engine.stream_events = 2'000'000;  // far more than the socket buffers hold
  engine.stream_delay_ms = 0;
  proxy::Config cfg = PlainConfig(engine);
  cfg.client_write_timeout_ms = 300;
  cfg.backend_timeout_ms = 600000;
  Proxy p(cfg);
  RawSocket s(p.port());
  REQUIRE(s.Send(RawPost("/v1/completions", R"({"model":"m","prompt":"x","stream":true})")));
  // Read the head, then nothing more.
  REQUIRE(RawStatus(s.Read(3000, "\r\n\r\n")) == 200);
  const auto t0 = Clock::now();
  // The proxy gives up on this client and closes the engine's connection:
  // the engine's next writes fail.
  while (engine.write_failures.load() == 0 && Clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(engine.write_failures.load() > 0);
  CHECK(Clock::now() - t0 < std::chrono::seconds(20));
  CHECK(MetricEventually(p.port(), R"(toktier_requests_total{endpoint="completions",outcome="client_write_timeout"})",
                         1) == 1);
  CHECK(MetricEventually(p.port(), R"(toktier_backend_requests_total{outcome="cancelled"})", 1) == 1);
  // A client that reads keeps its stream however long it runs.
  engine.stream_events = 6;
  engine.stream_delay_ms = 500;  // each event later than client_write_timeout_ms
  HttpClient c(p.port());
  HttpResponse r = c.Stream("/v1/completions", R"({"model":"m","prompt":"x","stream":true})");
  CHECK(r.status == 200);
  CHECK(r.body.find("[DONE]") != std::string::npos);
}

}  // namespace toktier::test
