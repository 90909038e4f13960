#include "http_client.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>

namespace toktier::test {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
}  // namespace

struct HttpClient::Impl {
  uint16_t port;
  asio::io_context ioc;
  std::unique_ptr<tcp::socket> sock;
  beast::flat_buffer buf;
  bool Connect(std::string* err) {
    if (sock && sock->is_open()) return true;
    sock = std::make_unique<tcp::socket>(ioc);
    buf.clear();
    buf.reserve(64 * 1024);  // large responses in 64 KiB reads, not 512-byte ones
    beast::error_code ec;
    sock->connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port), ec);
    if (ec) {
      *err = ec.message();
      sock.reset();
      return false;
    }
    sock->set_option(tcp::no_delay(true), ec);
    return true;
  }
  // After writing a request (write_ec: how that went): reads the whole
  // response into *out; drops the connection on errors and on "close".
  void ReadResponse(beast::error_code write_ec, bool collect_headers, HttpResponse* out) {
    beast::error_code ec = write_ec;
    http::response_parser<http::string_body> p;
    p.body_limit(1ull << 31);
    if (!ec) http::read(*sock, buf, p, ec);
    if (ec) {
      out->error = ec.message();
      sock.reset();
      return;
    }
    auto& res = p.get();
    out->status = static_cast<int>(res.result_int());
    out->body = std::move(res.body());
    if (collect_headers) {
      for (const auto& f : res) {
        std::string n(f.name_string());
        std::transform(n.begin(), n.end(), n.begin(), ::tolower);
        out->headers[n] = std::string(f.value());
      }
    }
    if (!res.keep_alive()) sock.reset();
  }
  http::request<http::string_body> Make(const std::string& method, const std::string& target, const std::string& body,
                                        const std::map<std::string, std::string>& headers) {
    http::request<http::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty() || method == "POST") {
      if (headers.find("Content-Type") == headers.end()) req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    return req;
  }
};

HttpClient::HttpClient(uint16_t port) : impl_(std::make_unique<Impl>()) { impl_->port = port; }
HttpClient::~HttpClient() = default;

HttpResponse HttpClient::Request(const std::string& method, const std::string& target, const std::string& body,
                                 const std::map<std::string, std::string>& headers) {
  HttpResponse out;
  if (!impl_->Connect(&out.error)) return out;
  auto req = impl_->Make(method, target, body, headers);
  beast::error_code ec;
  http::write(*impl_->sock, req, ec);
  impl_->ReadResponse(ec, /*collect_headers=*/true, &out);
  return out;
}

HttpResponse HttpClient::Post(std::string_view target, std::string_view body, std::string_view extra_headers) {
  HttpResponse out;
  if (!impl_->Connect(&out.error)) return out;
  std::string head;
  head.reserve(128 + target.size() + extra_headers.size());
  head.append("POST ").append(target).append(" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n");
  head.append("Content-Length: ").append(std::to_string(body.size())).append("\r\n");
  head.append(extra_headers).append("\r\n");
  const std::array<asio::const_buffer, 2> bufs{asio::buffer(head), asio::buffer(body.data(), body.size())};
  beast::error_code ec;
  asio::write(*impl_->sock, bufs, ec);
  impl_->ReadResponse(ec, /*collect_headers=*/false, &out);
  return out;
}

HttpResponse HttpClient::Stream(const std::string& target, const std::string& body,
                                const std::map<std::string, std::string>& headers, int max_pieces) {
  HttpResponse out;
  if (!impl_->Connect(&out.error)) return out;
  auto req = impl_->Make("POST", target, body, headers);
  beast::error_code ec;
  http::write(*impl_->sock, req, ec);
  if (ec) {
    out.error = ec.message();
    return out;
  }
  http::response_parser<http::buffer_body> p;
  p.body_limit(boost::none);
  http::read_header(*impl_->sock, impl_->buf, p, ec);
  if (ec) {
    out.error = ec.message();
    impl_->sock.reset();
    return out;
  }
  out.status = static_cast<int>(p.get().result_int());
  for (const auto& f : p.get()) {
    std::string n(f.name_string());
    std::transform(n.begin(), n.end(), n.begin(), ::tolower);
    out.headers[n] = std::string(f.value());
  }
  char chunk[65536];
  while (!p.is_done()) {
    p.get().body().data = chunk;
    p.get().body().size = sizeof chunk;
    http::read_some(*impl_->sock, impl_->buf, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      out.error = ec.message();
      break;
    }
    size_t n = sizeof chunk - p.get().body().size;
    if (n == 0) continue;
    out.pieces.emplace_back(std::chrono::steady_clock::now(), std::string(chunk, n));
    out.body.append(chunk, n);
    if (max_pieces > 0 && static_cast<int>(out.pieces.size()) >= max_pieces) {
      impl_->sock->close(ec);
      impl_->sock.reset();
      return out;
    }
  }
  if (!p.get().keep_alive()) impl_->sock.reset();
  return out;
}

std::string HttpClient::Raw(const std::string& bytes, int timeout_ms) {
  std::string err;
  if (!impl_->Connect(&err)) return "";
  beast::error_code ec;
  asio::write(*impl_->sock, asio::buffer(bytes), ec);
  // poll + recv with a deadline: asio's blocking read_some retries on
  // EAGAIN, so SO_RCVTIMEO would never end a read from a peer that keeps the
  // connection open (keep-alive, pipelining).
  const int fd = impl_->sock->native_handle();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string out;
  char b[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) break;
    ssize_t n = ::recv(fd, b, sizeof b, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    out.append(b, static_cast<size_t>(n));
  }
  impl_->sock.reset();
  return out;
}

}  // namespace toktier::test
