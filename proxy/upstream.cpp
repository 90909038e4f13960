// The engine side of a connection (http_conn.h): the forwarded request head
// (hop-by-hop fields removed), one UpstreamAttempt per backend tried (a
// pooled or new connection; failover to the next backend in the ranking),
// the response header (interim 1xx answers read and dropped, framing
// checked, every header byte counted), and the relay to the client, through
// the request's translator when it has one. The attempt applies the pool
// rule when the relay ends.
#include <boost/asio/write.hpp>

#include <cstdio>

#include "proxy/http_conn.h"
#include "http/http.h"

namespace toktier::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

void HttpConn::Forward(ForwardBody body, const std::string& session_key) {
  rq_->t_tokenized = Clock::now();
  WatchClient();
  rq_->forward = std::move(body);
  rq_->ranking = srv_->backends.Rank(rq_->model, session_key);
  rq_->ranked = 0;
  if (rq_->ranking.empty()) return SendError(ErrorReply::BadGateway("No backend configured for this model."));
  TryBackend(/*allow_reuse=*/true);
}

std::string HttpConn::BuildHead(const Backend& b) const {
  auto& req = parser_->get();
  const http1::HopByHop hop(req);
  std::string head;
  head.append(req.method_string().data(), req.method_string().size());
  head += ' ';
  if (rq_->up_target.empty()) {
    head.append(req.target().data(), req.target().size());
  } else {
    head += rq_->up_target;
  }
  head += " HTTP/1.1\r\nHost: ";
  head += b.host_header;
  head += "\r\n";
  for (const auto& f : req) {
    http::field id = f.name();
    if (hop.Contains(id, f.name_string()) || id == http::field::host || id == http::field::content_length ||
        id == http::field::expect)
      continue;
    head.append(f.name_string().data(), f.name_string().size());
    head += ": ";
    head.append(f.value().data(), f.value().size());
    head += "\r\n";
  }
  head += "Content-Length: ";
  head += std::to_string(rq_->forward.size());
  head += "\r\n\r\n";
  return head;
}

void HttpConn::TryBackend(bool allow_reuse) {
  if (rq_->ranked >= rq_->ranking.size()) {
    CountBackend(BackendResult::kConnectError);
    return SendError(ErrorReply::BadGateway("The backend engine is unreachable."));
  }
  // A new attempt (the previous one, if any, has no operation pending).
  rq_->attempt = std::make_unique<UpstreamAttempt>(strand_, rq_->ranking[rq_->ranked], rq_->tenant, up_buffer_);
  if (allow_reuse && rq_->attempt->TakePooled()) return DoUpWrite();
  rq_->attempt->AsyncConnect(std::chrono::milliseconds(cfg().backend_connect_timeout_ms),
                            beast::bind_front_handler(&HttpConn::OnUpConnect, shared_from_this()));
}

void HttpConn::OnUpConnect(error_code ec) {
  if (rq_->aborted) return;  // the client left; Abort closed both sides
  if (ec && http1::IsResourceExhausted(ec)) {
    // This process is out of descriptors: no fault of the backend, so no
    // failover and no unhealthy mark.
    m().counter(metrics::Id::kResourceExhausted, {"backend_connect"}).Inc();
    CountBackend(BackendResult::kConnectError);
    return SendError(
        ErrorReply::BadGateway("toktier could not open a connection to the backend engine: " + ec.message()));
  }
  if (ec) {
    // Failover: the next backend in the ranking (no bytes were sent).
    CountBackend(BackendResult::kFailover);
    Backend& failed = rq_->attempt->backend();
    failed.healthy = false;
    failed.health_gauge.Set(0);
    ++rq_->ranked;
    return TryBackend(true);
  }
  rq_->attempt->SetNoDelay();
  DoUpWrite();
}

void HttpConn::DoUpWrite() {
  rq_->attempt->AsyncWrite(BuildHead(rq_->attempt->backend()), rq_->forward,
                          std::chrono::milliseconds(cfg().backend_timeout_ms),
                          beast::bind_front_handler(&HttpConn::OnUpWrite, shared_from_this()));
}

void HttpConn::OnUpWrite(error_code ec, size_t) {
  if (rq_->aborted) return;  // the client left; Abort closed both sides
  if (ec) {
    if (rq_->attempt->reused()) return TryBackend(false);  // a stale pooled connection
    CountBackend(BackendResult::kIoError);
    return SendError(ErrorReply::BadGateway("Writing to the backend engine failed: " + ec.message()));
  }
  rq_->t_sent = Clock::now();
  // One deadline for the response header, interim answers included.
  rq_->attempt->ExpiresAfter(std::chrono::milliseconds(cfg().backend_timeout_ms));
  DoUpHeader();
}

void HttpConn::DoUpHeader() {
  const size_t used = rq_->attempt->interim_header_bytes();
  if (used >= cfg().max_header_bytes) return BadResponse("response header fields too large");
  rq_->attempt->AsyncReadHeader(rq_->method == http::verb::head, cfg().max_header_bytes - used,
                               beast::bind_front_handler(&HttpConn::OnUpHeader, shared_from_this()));
}

void HttpConn::BadResponse(std::string_view why) {
  CountBackend(BackendResult::kBadResponse);
  SendError(ErrorReply::BadGateway("The backend engine sent a malformed response: " + std::string(why) + "."));
}

void HttpConn::OnUpHeader(error_code ec, size_t header_bytes) {
  if (rq_->aborted) return;  // the client left; Abort closed both sides
  if (ec == beast::error::timeout) {
    CountBackend(BackendResult::kTimeout);
    return SendError(ErrorReply::GatewayTimeout("The backend engine did not answer in time."));
  }
  if (ec == http::error::header_limit) return BadResponse("response header fields too large");
  if (ec && http1::IsParseError(ec)) return BadResponse(ec.message());
  if (ec) {
    // A pooled connection the engine closed just before our request: try a
    // fresh one (no byte of an answer came back).
    if (rq_->attempt->reused() && rq_->attempt->NothingReceived(header_bytes)) return TryBackend(false);
    CountBackend(BackendResult::kIoError);
    return SendError(ErrorReply::BadGateway("The backend engine closed the connection: " + ec.message()));
  }
  auto& parser = rq_->attempt->parser();
  auto& res = parser.get();
  const unsigned code = res.result_int();
  if (code == 101) return BadResponse("101 Switching Protocols without an upgrade request");
  if (code / 100 == 1) {
    // Interim (RFC 9110 15.2: 100 Continue, 103 Early Hints): read and
    // dropped, then the final response is read on the same deadline. toktier
    // answers the client as the origin (it sent its own 100 Continue), and
    // an interim answer relayed as final would leave the real one unread.
    rq_->attempt->CountInterim(header_bytes);
    return DoUpHeader();
  }
  if (std::string_view why = http1::FramingProblem(res, res.version()); !why.empty()) return BadResponse(why);
  rq_->t_up_header = Clock::now();
  m().histogram(metrics::Id::kBackendTtfb).Observe(Seconds(rq_->t_sent, rq_->t_up_header));
  CountBackend(BackendResult::kOk);
  rq_->status = code;
  rq_->attempt->NoteKeepAlive();
  bool chunked = res.chunked();
  bool has_length = res.has_content_length();
  // Strip hop-by-hop fields (those named in Connection too); the serializer
  // re-frames the body.
  http1::StripHopByHop(res);
  // A client API other than the engine's: a 200 answer is translated (its
  // length changes, so it goes out chunked). Errors are relayed as they are
  // to OpenAI clients (the error JSON is the same for every OpenAI API) and
  // rewritten into Anthropic's error object for /v1/messages.
  const bool anthropic_error = rq_->translator && code >= 400 && rq_->client_api == ClientApi::kAnthropic;
  if (anthropic_error) {
    rq_->translator = api::MakeAnthropicErrorTranslator(static_cast<int>(code), 64 * 1024);
    res.set(http::field::content_type, "application/json");
  }
  rq_->translating = rq_->translator && (code == 200 || anthropic_error) && rq_->method != http::verb::head;
  if (rq_->translating) {
    res.erase(http::field::content_length);
    chunked = true;
    has_length = false;
  }
  if (chunked || (!has_length && !parser.is_done())) {
    if (parser_->get().version() >= 11) {
      res.chunked(true);
    } else {
      rq_->keep_alive = false;
    }
  }
  SetKeepAlive(res);
  rq_->relay.reset(new char[kRelayBuffer]);
  rq_->serializer.emplace(res);
  if (rq_->translating && !rq_->translator->streaming()) {
    // The whole answer is read and translated before anything goes out (it
    // has to be whole to be translated): a failure is then a 502, not a
    // 200 cut off.
    rq_->head_deferred = true;
    return RelayRead();
  }
  stream_.expires_after(std::chrono::milliseconds(cfg().client_write_timeout_ms));
  http::async_write_header(stream_, *rq_->serializer,
                           beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
}

void HttpConn::RelayRead() {
  auto& parser = rq_->attempt->parser();
  auto& body = parser.get().body();
  if (parser.is_done()) {
    body.data = nullptr;
    body.size = 0;
    body.more = false;
    if (rq_->translating) {
      if (!TranslateRelayed({}, /*last=*/true)) return RelayFailed(Outcome::kBackendTruncated, false);
      if (!rq_->translated.empty()) {
        body.data = rq_->translated.data();
        body.size = rq_->translated.size();
      }
    }
    return DoClientWrite();
  }
  body.data = rq_->relay.get();
  body.size = kRelayBuffer;
  rq_->attempt->AsyncReadSome(std::chrono::milliseconds(cfg().backend_timeout_ms),
                             beast::bind_front_handler(&HttpConn::OnRelayRead, shared_from_this()));
}

void HttpConn::OnRelayRead(error_code ec, size_t) {
  if (rq_->aborted) return;  // the client left; Abort closed both sides
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    // The backend failed after its response began: the client's response is
    // cut off (its connection closed). Not a backend error status.
    if (ec == beast::error::timeout) {
      CountBackend(BackendResult::kTimeout);
      return RelayFailed(Outcome::kBackendTimeout, true);
    }
    CountBackend(http1::IsParseError(ec) ? BackendResult::kBadResponse : BackendResult::kIoError);
    return RelayFailed(Outcome::kBackendTruncated, false);
  }
  auto& parser = rq_->attempt->parser();
  auto& body = parser.get().body();
  size_t n = kRelayBuffer - body.size;
  body.data = rq_->relay.get();
  body.size = n;
  body.more = !parser.is_done();
  if (rq_->translating) {
    if (!TranslateRelayed(std::string_view(rq_->relay.get(), n), /*last=*/!body.more)) {
      return RelayFailed(Outcome::kBackendTruncated, false);
    }
    body.data = rq_->translated.data();
    n = body.size = rq_->translated.size();
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
  if (rq_->attempt->parser().is_done()) watch_armed_ = false;
  // A client that stops reading fills the socket buffers and this write
  // stalls: after client_write_timeout_ms it is cut off and the engine's
  // request cancelled (OnClientWrite), whatever backend_timeout_ms allows.
  stream_.expires_after(std::chrono::milliseconds(cfg().client_write_timeout_ms));
  http::async_write(stream_, *rq_->serializer, beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
}

void HttpConn::OnClientWrite(error_code ec, size_t) {
  if (rq_->aborted) return;  // the client left; Abort closed both sides
  if (ec == http::error::need_buffer) ec = {};
  if (ec == beast::error::timeout) {
    // The client stopped reading: cancel the backend request by closing it.
    return Abort(Outcome::kClientWriteTimeout);
  }
  if (ec) {
    // The client went away: cancel the backend request by closing it.
    return Abort(Outcome::kClientClosed);
  }
  if (!rq_->serializer->is_done()) return RelayRead();
  FinishRelay();
}

void HttpConn::FinishRelay() {
  // The serializer refers to the attempt's response: it goes first.
  rq_->serializer.reset();
  rq_->attempt->Finish();
  rq_->attempt.reset();
  Record(rq_->status < 400 ? Outcome::kOk : Outcome::kBackendError);
  rq_->body.reset();
  rq_->forward = ForwardBody();
  if (!rq_->keep_alive) return DoClose();
  AfterWatch([this] { DoRead(); });
}

void HttpConn::RelayFailed(Outcome outcome, bool timeout) {
  if (!rq_->head_deferred) return Abort(outcome);
  rq_->head_deferred = false;
  rq_->serializer.reset();
  if (timeout) return SendError(ErrorReply::GatewayTimeout("The backend engine did not finish its answer in time."));
  SendError(ErrorReply::BadGateway(
      "The backend engine's answer was cut off or could not be translated to the chat format."));
}

void HttpConn::Abort(Outcome outcome) {
  // Engine operations still pending (connect, write, header, relay) complete
  // with operation_aborted: they must not count a failover or answer. The
  // attempt stays until the request's state goes, as they may still use it.
  rq_->aborted = true;
  watch_armed_ = false;
  Record(outcome);
  if (rq_->attempt) {
    if (outcome == Outcome::kClientClosed || outcome == Outcome::kClientWriteTimeout) {
      CountBackend(BackendResult::kCancelled);
    }
    rq_->attempt->Cancel();
  }
  DoClose();
}

bool HttpConn::TranslateRelayed(std::string_view bytes, bool last) {
  rq_->translated.clear();
  if (rq_->translator->Feed(bytes, last, &rq_->translated)) return true;
  std::fprintf(stderr, "toktier: engine answer to a chat request could not be translated: %s\n",
               rq_->translator->error().c_str());
  CountBackend(BackendResult::kBadResponse);
  return false;
}

}  // namespace toktier::proxy
