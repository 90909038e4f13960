// http/http.h as pure functions: the edge cases of the target,
// framing and hop-by-hop rules that the end-to-end tests
// (test_http_hardening, test_engine_faults) exercise only by example.
#include <doctest/doctest.h>

#include "http/http.h"

namespace toktier::http1 {

TEST_CASE("http rules: request targets") {
  for (const char* ok : {"/", "/v1/", "/v1/models", "/v1//models", "/v1/a.b", "/v1/...", "/v1/.hidden", "/v1/a..b",
                         "/v1/%2ejson", "/v1/a%20b", "/v1/x?q=../..&r=%2f", "/v1/x;p=1"}) {
    INFO(std::string(ok));
    CHECK(TargetProblem(ok).empty());
  }
  for (const char* bad : {"", "v1", "*", "http://h/v1/x", "/v1/.", "/v1/..", "/v1/./", "/v1/../", "/v1/%2E%2e/",
                          "/v1/.%2e", "/v1/%2e", "/v1/..;x/", "/v1/.;/", "/v1/a%2F", "/v1/a%5C", "/v1/a\\b", "/v1/%", "/v1/%2",
                          "/v1/%g0", "/v1/%0a", "/v1/%7f", "/v1/x#frag"}) {
    INFO(std::string(bad));
    CHECK(!TargetProblem(bad).empty());
  }
}

TEST_CASE("http rules: framing") {
  auto problem = [](std::initializer_list<std::pair<http::field, const char*>> fs, unsigned version = 11) {
    http::fields f;
    for (auto& [k, v] : fs) f.insert(k, v);
    return std::string(FramingProblem(f, version));
  };
  using F = http::field;
  CHECK(problem({}) == "");
  CHECK(problem({{F::content_length, "0"}}) == "");
  CHECK(problem({{F::content_length, " 42 "}}) == "");
  CHECK(problem({{F::transfer_encoding, "chunked"}}) == "");
  CHECK(problem({{F::transfer_encoding, "CHUNKED"}}) == "");
  CHECK(problem({{F::content_length, "4"}, {F::content_length, "4"}}) != "");
  CHECK(problem({{F::content_length, "4, 4"}}) != "");
  CHECK(problem({{F::content_length, ""}}) != "");
  CHECK(problem({{F::content_length, "1e3"}}) != "");
  CHECK(problem({{F::content_length, "9999999999999999999"}}) != "");
  CHECK(problem({{F::transfer_encoding, "chunked"}, {F::content_length, "3"}}) != "");
  CHECK(problem({{F::transfer_encoding, "chunked,"}}) != "");
  CHECK(problem({{F::transfer_encoding, "gzip, chunked"}}) != "");
  CHECK(problem({{F::transfer_encoding, "chunked"}, {F::transfer_encoding, "chunked"}}) != "");
  CHECK(problem({{F::transfer_encoding, "identity"}}) != "");
  CHECK(problem({{F::transfer_encoding, "chunked"}}, 10) != "");
}

TEST_CASE("http rules: hop-by-hop fields, those named in Connection included") {
  http::fields f;
  f.insert(http::field::connection, "keep-alive, X-Hop ,x-other");
  f.insert(http::field::connection, "Upgrade");
  f.insert("X-Hop", "1");
  f.insert("X-OTHER", "2");
  f.insert(http::field::keep_alive, "timeout=5");
  f.insert(http::field::te, "trailers");
  f.insert(http::field::authorization, "Bearer k");
  f.insert("X-Keep", "3");
  StripHopByHop(f);
  std::vector<std::string> left;
  for (const auto& x : f) left.emplace_back(x.name_string());
  CHECK(left == std::vector<std::string>{"Authorization", "X-Keep"});
}

}  // namespace toktier::http1
