// One attempt at one engine for one request (Envoy's upstream request): the
// connection (this tenant's pooled one, or a new one), the forwarded head
// and body, the response parser, and the pool rule at the end. It does the
// socket work under a deadline per operation; its handlers run on the client
// connection's strand, and the connection (upstream.cpp) decides what each
// result means: fail over, answer with an error, relay. A failover or a
// stale pooled connection is a new attempt, never a reused one.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proxy/backends.h"
#include "http/http.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {

class UpstreamAttempt {
 public:
  using Parser = boost::beast::http::response_parser<boost::beast::http::buffer_body>;
  using ms = std::chrono::milliseconds;

  // `buffer` is the connection's read buffer for engine bytes (kept between
  // requests so it keeps its capacity); the attempt clears it.
  UpstreamAttempt(const boost::asio::any_io_executor& strand, Backend* backend, uint64_t tenant,
                  boost::beast::flat_buffer& buffer);
  UpstreamAttempt(const UpstreamAttempt&) = delete;
  UpstreamAttempt& operator=(const UpstreamAttempt&) = delete;

  Backend& backend() const { return *backend_; }
  // On a connection taken from the pool: a failure before any answer byte
  // is a stale connection, retried on a new one.
  bool reused() const { return reused_; }

  // Takes this tenant's pooled connection to the backend, if the pool has a
  // usable one (then write at once).
  bool TakePooled();
  template <class Handler>
  void AsyncConnect(ms timeout, Handler&& handler);
  void SetNoDelay();

  // Writes `head` (kept by the attempt) and the body's pieces.
  template <class Handler>
  void AsyncWrite(std::string head, const ForwardBody& body, ms timeout, Handler&& handler);

  // One deadline for the whole response header, interim answers included.
  void ExpiresAfter(ms timeout) { stream_.expires_after(timeout); }
  // Reads the next response header into a new parser (`head_request`: no
  // body follows). Interim (1xx) headers count toward `limit` in total:
  // CountInterim adds each one before the next read.
  template <class Handler>
  void AsyncReadHeader(bool head_request, size_t limit, Handler&& handler);
  void CountInterim(size_t header_bytes) { interim_header_bytes_ += header_bytes; }
  size_t interim_header_bytes() const { return interim_header_bytes_; }
  // Nothing of an answer arrived (no interim header, no byte buffered).
  bool NothingReceived(size_t header_bytes) const {
    return interim_header_bytes_ + header_bytes == 0 && buffer_.size() == 0;
  }
  Parser& parser() { return *parser_; }

  // The final response's keep-alive, read from its header (before the
  // hop-by-hop fields are stripped).
  void NoteKeepAlive() { keep_alive_ = parser_->get().keep_alive() && !parser_->need_eof(); }

  // Reads body bytes into the parser's buffer_body under `timeout`.
  template <class Handler>
  void AsyncReadSome(ms timeout, Handler&& handler);

  // The pool rule: the connection goes back to this tenant's pool only after
  // a response that ended exactly where its framing said, with no byte after
  // it (neither read into the buffer nor waiting in the socket), and that
  // both sides keep alive. Anything else would hand those bytes to the next
  // request as its response. Otherwise it is closed.
  void Finish();
  // The client left or stopped reading: both directions are shut at once,
  // which an engine sees as its request cancelled (vLLM aborts it).
  void Cancel();
  // Closes the connection (an error answer was decided).
  void Close();

 private:
  using tcp = boost::asio::ip::tcp;

  Backend* backend_;
  uint64_t tenant_;
  boost::beast::flat_buffer& buffer_;
  boost::beast::tcp_stream stream_;
  bool reused_ = false;
  bool keep_alive_ = false;
  size_t interim_header_bytes_ = 0;
  std::string head_;
  std::vector<boost::asio::const_buffer> bufs_;
  std::optional<Parser> parser_;
};

template <class Handler>
void UpstreamAttempt::AsyncConnect(ms timeout, Handler&& handler) {
  boost::beast::error_code ec;
  tcp::endpoint ep(boost::asio::ip::make_address(backend_->host, ec), backend_->port);
  stream_.expires_after(timeout);
  stream_.async_connect(ep, std::forward<Handler>(handler));
}

template <class Handler>
void UpstreamAttempt::AsyncWrite(std::string head, const ForwardBody& body, ms timeout, Handler&& handler) {
  head_ = std::move(head);
  bufs_.clear();
  bufs_.push_back(boost::asio::buffer(head_));
  for (auto p : body.pieces) {
    if (!p.empty()) bufs_.push_back(boost::asio::buffer(p.data(), p.size()));
  }
  stream_.expires_after(timeout);
  boost::asio::async_write(stream_, bufs_, std::forward<Handler>(handler));
}

template <class Handler>
void UpstreamAttempt::AsyncReadHeader(bool head_request, size_t limit, Handler&& handler) {
  parser_.emplace();
  parser_->body_limit(boost::none);
  if (head_request) parser_->skip(true);
  http1::AsyncReadHeaderWithin(stream_, buffer_, *parser_, limit, std::forward<Handler>(handler));
}

template <class Handler>
void UpstreamAttempt::AsyncReadSome(ms timeout, Handler&& handler) {
  stream_.expires_after(timeout);
  boost::beast::http::async_read_some(stream_, buffer_, *parser_, std::forward<Handler>(handler));
}

}  // namespace toktier::proxy
