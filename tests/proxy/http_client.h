// A small blocking HTTP/1.1 client for the proxy tests and the load generator.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace toktier::test {

struct HttpResponse {
  int status = 0;  // 0: transport error
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string error;
  // Streaming: the body pieces as they arrived, with their arrival times.
  std::vector<std::pair<std::chrono::steady_clock::time_point, std::string>> pieces;
};

// One keep-alive connection to 127.0.0.1:port.
class HttpClient {
 public:
  explicit HttpClient(uint16_t port);
  ~HttpClient();
  HttpResponse Request(const std::string& method, const std::string& target, const std::string& body,
                       const std::map<std::string, std::string>& headers = {});
  // POST of an application/json body for the load generator: the body is
  // written in place (head and body in one gather write, no copy), so a 1 MB
  // prompt costs the harness one kernel copy. `extra_headers` is raw
  // "Name: value\r\n" lines. Response headers are not collected.
  HttpResponse Post(std::string_view target, std::string_view body, std::string_view extra_headers = {});
  // Reads the response body piece by piece; stops after max_pieces pieces
  // (then closes the connection) when max_pieces > 0.
  HttpResponse Stream(const std::string& target, const std::string& body,
                      const std::map<std::string, std::string>& headers = {}, int max_pieces = 0);
  // Sends raw bytes and returns everything read until the peer closes or
  // timeout (for malformed-request tests).
  std::string Raw(const std::string& bytes, int timeout_ms = 2000);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace toktier::test
