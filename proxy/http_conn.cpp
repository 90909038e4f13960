// The client side of a connection (http_conn.h): a request is read in two
// phases, each under its own deadline: waiting for its first byte (the idle
// timeout of a keep-alive connection), then the whole header and body (the
// read timeout, once for both, so a client that drips bytes cannot hold the
// connection longer). Header bytes count against the header limit in total,
// the framing and the target are checked before any byte is forwarded.
#include "proxy/http_conn.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstdio>
#include <cstring>
#include <xxhash.h>

#include "api/api.h"
#include "http/http.h"

namespace toktier::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

HttpConn::HttpConn(Server::Impl* srv, tcp::socket&& socket)
    : srv_(srv), stream_(std::move(socket)), strand_(stream_.get_executor()), rq_(std::make_unique<RequestState>()) {
  srv_->connections.fetch_add(1);
  // Beast reads at most the buffer's free capacity (>= 512 bytes) per
  // read_some; without room a megabyte body takes thousands of reads.
  buffer_.reserve(kReadChunk);
  up_buffer_.reserve(kReadChunk);
}

HttpConn::~HttpConn() { srv_->connections.fetch_sub(1); }

void HttpConn::Run() {
  asio::dispatch(strand_, beast::bind_front_handler(&HttpConn::DoRead, shared_from_this()));
}

void HttpConn::CloseIfIdle() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    if (self->idle_) {
      beast::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.close();
    }
  });
}

// ---- reading a request ------------------------------------------------------

void HttpConn::DoRead() {
  if (srv_->draining) return DoClose();
  if (buffer_.size() > 0) return StartRequest();  // a pipelined request is here already
  // Waiting for a request: the idle timeout.
  idle_ = true;
  stream_.expires_after(std::chrono::milliseconds(cfg().idle_timeout_ms));
  stream_.async_read_some(buffer_.prepare(kReadChunk),
                          beast::bind_front_handler(&HttpConn::OnFirstBytes, shared_from_this()));
}

void HttpConn::OnFirstBytes(error_code ec, size_t n) {
  idle_ = false;
  // Idle timeout, the client closing a keep-alive connection, drain: nothing
  // was asked, nothing to answer or count.
  if (ec) return DoClose();
  buffer_.commit(n);
  StartRequest();
}

void HttpConn::StartRequest() {
  idle_ = false;
  // A fresh state for the request; the serializer goes first, as it refers
  // to the previous attempt's response.
  rq_->serializer.reset();
  rq_ = std::make_unique<RequestState>();
  rq_->t_start = Clock::now();
  ResetPhases(rq_->t_start);
  // From the first byte on, the whole request (header and body) has
  // read_timeout_ms: the deadline is set once and never extended.
  rq_->deadline = rq_->t_start + std::chrono::milliseconds(cfg().read_timeout_ms);
  stream_.expires_at(rq_->deadline);
  parser_.emplace();
  parser_->body_limit(cfg().max_body_bytes);
  http1::AsyncReadHeaderWithin(stream_, buffer_, *parser_, cfg().max_header_bytes,
                        beast::bind_front_handler(&HttpConn::OnReadHeader, shared_from_this()));
}

// A request that could not be read: too large (413), malformed (400), or
// the client left or ran out of time (OnReadFailed).
void HttpConn::OnRequestReadError(error_code ec) {
  if (ec == http::error::body_limit) {
    return SendError(Endpoint::kLocal,
                     ErrorReply::ClientClose(413, "Request body exceeds the limit of " +
                                                      std::to_string(cfg().max_body_bytes) + " bytes."));
  }
  if (http1::IsParseError(ec)) return SendError(Endpoint::kLocal, ErrorReply::ClientClose(400, "Malformed HTTP request."));
  OnReadFailed(ec);
}

// A request that could not be read to its end: the client left (counted as
// client_closed, nothing sent) or ran out of time (client_timeout).
void HttpConn::OnReadFailed(error_code ec) {
  if (ec != asio::error::operation_aborted) {
    Record(ec == beast::error::timeout ? Outcome::kClientTimeout : Outcome::kClientClosed);
  }
  DoClose();
}

void HttpConn::OnReadHeader(error_code ec, size_t) {
  if (ec == http::error::header_limit) {
    return SendError(Endpoint::kLocal, ErrorReply::ClientClose(431, "Request header fields too large."));
  }
  if (ec) return OnRequestReadError(ec);
  auto& req = parser_->get();
  rq_->keep_alive = req.keep_alive();
  rq_->method = req.method();
  // Framing the proxy and the engine could read differently is refused, and
  // the connection closed: its next bytes have no reliable start.
  if (std::string_view why = http1::FramingProblem(req, req.version()); !why.empty()) {
    return SendError(Endpoint::kLocal, ErrorReply::ClientClose(400, "Malformed HTTP request: " + std::string(why) + "."));
  }
  // Host (RFC 9112 3.2): a front end that reads another Host than we do
  // would disagree with us about the request; refused, and closed.
  if (std::string_view why = http1::HostProblem(req, req.version()); !why.empty()) {
    return SendError(Endpoint::kLocal,
                     ErrorReply::ClientClose(400, "Malformed HTTP request: " + std::string(why) + ".", "invalid_host"));
  }
  // The target is checked before the body is read. A request line the proxy
  // will not serve (CONNECT's authority form, an absolute URI, dot
  // segments) is answered and the connection closed: what follows it on the
  // connection (a tunnel's bytes, a body) is no request to serve.
  if (std::string_view why = http1::TargetProblem({req.target().data(), req.target().size()}); !why.empty()) {
    return SendError(Endpoint::kLocal,
                     ErrorReply::ClientClose(400, "Invalid request target: " + std::string(why) + ".", "invalid_target"));
  }
  auto len = parser_->content_length();
  if (len && *len > cfg().max_body_bytes) {
    return SendError(Endpoint::kLocal,
                     ErrorReply::ClientClose(413, "Request body of " + std::to_string(*len) +
                                                      " bytes exceeds the limit of " +
                                                      std::to_string(cfg().max_body_bytes) + " bytes."));
  }
  // Room for simdjson's padding, so the body is parsed where it lies.
  req.body().reserve((len ? *len : 0) + JsonPadding());
  if (beast::iequals(req[http::field::expect], "100-continue")) {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    return asio::async_write(stream_, asio::buffer(kContinue), [self = shared_from_this()](error_code e, size_t) {
      if (e) return self->OnReadFailed(e);
      self->DoReadBody();
    });
  }
  DoReadBody();
}

void HttpConn::DoReadBody() {
  stream_.expires_at(rq_->deadline);
  auto& req = parser_->get();
  auto len = parser_->content_length();
  if (len && *len > kReadChunk && !req.chunked()) return DoReadBodyDirect(*len);
  http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpConn::OnRead, shared_from_this()));
}

// A large body of known length is read straight into the body string: one
// copy (the kernel's) instead of socket -> buffer -> body, in reads as large
// as the socket has data for. Bytes after the body (a pipelined request)
// stay in buffer_.
void HttpConn::DoReadBodyDirect(size_t len) {
  std::string& body = parser_->get().body();
  body.resize(len);
  const size_t have = std::min(buffer_.size(), len);
  std::memcpy(body.data(), buffer_.data().data(), have);
  buffer_.consume(have);
  if (have == len) return HandleRequest();
  asio::async_read(stream_, asio::buffer(body.data() + have, len - have),
                   [self = shared_from_this()](error_code ec, size_t) {
                     if (ec) return self->OnReadFailed(ec);  // timeout, reset, or EOF before the body ended
                     self->HandleRequest();
                   });
}

void HttpConn::OnRead(error_code ec, size_t) {
  if (ec) return OnRequestReadError(ec);
  HandleRequest();
}

// ---- routing ------------------------------------------------------------------

void HttpConn::HandleRequest() {
  ResetPhases(Clock::now());
  auto& req = parser_->get();
  rq_->keep_alive = req.keep_alive();
  rq_->method = req.method();
  const auto auth = req[http::field::authorization];
  rq_->tenant = XXH3_64bits(auth.data(), auth.size());
  std::string_view target(req.target().data(), req.target().size());
  std::string_view path = target.substr(0, target.find('?'));
  if (path == "/healthz" || path == "/readyz" || path == "/metrics") {
    rq_->endpoint = Endpoint::kLocal;
    if (rq_->method != http::verb::get && rq_->method != http::verb::head) {
      return SendError(Endpoint::kLocal, ErrorReply::Client(405, "Method not allowed."));
    }
    if (path == "/healthz") return SendLocal(status::ok, "text/plain", "ok\n");
    if (path == "/readyz") {
      bool ready = !srv_->draining && srv_->backends.AnyHealthy();
      return SendLocal(ready ? status::ok : status::service_unavailable, "text/plain",
                       ready ? "ready\n" : "not ready\n");
    }
    srv_->service.UpdateGauges();
    return SendLocal(status::ok, "text/plain; version=0.0.4", m().Serialize());
  }
  if (path == "/v1/completions" && rq_->method == http::verb::post) return HandleCompletions();
  if (rq_->method == http::verb::post) {
    if (path == "/v1/chat/completions") return HandleChat(false);
    if (path == "/v1/messages") return HandleMessages(false, false);
    if (path == "/v1/messages/count_tokens") return HandleMessages(true, false);
    if (path == "/v1/responses") return HandleResponses(false);
    // vLLM's render endpoints: the token-in request, without the engine.
    if (path == "/v1/chat/completions/render") return HandleChat(true);
    if (path == "/v1/messages/render") return HandleMessages(false, true);
    if (path == "/v1/responses/render") return HandleResponses(true);
  }
  if (path.substr(0, 4) == "/v1/" || path == "/tokenize" || path == "/detokenize") {
    rq_->endpoint = Endpoint::kPassthrough;
    return Passthrough("");
  }
  SendError(Endpoint::kLocal,
            ErrorReply::Client(404,
                               "Unknown request URL: " + std::string(http::to_string(rq_->method)) + " " +
                                   std::string(path) + ".",
                               "", "unknown_url"));
}

void HttpConn::HandleCompletions() {
  rq_->endpoint = Endpoint::kCompletions;
  auto& req = parser_->get();
  rq_->body = std::make_shared<std::string>(std::move(req.body()));
  auto creq = std::make_shared<CompletionRequest>();
  RequestError err;
  const bool parsed = ParseCompletionRequest(*rq_->body, creq.get(), &err, cfg().json_max_depth);
  rq_->t_parsed = Clock::now();
  if (!parsed) return SendError(Endpoint::kCompletions, ErrorReply{std::move(err)});
  rq_->model = creq->model;
  ModelRuntime* model = srv_->service.FindModel(creq->model);
  if (!model) return PassthroughCounted("unknown_model");
  if (creq->kind == PromptKind::kTokens) return PassthroughCounted("token_prompt");
  if (!model->ForwardIds()) return PassthroughCounted("text_mode");
  // The body's UTF-8 was validated by the parser; prompt escapes are checked
  // by the worker as it unescapes them.
  const SessionRef sref = RequestSession();
  auto self = shared_from_this();
  bool queued = srv_->service.Submit(model, rq_->body, creq, sref, [self](TokenizeResult res) {
    // On a worker thread: back to the connection's strand.
    asio::post(self->strand_, [self, res = std::move(res)]() mutable {
      if (!res.ok) {
        return self->SendError(Endpoint::kCompletions,
                               ErrorReply::Client(400, "'prompt' is not a valid JSON string: " + res.error, "prompt"));
      }
      self->rq_->t_worker_start = res.worker_start;
      self->rq_->t_worker_end = res.worker_end;
      self->Forward(std::move(res.body), res.session_key);
    });
  });
  if (!queued) {
    m().counter(metrics::Id::kOverloadPassthrough).Inc();
    return Passthrough("");
  }
}

SessionRef HttpConn::RequestSession() {
  auto& req = parser_->get();
  SessionRef sref;
  std::string_view auth(req[http::field::authorization].data(), req[http::field::authorization].size());
  sref.tenant = TokenizeService::TenantHash(auth);
  sref.anonymous = auth.empty();
  for (const auto& h : cfg().session_headers) {
    auto it = req.find(h);
    if (it != req.end() && !it->value().empty()) {
      sref.explicit_id.assign(it->value().data(), it->value().size());
      break;
    }
  }
  return sref;
}

void HttpConn::PassthroughCounted(std::string_view reason) {
  m().counter(metrics::Id::kPassthrough, {reason}).Inc();
  Passthrough("");
}

void HttpConn::Passthrough(std::string_view session_key) {
  auto& req = parser_->get();
  if (!rq_->body) rq_->body = std::make_shared<std::string>(std::move(req.body()));
  // Other /v1/ POSTs (chat, embeddings, /tokenize) go to their model's
  // pool when models have their own.
  if (rq_->model.empty() && srv_->backends.HasModelPools() && rq_->method == http::verb::post) {
    rq_->model = ModelOfJsonBody(*rq_->body);
  }
  ForwardBody fb;
  fb.pieces.push_back(*rq_->body);
  fb.owners.push_back(rq_->body);
  std::string key(session_key);
  for (const auto& h : cfg().session_headers) {
    auto it = req.find(h);
    if (it != req.end()) {
      key.assign(it->value().data(), it->value().size());
      break;
    }
  }
  if (key.empty()) key = std::to_string(srv_->passthrough_counter.fetch_add(1));
  Forward(std::move(fb), key);
}

// ---- noticing a client that leaves while the backend works ------------------
// A read on the client socket while the request is at the backend: EOF or
// an error means the client is gone, so the backend request is cancelled
// (its connection closed, as nginx does) instead of running to the end.
// Bytes that arrive instead are a pipelined request: they stay in buffer_.
// The read is raw (no beast timer), on the strand, and always finished
// before the connection reads or closes again (AfterWatch).

void HttpConn::WatchClient() {
  if (watching_) return;
  watching_ = true;
  watch_armed_ = true;
  stream_.socket().async_read_some(buffer_.prepare(kReadChunk),
                                   asio::bind_executor(strand_, [self = shared_from_this()](error_code ec, size_t n) {
                                     self->OnClientWatch(ec, n);
                                   }));
}

void HttpConn::OnClientWatch(error_code ec, size_t n) {
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (after_watch_) {
    auto next = std::move(after_watch_);
    after_watch_ = nullptr;
    return next();
  }
  if (ec && ec != asio::error::operation_aborted && watch_armed_) Abort(Outcome::kClientClosed);
}

void HttpConn::AfterWatch(std::function<void()> next) {
  watch_armed_ = false;
  if (!watching_) return next();
  after_watch_ = std::move(next);
  error_code ec;
  stream_.socket().cancel(ec);
}

// ---- local responses ----------------------------------------------------------

void HttpConn::SendLocal(status st, std::string_view content_type, std::string body) {
  SendResponse(st, content_type, std::move(body), Outcome::kOk, false);
}

void HttpConn::SendError(Endpoint endpoint, ErrorReply reply) {
  rq_->endpoint = endpoint;
  // Called once an engine operation ended (none is pending): the attempt
  // can go now.
  if (rq_->attempt) {
    rq_->serializer.reset();
    rq_->attempt->Close();
    rq_->attempt.reset();
  }
  SendResponse(static_cast<status>(reply.error.status), "application/json", ErrorBody(rq_->client_api, reply.error), reply.outcome,
               reply.close);
}

void HttpConn::SendResponse(status st, std::string_view content_type, std::string body, Outcome outcome,
                            bool close) {
  auto res = std::make_shared<http::response<http::string_body>>(st, 11);
  res->set(http::field::server, "toktier");
  res->set(http::field::content_type, content_type);
  res->body() = std::move(body);
  if (close || !parser_ || !parser_->is_header_done()) rq_->keep_alive = false;
  SetKeepAlive(*res);
  res->prepare_payload();
  if (rq_->method == http::verb::head) res->body().clear();
  rq_->status = static_cast<unsigned>(st);
  rq_->outcome = outcome;
  // The answer is final: a client that reads it and closes at once has not
  // left early (the watch's EOF must not relabel it client_closed).
  watch_armed_ = false;
  stream_.expires_after(std::chrono::milliseconds(cfg().client_write_timeout_ms));
  http::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
    self->Record(self->rq_->outcome);
    self->rq_->body.reset();
    if (ec) return self->DoClose();
    self->AfterWatch([s = self.get()] {
      if (!s->rq_->keep_alive) return s->DoLingerClose();
      s->DoRead();
    });
  });
}

void HttpConn::SetKeepAlive(http::fields& res) const {
  res.erase(http::field::connection);
  const bool http10 = parser_ && parser_->is_header_done() && parser_->get().version() < 11;
  // HTTP/1.1 persists unless "close"; an HTTP/1.0 client closes unless it
  // reads "keep-alive" (RFC 9112 9.3), so that is said out loud to it.
  if (!rq_->keep_alive) {
    res.set(http::field::connection, "close");
  } else if (http10) {
    res.set(http::field::connection, "keep-alive");
  }
}

// Phases a request skips (a local answer, a passthrough) log as 0 ms.
void HttpConn::ResetPhases(Clock::time_point t) {
  rq_->t_body = rq_->t_parsed = rq_->t_worker_start = rq_->t_worker_end = rq_->t_tokenized = rq_->t_sent = rq_->t_up_header = t;
}

void HttpConn::CountBackend(BackendResult result) {
  m().counter(metrics::Id::kBackendRequests, {BackendResultName(result)}).Inc();
}

void HttpConn::Record(Outcome outcome) {
  if (rq_->recorded) return;
  rq_->recorded = true;
  const std::string_view endpoint = EndpointName(rq_->endpoint);
  m().counter(metrics::Id::kRequests, {endpoint, OutcomeName(outcome)}).Inc();
  m().histogram(metrics::Id::kRequestDuration, {endpoint}).Observe(Seconds(rq_->t_start, Clock::now()));
  if (cfg().log_requests) {
    auto ms = [](Clock::time_point a, Clock::time_point b) { return std::max(0.0, Seconds(a, b) * 1e3); };
    const auto now = Clock::now();
    std::fprintf(stderr,
                 "toktier: %s %u %s %.3f ms (body %.3f, tokenize %.3f [parse %.3f, queue %.3f, worker %.3f, "
                 "return %.3f], forward %.3f, backend header %.3f, relay %.3f)\n",
                 std::string(endpoint).c_str(), rq_->status, std::string(OutcomeName(outcome)).c_str(), ms(rq_->t_start, now), ms(rq_->t_start, rq_->t_body),
                 ms(rq_->t_body, rq_->t_tokenized), ms(rq_->t_body, rq_->t_parsed), ms(rq_->t_parsed, rq_->t_worker_start),
                 ms(rq_->t_worker_start, rq_->t_worker_end), ms(rq_->t_worker_end, rq_->t_tokenized), ms(rq_->t_tokenized, rq_->t_sent),
                 ms(rq_->t_sent, rq_->t_up_header), ms(rq_->t_up_header, now));
  }
}

void HttpConn::DoClose() {
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  stream_.close();
}

// Closing with request bytes unread (413, malformed): send FIN, then discard
// what the client still sends for a while, so that the kernel does not
// answer with a reset that could destroy the error response in flight.
void HttpConn::DoLingerClose() {
  error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (!linger_buf_) linger_buf_.reset(new char[16384]);
  stream_.expires_after(std::chrono::seconds(2));
  stream_.async_read_some(asio::buffer(linger_buf_.get(), 16384), [self = shared_from_this()](error_code e, size_t) {
    if (e) return self->stream_.close();
    self->DoLingerClose();
  });
}

}  // namespace toktier::proxy
