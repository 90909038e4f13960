// Issue 9 ("Harden the data plane"), the HTTP items: each case drives a live
// proxy over raw sockets the way the attacker-style review did, and checks
// the rule that now holds (docs/security.md, "HTTP data plane").
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <fcntl.h>

#include <boost/asio/ip/tcp.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "proxy_fixture.h"
#include "raw_socket.h"

namespace toktier::test {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string Nonce(const HttpResponse& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("nonce") && j["nonce"].is_string() ? j["nonce"].get<std::string>() : "";
}

}  // namespace

TEST_CASE("interim 1xx and bytes after a body never reach another tenant's request" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  HttpClient a(p.port()), b(p.port());
  const std::map<std::string, std::string> ta = {{"Authorization", "Bearer tenant-a"}};
  const std::map<std::string, std::string> tb = {{"Authorization", "Bearer tenant-b"}};
  auto ask = [&](HttpClient& c, std::map<std::string, std::string> h, const std::string& nonce) {
    h["X-Nonce"] = nonce;
    return c.Request("POST", "/v1/completions", R"({"model":"m","prompt":"x"})", h);
  };
  // 103 Early Hints, the final response 60 ms later: each client gets its own
  // final response, never the bare 103, and no pooled connection carries an
  // unread response to the next request.
  engine.mode = MockMode::kInterim;
  engine.fault_delay_ms = 60;
  for (int i = 0; i < 3; ++i) {
    auto ra = ask(a, ta, "a" + std::to_string(i));
    CHECK(ra.status == 200);
    CHECK(Nonce(ra) == "a" + std::to_string(i));
    auto rb = ask(b, tb, "b" + std::to_string(i));
    CHECK(rb.status == 200);
    CHECK(Nonce(rb) == "b" + std::to_string(i));
  }
  // A forged second response 60 ms after each real one, the other tenant
  // asking at once: never the other tenant's bytes.
  engine.mode = MockMode::kTrailingBytes;
  for (int i = 0; i < 4; ++i) {
    auto ra = ask(a, ta, "ta" + std::to_string(i));
    CHECK(ra.status == 200);
    CHECK(Nonce(ra).substr(0, 2) == "ta");
    auto rb = ask(b, tb, "tb" + std::to_string(i));
    CHECK(rb.status == 200);
    CHECK(Nonce(rb).substr(0, 2) == "tb");
  }
  // Stray bytes that arrived while the connection was idle in the pool: it is
  // not reused, so the next request of the same tenant gets its own response.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 3; ++i) {
    auto ra = ask(a, ta, "sa" + std::to_string(i));
    CHECK(ra.status == 200);
    CHECK(Nonce(ra) == "sa" + std::to_string(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

namespace {

uint16_t FreePort() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acc(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return acc.local_endpoint().port();
}

// `toktier serve` as a child process under `ulimit -n <fds>`.
struct ChildProxy {
  pid_t pid = -1;
  uint16_t port = 0;
  std::string dir;
  ChildProxy(const std::string& config_json, int fds) {
    dir = std::filesystem::temp_directory_path() / ("toktier-http-hardening-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config_json;
    const std::string log = dir + "/stderr.log";
    const std::string script = "ulimit -n " + std::to_string(fds) + " && exec \"$0\" serve --config \"$1\"";
    pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      const std::string cfg = dir + "/config.json";
      ::execl("/bin/sh", "sh", "-c", script.c_str(), TOKTIER_BINARY, cfg.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  bool Alive() {
    if (pid <= 0) return false;
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == 0) return true;
    pid = -1;
    return false;
  }
  std::string Log() {
    std::ifstream in(dir + "/stderr.log");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  ~ChildProxy() {
    if (Alive()) {
      ::kill(pid, SIGTERM);  // graceful drain; killed if that takes over 5 s
      for (int i = 0; i < 100 && Alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (Alive()) {
        ::kill(pid, SIGKILL);
        int st = 0;
        ::waitpid(pid, &st, 0);
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

}  // namespace

TEST_CASE("out of file descriptors: the proxy backs off and serves again afterwards" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  const uint16_t port = FreePort();
  json cfg = {{"listen", "127.0.0.1"},
              {"port", port},
              {"io_threads", 1},
              {"workers", 1},
              {"backends", {engine.url()}},
              {"models", json::array()},
              {"state", false},
              {"store", {{"data_dir", ""}}},
              {"health", {{"path", "/health"}, {"interval_ms", 20}}},
              {"guard", {{"enabled", false}}},
              {"limits", {{"drain_timeout_ms", 1000}}}};
  ChildProxy child(cfg.dump(), 64);
  // Raw sockets with deadlines: a child that stops answering fails the
  // test instead of hanging it.
  auto ask = [&](const std::string& request, std::string_view until) {
    RawSocket s(port);
    return s.ok() && s.Send(request) ? s.Read(2000, until) : std::string();
  };
  const std::string healthz = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  bool up = false;
  for (int i = 0; i < 200 && !up && child.Alive(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    up = RawStatus(ask(healthz, "ok\n")) == 200;
  }
  REQUIRE_MESSAGE(up, child.Log());
  // More idle connections than the process may hold descriptors: accepts
  // fail with EMFILE, and so do the health checks' connects meanwhile.
  std::vector<RawSocket> idle;
  for (int i = 0; i < 150; ++i) idle.emplace_back(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  CHECK_MESSAGE(child.Alive(), child.Log());
  idle.clear();
  // Descriptors free again: the proxy answers, locally and through the engine.
  int local = 0, relayed = 0;
  for (int i = 0; i < 100 && child.Alive() && (local != 200 || relayed != 200); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    local = RawStatus(ask(healthz, "ok\n"));
    relayed = RawStatus(ask(RawPost("/v1/embeddings", "echo me"), "echo me"));
  }
  CHECK_MESSAGE(local == 200, child.Log());
  CHECK(relayed == 200);
  const std::string m = ask("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", "");
  CHECK(MetricValue(m, R"(toktier_resource_exhausted_total{where="accept"})") > 0);
  CHECK(MetricValue(m, R"(toktier_backend_healthy{backend=")" + engine.url() + "\"}") == 1);
  CHECK_MESSAGE(child.Alive(), child.Log());
}

TEST_CASE("Transfer-Encoding other than a final chunked, or with Content-Length: 400 and close") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  const std::string smuggled = "GET /v1/smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  const char* framings[] = {
      "Transfer-Encoding: xchunked\r\n",
      "Transfer-Encoding: chunked, identity\r\n",
      "Transfer-Encoding: identity\r\n",
      "Transfer-Encoding: gzip, chunked\r\n",
      "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
      "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n",
      "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
      "Content-Length: 5\r\nContent-Length: 6\r\n",
      "Content-Length: 5\r\nContent-Length: 5\r\n",
      "Content-Length: 5, 5\r\n",
      "Content-Length: +5\r\n",
      "Content-Length: -1\r\n",
      "Content-Length: 0x5\r\n",
  };
  for (const char* f : framings) {
    INFO(std::string(f));
    RawSocket s(p.port());
    REQUIRE(s.Send(std::string("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\n") + f + "\r\n" + smuggled));
    std::string out = s.Read(3000);
    CHECK(RawStatus(out) == 400);
    CHECK(IsOpenAiError(RawBody(out)));
    CHECK(out.find("HTTP/1.1", 1) == std::string::npos);  // one response: the second request was not read
    CHECK(s.closed_by_peer());
  }
  {  // Transfer-Encoding in an HTTP/1.0 request: faulty framing as well.
    RawSocket s(p.port());
    REQUIRE(s.Send("POST /v1/embeddings HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"));
    CHECK(RawStatus(s.Read(3000)) == 400);
  }
  CHECK(engine.Requests().empty());  // nothing was forwarded, the smuggled request least of all
  // Plain chunked is still fine (de-chunked, forwarded with a Content-Length).
  RawSocket s(p.port());
  REQUIRE(s.Send("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
  std::string out = s.Read(3000, "hello");
  CHECK(RawStatus(out) == 200);
  CHECK(RawBody(out) == "hello");
  REQUIRE(engine.Requests().size() == 1);
  CHECK(engine.Requests()[0].headers.count("transfer-encoding") == 0);
}

TEST_CASE("a header sent byte by byte is cut off by the read deadline, not the idle timeout") {
  MockEngine engine;
  auto cfg = PlainConfig(engine);
  cfg.read_timeout_ms = 800;
  cfg.idle_timeout_ms = 20000;
  Proxy p(cfg);
  RawSocket s(p.port());
  const std::string head = "GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  const auto t0 = Clock::now();
  bool closed = false;
  for (int i = 0; i < 30 && !closed; ++i) {  // one byte per 100 ms, up to 3 s
    closed = !s.Send(std::string(1, i < static_cast<int>(head.size()) ? head[i] : 'a')) || s.WaitClosed(100);
  }
  const auto took = Clock::now() - t0;
  CHECK(closed);
  CHECK(took < std::chrono::milliseconds(2500));  // the old code kept it open for the 20 s idle timeout
  CHECK(took > std::chrono::milliseconds(600));
  // The idle timeout still governs a connection that has not started a
  // request: silent for longer than the read deadline, then served.
  RawSocket quiet(p.port());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  REQUIRE(quiet.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(RawStatus(quiet.Read(2000, "ok\n")) == 200);
  // The deadline covers the header and the body together.
  RawSocket body(p.port());
  REQUIRE(body.Send("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"));
  const auto t1 = Clock::now();
  closed = false;
  for (int i = 0; i < 30 && !closed; ++i) closed = !body.Send("x") || body.WaitClosed(100);
  CHECK(closed);
  CHECK(Clock::now() - t1 < std::chrono::milliseconds(2500));
  CHECK(engine.Requests().empty());
  CHECK(MetricEventually(p.port(), R"(toktier_requests_total{endpoint="local",outcome="client_timeout"})", 2) == 2);
}

TEST_CASE("the header limit counts every byte of every field: 431") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));  // header_bytes: 64 KiB
  auto with_fields = [](size_t bytes) {
    std::string h = "GET /v1/models HTTP/1.1\r\nHost: x\r\n";
    for (int i = 0; h.size() < bytes; ++i) h += "X-F" + std::to_string(i) + ": v\r\n";
    return h + "\r\n";
  };
  {
    RawSocket s(p.port());
    REQUIRE(s.Send(with_fields(130 * 1024)));  // ~13,000 small fields
    std::string out = s.Read(3000);
    CHECK(RawStatus(out) == 431);
    CHECK(IsOpenAiError(RawBody(out)));
  }
  {  // the same bytes arriving in small pieces
    RawSocket s(p.port());
    std::string req = with_fields(80 * 1024);
    bool sent = true;
    for (size_t at = 0; at < req.size() && sent; at += 1000) sent = s.Send(req.substr(at, 1000));
    CHECK(RawStatus(s.Read(3000)) == 431);
  }
  CHECK(engine.Requests().empty());
  RawSocket s(p.port());
  REQUIRE(s.Send(with_fields(60 * 1024)));  // under the limit: forwarded
  CHECK(RawStatus(s.Read(3000, "\r\n\r\n")) == 200);
  CHECK(engine.Requests().size() == 1);
}

TEST_CASE("targets with dot segments, encoded slashes or backslashes are rejected (400)") {
  MockEngine engine;
  Proxy p(PlainConfig(engine));
  const char* bad[] = {
      "/v1/../x",          "/v1/%2e%2e/x",     "/v1/%2E%2E/x",  "/v1/.%2E/x",     "/v1/%2e./x",
      "/v1/./models",      "/v1/%2e/models",   "/v1/models/..", "/v1/..;/x",      "/v1/..%2fx",
      "/v1/a%2fb",         "/v1/a%2Fb",        "/v1/a%5cb",     "/v1/a\\..\\..\\x", "/v1/%zz",
      "/v1/models/%2e%2e", "/v1/a/..?q=1",     "/v1/%00",       "/tokenize/../x", "v1/models",
  };
  for (const char* target : bad) {
    INFO(std::string(target));
    RawSocket s(p.port());
    REQUIRE(s.Send(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    std::string out = s.Read(3000, "}}");
    CHECK(RawStatus(out) == 400);
    CHECK(IsOpenAiError(RawBody(out)));
  }
  CHECK(engine.Requests().empty());
  // Dots inside a segment, and in the query, are ordinary characters.
  HttpClient c(p.port());
  for (const char* target : {"/v1/models", "/v1/files/report.v2.json", "/v1/a%2ejson", "/v1/models?next=../x"}) {
    INFO(std::string(target));
    CHECK(c.Request("GET", target, "").status == 200);
  }
  CHECK(engine.Requests().size() == 4);
}

TEST_CASE("headers named in Connection are hop-by-hop: stripped both ways") {
  MockEngine engine;
  engine.SetResponseHeaders({{"Connection", "X-Engine-Internal"},
                             {"X-Engine-Internal", "secret"},
                             {"Keep-Alive", "timeout=5"},
                             {"X-Public", "1"}});
  Proxy p(PlainConfig(engine));
  RawSocket s(p.port());
  REQUIRE(s.Send(RawPost("/v1/embeddings", "body",
                         "Connection: keep-alive, X-Client-Hop\r\nX-Client-Hop: secret\r\nKeep-Alive: timeout=9\r\n"
                         "TE: trailers\r\nProxy-Connection: keep-alive\r\nX-Keep: yes\r\n")));
  std::string out = s.Read(3000, "body");
  REQUIRE(RawStatus(out) == 200);
  const std::string head = out.substr(0, out.find("\r\n\r\n"));
  std::string lower = head;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  CHECK(lower.find("x-public: 1") != std::string::npos);
  CHECK(lower.find("x-engine-internal") == std::string::npos);
  CHECK(lower.find("keep-alive: timeout") == std::string::npos);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].headers.count("x-keep") == 1);
  for (const char* h : {"x-client-hop", "keep-alive", "te", "proxy-connection", "connection"}) {
    INFO(std::string(h));
    CHECK(reqs[0].headers.count(h) == 0);
  }
}

TEST_CASE("a body must be exactly one JSON value (trailing whitespace only)") {
  MockEngine engine;
  auto cfg = TestConfig(engine);
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  Proxy p(cfg);
  HttpClient c(p.port());
  for (const char* model : {"qwen3", "not-configured"}) {
    const std::string one = std::string(R"({"model":")") + model + R"(","prompt":"hello"})";
    for (const std::string& body : {one + R"({"model":"qwen3","prompt":"smuggled"})", one + " x", one + "]",
                                    one + "\n" + one, one + "1"}) {
      INFO(body);
      auto r = c.Request("POST", "/v1/completions", body);
      CHECK(r.status == 400);
      CHECK(IsOpenAiError(r.body));
      CHECK(json::parse(r.body)["error"]["type"] == "invalid_request_error");
    }
    CHECK(engine.Requests().empty());
    CHECK(c.Request("POST", "/v1/completions", one + " \r\n\t ").status == 200);
    engine.ClearRequests();
  }
}

TEST_CASE("outcome labels: a backend timeout mid-stream, a client that leaves mid-header" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  auto cfg = PlainConfig(engine);
  cfg.backend_timeout_ms = 400;
  Proxy p(cfg);
  engine.mode = MockMode::kStream;
  engine.stream_events = 3;
  engine.stream_delay_ms = 1500;
  auto r = HttpClient(p.port()).Stream("/v1/chat/completions", R"({"model":"m","messages":[],"stream":true})");
  CHECK(r.status == 200);
  CHECK(r.body.find("tok0") != std::string::npos);
  CHECK(r.body.find("[DONE]") == std::string::npos);  // cut off
  {
    RawSocket s(p.port());
    REQUIRE(s.Send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // closed mid-header
  {
    RawSocket s(p.port());
    REQUIRE(s.Send("POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }  // closed mid-body
  CHECK(MetricEventually(p.port(), R"(toktier_requests_total{endpoint="local",outcome="client_closed"})", 2) == 2);
  std::string m = Metrics(p.port());
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="passthrough",outcome="backend_timeout"})") == 1);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="passthrough",outcome="backend_error"})") == -1);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="local",outcome="client_closed"})") == 2);
  CHECK(MetricValue(m, R"(toktier_requests_total{endpoint="local",outcome="client_error"})") == -1);
  CHECK(MetricValue(m, R"(toktier_backend_requests_total{outcome="timeout"})") == 1);
}

TEST_CASE("misbehaving clients (stalls, leaving mid-request, pipelining, thousands of connections)" * doctest::test_suite("concurrency")) {
  MockEngine engine;
  auto cfg = PlainConfig(engine);
  cfg.read_timeout_ms = 1000;
  Proxy p(cfg);
  std::vector<RawSocket> stalled;
  for (int i = 0; i < 20; ++i) {  // some silent, some with half a header, some with half a body
    stalled.emplace_back(p.port());
    if (i % 3 == 1) stalled.back().Send("GET /v1/models HTTP/1.1\r\nHo");
    if (i % 3 == 2) stalled.back().Send(RawPost("/v1/embeddings", "0123456789").substr(0, 60));
  }
  for (int i = 0; i < 50; ++i) {  // leave mid-header and mid-body
    RawSocket s(p.port());
    std::string req = RawPost("/v1/embeddings", std::string(5000, 'b'));
    s.Send(req.substr(0, static_cast<size_t>(i * 97) % req.size()));
  }
  // Pipelining: five requests in one write, five answers in order.
  {
    RawSocket s(p.port());
    std::string all;
    for (int i = 0; i < 5; ++i) all += RawPost("/v1/embeddings", "pipelined-" + std::to_string(i));
    REQUIRE(s.Send(all));
    std::string out = s.Read(5000, "pipelined-4");
    size_t last = 0;
    for (int i = 0; i < 5; ++i) {
      size_t at = out.find("pipelined-" + std::to_string(i));
      REQUIRE(at != std::string::npos);
      CHECK(at > last);
      last = at;
    }
  }
  // A few thousand connections at once, each with a request.
  rlimit old{};
  ::getrlimit(RLIMIT_NOFILE, &old);
  const rlim_t want = 6000;
  rlimit raised = old;
  if (raised.rlim_cur < want) raised.rlim_cur = std::min(want, old.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &raised);
  const size_t n = std::min<size_t>(2000, (raised.rlim_cur - 200) / 2);
  {
    std::vector<RawSocket> many;
    many.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      many.emplace_back(p.port());
      many.back().Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    size_t ok = 0;
    for (auto& s : many) ok += RawStatus(s.Read(5000, "ok\n")) == 200;
    CHECK(ok == n);
  }
  ::setrlimit(RLIMIT_NOFILE, &old);
  stalled.clear();
  HttpClient c(p.port());
  CHECK(c.Request("POST", "/v1/embeddings", "after").body == "after");
  CHECK(c.Request("GET", "/readyz", "").status == 200);
  MESSAGE(n << " concurrent connections served");
}

}  // namespace toktier::test
