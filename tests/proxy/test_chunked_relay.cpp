// Found by issue 10's real engine: Node's http server writes a chunked
// response's last chunk ("0\r\n\r\n") on its own, after the last data chunk.
// The relay then read no body bytes and handed the serializer an empty
// buffer, which it framed as a chunk of size 0 (a last chunk) before the real
// last chunk: five stray bytes that the client read as its next response
// ("bad version"). The mock engine's last_chunk_delay_ms reproduces it.
#include <doctest/doctest.h>

#include <string>

#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;

namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a backend's last chunk arriving on its own ends the client's chunked response exactly once") {
  MockEngine engine;
  engine.mode = MockMode::kStream;
  engine.stream_events = 3;
  engine.stream_delay_ms = 5;
  engine.last_chunk_delay_ms = 30;
  proxy::Config c = TestConfig(engine);
  c.models.clear();  // model "m": relayed as is
  Proxy p(c);
  const std::string body = R"({"model":"m","prompt":"x","stream":true})";

  // The bytes on the wire: the response ends with one last chunk, nothing after.
  HttpClient raw(p.port());
  std::string wire = raw.Raw(RawCompletionRequest(body), 1500);
  REQUIRE(wire.rfind("HTTP/1.1 200", 0) == 0);
  CHECK(Count(wire, "\r\n0\r\n\r\n") == 1);
  CHECK(wire.size() >= 7);
  CHECK(wire.substr(wire.size() - 7) == "\r\n0\r\n\r\n");
  CHECK(Count(wire, "data: [DONE]") == 1);

  // On a keep-alive connection: stream, then more requests, each its own response.
  HttpClient client(p.port());
  for (int i = 0; i < 3; ++i) {
    auto s = client.Stream("/v1/completions", body);
    REQUIRE_MESSAGE(s.status == 200, s.error);
    CHECK(Count(s.body, "data: ") == 4);
    engine.mode = MockMode::kOk;
    auto r = client.Request("POST", "/v1/completions", R"({"model":"m","prompt":"y"})");
    CHECK_MESSAGE(r.status == 200, r.error);
    engine.mode = MockMode::kStream;
  }
}
