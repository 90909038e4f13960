// The backend side of a connection (http_conn.h): the forwarded request head
// (hop-by-hop fields removed), a pooled or new connection, the response
// header (interim 1xx answers read and dropped, framing checked, every
// header byte counted), the relay to the client, and the pool rule: a
// backend connection goes back only after a complete, well-formed response
// with nothing after it, to the pool of the tenant whose request it carried.
#include <boost/asio/connect.hpp>
#include <boost/asio/write.hpp>

#include "proxy/http_conn.h"
#include "proxy/http_rules.h"

namespace toktier::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

void HttpConn::Forward(ForwardBody body, const std::string& session_key) {
  t_tokenized_ = Clock::now();
  WatchClient();
  fwd_ = std::move(body);
  ranking_ = srv_->backends.Rank(model_, session_key);
  attempt_ = 0;
  if (ranking_.empty()) {
    return SendError(status::bad_gateway, "No backend configured for this model.", "server_error", "", endpoint_,
                     "bad_gateway", false);
  }
  TryBackend(/*allow_reuse=*/true);
}

void HttpConn::BuildHead(const Backend& b) {
  auto& req = parser_->get();
  const HopByHop hop(req);
  head_.clear();
  head_.append(req.method_string().data(), req.method_string().size());
  head_ += ' ';
  if (up_target_.empty()) {
    head_.append(req.target().data(), req.target().size());
  } else {
    head_ += up_target_;
  }
  head_ += " HTTP/1.1\r\nHost: ";
  head_ += b.host_header;
  head_ += "\r\n";
  for (const auto& f : req) {
    http::field id = f.name();
    if (hop.Contains(id, f.name_string()) || id == http::field::host || id == http::field::content_length ||
        id == http::field::expect)
      continue;
    head_.append(f.name_string().data(), f.name_string().size());
    head_ += ": ";
    head_.append(f.value().data(), f.value().size());
    head_ += "\r\n";
  }
  head_ += "Content-Length: ";
  head_ += std::to_string(fwd_.size());
  head_ += "\r\n\r\n";
}

void HttpConn::TryBackend(bool allow_reuse) {
  if (attempt_ >= ranking_.size()) {
    m().counter(metrics::Id::kBackendRequests, {"connect_error"}).Inc();
    return SendError(status::bad_gateway, "The backend engine is unreachable.", "server_error", "", endpoint_,
                     "bad_gateway", false);
  }
  Backend* b = ranking_[attempt_];
  backend_ = b;
  BuildHead(*b);
  int fd = allow_reuse ? b->TakeIdle(tenant_) : -1;
  up_.emplace(strand_);
  if (fd >= 0) {
    error_code ec;
    up_->socket().assign(b->v6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (!ec) {
      reused_ = true;
      return DoUpWrite();
    }
  }
  reused_ = false;
  error_code ec;
  tcp::endpoint ep(asio::ip::make_address(b->host, ec), b->port);
  up_->expires_after(std::chrono::milliseconds(cfg().backend_connect_timeout_ms));
  up_->async_connect(ep, beast::bind_front_handler(&HttpConn::OnUpConnect, shared_from_this()));
}

void HttpConn::OnUpConnect(error_code ec) {
  if (aborted_) return;  // the client left; Abort closed both sides
  if (ec && IsResourceExhausted(ec)) {
    // This process is out of descriptors: no fault of the backend, so no
    // failover and no unhealthy mark.
    m().counter(metrics::Id::kResourceExhausted, {"backend_connect"}).Inc();
    m().counter(metrics::Id::kBackendRequests, {"connect_error"}).Inc();
    return SendError(status::bad_gateway, "toktier could not open a connection to the backend engine: " + ec.message(),
                     "server_error", "", endpoint_, "bad_gateway", false);
  }
  if (ec) {
    // Failover: the next backend in the ranking (no bytes were sent).
    m().counter(metrics::Id::kBackendRequests, {"failover"}).Inc();
    backend_->healthy = false;
    backend_->health_gauge.Set(0);
    ++attempt_;
    return TryBackend(true);
  }
  error_code e2;
  up_->socket().set_option(tcp::no_delay(true), e2);
  DoUpWrite();
}

void HttpConn::DoUpWrite() {
  bufs_.clear();
  bufs_.push_back(asio::buffer(head_));
  for (auto p : fwd_.pieces) {
    if (!p.empty()) bufs_.push_back(asio::buffer(p.data(), p.size()));
  }
  up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
  asio::async_write(*up_, bufs_, beast::bind_front_handler(&HttpConn::OnUpWrite, shared_from_this()));
}

void HttpConn::OnUpWrite(error_code ec, size_t) {
  if (aborted_) return;  // the client left; Abort closed both sides
  if (ec) {
    if (reused_) return TryBackend(false);  // a stale pooled connection
    m().counter(metrics::Id::kBackendRequests, {"io_error"}).Inc();
    return SendError(status::bad_gateway, "Writing to the backend engine failed: " + ec.message(), "server_error",
                     "", endpoint_, "bad_gateway", false);
  }
  t_sent_ = Clock::now();
  up_buf_.clear();
  up_header_bytes_ = 0;
  // One deadline for the response header, interim answers included.
  up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
  DoUpHeader();
}

void HttpConn::DoUpHeader() {
  up_parser_.emplace();
  up_parser_->body_limit(boost::none);
  if (method_ == http::verb::head) up_parser_->skip(true);
  if (up_header_bytes_ >= cfg().max_header_bytes) return BadResponse("response header fields too large");
  AsyncReadHeaderWithin(*up_, up_buf_, *up_parser_, cfg().max_header_bytes - up_header_bytes_,
                        beast::bind_front_handler(&HttpConn::OnUpHeader, shared_from_this()));
}

void HttpConn::BadResponse(std::string_view why) {
  m().counter(metrics::Id::kBackendRequests, {"bad_response"}).Inc();
  SendError(status::bad_gateway, "The backend engine sent a malformed response: " + std::string(why) + ".",
            "server_error", "", endpoint_, "bad_gateway", false);
}

void HttpConn::OnUpHeader(error_code ec, size_t header_bytes) {
  if (aborted_) return;  // the client left; Abort closed both sides
  if (ec == beast::error::timeout) {
    m().counter(metrics::Id::kBackendRequests, {"timeout"}).Inc();
    return SendError(status::gateway_timeout, "The backend engine did not answer in time.", "timeout", "",
                     endpoint_, "gateway_timeout", false);
  }
  if (ec == http::error::header_limit) return BadResponse("response header fields too large");
  if (ec && IsParseError(ec)) return BadResponse(ec.message());
  if (ec) {
    // A pooled connection the engine closed just before our request: try a
    // fresh one (no byte of an answer came back).
    if (reused_ && up_header_bytes_ + header_bytes == 0 && up_buf_.size() == 0) return TryBackend(false);
    m().counter(metrics::Id::kBackendRequests, {"io_error"}).Inc();
    return SendError(status::bad_gateway, "The backend engine closed the connection: " + ec.message(),
                     "server_error", "", endpoint_, "bad_gateway", false);
  }
  auto& res = up_parser_->get();
  const unsigned code = res.result_int();
  if (code == 101) return BadResponse("101 Switching Protocols without an upgrade request");
  if (code / 100 == 1) {
    // Interim (RFC 9110 15.2: 100 Continue, 103 Early Hints): read and
    // dropped, then the final response is read on the same deadline. toktier
    // answers the client as the origin (it sent its own 100 Continue), and
    // an interim answer relayed as final would leave the real one unread.
    up_header_bytes_ += header_bytes;
    return DoUpHeader();
  }
  if (std::string_view why = FramingProblem(res, res.version()); !why.empty()) return BadResponse(why);
  t_up_header_ = Clock::now();
  m().histogram(metrics::Id::kBackendTtfb).Observe(Seconds(t_sent_, t_up_header_));
  m().counter(metrics::Id::kBackendRequests, {"ok"}).Inc();
  status_ = code;
  up_keep_alive_ = res.keep_alive() && !up_parser_->need_eof();
  bool chunked = res.chunked();
  bool has_length = res.has_content_length();
  // Strip hop-by-hop fields (those named in Connection too); the serializer
  // re-frames the body.
  StripHopByHop(res);
  // Chat over /v1/completions: a 200 answer is translated (its length
  // changes, so it goes out chunked); errors are relayed as they are (the
  // error JSON is the same for both APIs).
  translating_ = chat_translate_.has_value() && code == 200 && method_ != http::verb::head;
  if (translating_) {
    res.erase(http::field::content_length);
    if (chat_stream_) chat_stream_tr_ = std::make_unique<ChatStreamTranslator>(*chat_translate_);
    chunked = true;
    has_length = false;
  }
  if (chunked || (!has_length && !up_parser_->is_done())) {
    if (parser_->get().version() >= 11) {
      res.chunked(true);
    } else {
      keep_alive_ = false;
    }
  }
  SetKeepAlive(res);
  relay_.reset(new char[kRelayBuffer]);
  sr_.emplace(res);
  if (translating_ && !chat_stream_) {
    // The whole answer is read and translated before anything goes out (it
    // has to be whole to be translated): a failure is then a 502, not a
    // 200 cut off.
    head_deferred_ = true;
    return RelayRead();
  }
  stream_.expires_after(std::chrono::milliseconds(cfg().client_write_timeout_ms));
  http::async_write_header(stream_, *sr_, beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
}

void HttpConn::RelayRead() {
  auto& body = up_parser_->get().body();
  if (up_parser_->is_done()) {
    body.data = nullptr;
    body.size = 0;
    body.more = false;
    if (translating_) {
      if (!TranslateRelayed({}, /*last=*/true)) return RelayFailed("backend_truncated", false);
      if (!tr_out_.empty()) {
        body.data = tr_out_.data();
        body.size = tr_out_.size();
      }
    }
    return DoClientWrite();
  }
  body.data = relay_.get();
  body.size = kRelayBuffer;
  up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
  http::async_read_some(*up_, up_buf_, *up_parser_,
                        beast::bind_front_handler(&HttpConn::OnRelayRead, shared_from_this()));
}

void HttpConn::OnRelayRead(error_code ec, size_t) {
  if (aborted_) return;  // the client left; Abort closed both sides
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    // The backend failed after its response began: the client's response is
    // cut off (its connection closed). Not a backend error status.
    if (ec == beast::error::timeout) {
      m().counter(metrics::Id::kBackendRequests, {"timeout"}).Inc();
      return RelayFailed("backend_timeout", true);
    }
    m().counter(metrics::Id::kBackendRequests, {IsParseError(ec) ? "bad_response" : "io_error"}).Inc();
    return RelayFailed("backend_truncated", false);
  }
  auto& body = up_parser_->get().body();
  size_t n = kRelayBuffer - body.size;
  body.data = relay_.get();
  body.size = n;
  body.more = !up_parser_->is_done();
  if (translating_) {
    if (!TranslateRelayed(std::string_view(relay_.get(), n), /*last=*/!body.more)) {
      return RelayFailed("backend_truncated", false);
    }
    body.data = tr_out_.data();
    n = body.size = tr_out_.size();
  }
  if (n == 0) {
    if (body.more) return RelayRead();
    // The read held only the backend's last chunk. An empty buffer would be
    // serialized as a chunk of size 0, i.e. a premature last chunk followed
    // by the real one: bytes the client would read as its next response.
    body.data = nullptr;
  }
  DoClientWrite();
}

void HttpConn::DoClientWrite() {
  // The backend's response is complete: nothing left to cancel, and a client
  // that closes as soon as it has the last byte did not leave early.
  if (up_parser_->is_done()) watch_armed_ = false;
  // A client that stops reading fills the socket buffers and this write
  // stalls: after client_write_timeout_ms it is cut off and the engine's
  // request cancelled (OnClientWrite), whatever backend_timeout_ms allows.
  stream_.expires_after(std::chrono::milliseconds(cfg().client_write_timeout_ms));
  http::async_write(stream_, *sr_, beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
}

void HttpConn::OnClientWrite(error_code ec, size_t) {
  if (aborted_) return;  // the client left; Abort closed both sides
  if (ec == http::error::need_buffer) ec = {};
  if (ec == beast::error::timeout) {
    // The client stopped reading: cancel the backend request by closing it.
    return Abort("client_write_timeout");
  }
  if (ec) {
    // The client went away: cancel the backend request by closing it.
    return Abort("client_closed");
  }
  if (!sr_->is_done()) return RelayRead();
  FinishRelay();
}

void HttpConn::FinishRelay() {
  // The pool rule: only a connection whose response ended exactly where
  // its framing said, with no byte after it (neither read into up_buf_ nor
  // waiting in the socket), and that both sides keep alive. Anything else
  // would hand those bytes to the next request as its response.
  if (up_ && backend_ && up_parser_->is_done() && up_keep_alive_ && up_buf_.size() == 0) {
    error_code ec;
    const size_t pending = up_->socket().available(ec);
    if (!ec && pending == 0) {
      up_->expires_never();
      int fd = up_->release_socket().release(ec);
      if (!ec && fd >= 0) backend_->PutIdle(fd, tenant_);
    }
  }
  if (up_) {
    error_code ec;
    up_->socket().close(ec);
  }
  up_.reset();
  Record(status_ < 400 ? "ok" : "backend_error");
  sr_.reset();
  up_parser_.reset();
  body_.reset();
  fwd_ = ForwardBody();
  if (!keep_alive_) return DoClose();
  AfterWatch([this] { DoRead(); });
}

void HttpConn::RelayFailed(std::string_view outcome, bool timeout) {
  if (!head_deferred_) return Abort(outcome);
  head_deferred_ = false;
  sr_.reset();
  if (timeout) {
    return SendError(status::gateway_timeout, "The backend engine did not finish its answer in time.", "timeout", "",
                     endpoint_, "gateway_timeout", false);
  }
  SendError(status::bad_gateway, "The backend engine's answer was cut off or could not be translated to the chat format.",
            "server_error", "", endpoint_, "bad_gateway", false);
}

void HttpConn::Abort(std::string_view outcome) {
  // Backend operations still pending (connect, write, header) complete
  // with operation_aborted: they must not count a failover or answer.
  aborted_ = true;
  watch_armed_ = false;
  Record(outcome);
  if (up_) {
    if (outcome == "client_closed" || outcome == "client_write_timeout") {
      m().counter(metrics::Id::kBackendRequests, {"cancelled"}).Inc();
    }
    error_code ec;
    up_->socket().shutdown(tcp::socket::shutdown_both, ec);
    up_->close();
  }
  up_.reset();
  DoClose();
}

}  // namespace toktier::proxy
