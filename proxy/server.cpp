// Boost.Beast server in the style of Beast's advanced server: one
// HttpConn per connection on its own strand, do_x/on_x pairs, a timeout set
// before every operation, error_code overloads only (no exceptions on the
// data plane).
#include "proxy/server.h"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <pthread.h>
#include <random>
#include <thread>

#include "core/core.h"
#include "proxy/backends.h"
#include "proxy/completion_request.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kRelayBuffer = 64 * 1024;

bool IsHopByHop(http::field f, std::string_view name) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::proxy_authorization:
    case http::field::proxy_authenticate:
      return true;
    default:
      return false;
  }
}

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

class HttpConn;

struct Server::Impl {
  explicit Impl(Config c)
      : config(std::move(c)),
        service(config, &metrics),
        backends(config, &metrics),
        ioc(std::max(1, config.io_threads)),
        acceptor(asio::make_strand(ioc)) {}

  // Declared before ioc: handlers destroyed with ioc touch `connections`.
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::atomic<int> connections{0};
  std::atomic<uint64_t> passthrough_counter{0};
  Config config;
  metrics::Metrics metrics;
  TokenizeService service;
  Backends backends;
  asio::io_context ioc;
  tcp::acceptor acceptor;
  std::vector<std::thread> threads;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  uint16_t bound_port = 0;

  std::mutex conns_mu;
  std::list<std::weak_ptr<HttpConn>> conns;

  void DoAccept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void Drain();
};

class HttpConn : public std::enable_shared_from_this<HttpConn> {
 public:
  HttpConn(Server::Impl* srv, tcp::socket&& socket)
      : srv_(srv), stream_(std::move(socket)), strand_(stream_.get_executor()) {
    srv_->connections.fetch_add(1);
    // Beast reads at most the buffer's free capacity (>= 512 bytes) per
    // read_some; without room a megabyte body takes thousands of reads.
    buffer_.reserve(kReadChunk);
    up_buf_.reserve(kReadChunk);
  }
  ~HttpConn() { srv_->connections.fetch_sub(1); }

  void Run() {
    asio::dispatch(strand_, beast::bind_front_handler(&HttpConn::DoRead, shared_from_this()));
  }

  // Closes the connection if it waits for a request (drain).
  void CloseIfIdle() {
    asio::dispatch(strand_, [self = shared_from_this()] {
      if (self->idle_) {
        beast::error_code ec;
        self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
        self->stream_.close();
      }
    });
  }

 private:
  const Config& cfg() const { return srv_->config; }
  metrics::Metrics& m() { return srv_->metrics; }

  // ---- reading a request -------------------------------------------------
  void DoRead() {
    if (srv_->draining) return DoClose();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(cfg().max_header_bytes, UINT32_MAX)));
    parser_->body_limit(cfg().max_body_bytes);
    idle_ = buffer_.size() == 0;
    stream_.expires_after(std::chrono::milliseconds(idle_ ? cfg().idle_timeout_ms : cfg().read_timeout_ms));
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&HttpConn::OnReadHeader, shared_from_this()));
  }

  void OnReadHeader(beast::error_code ec, size_t) {
    idle_ = false;
    recorded_ = false;
    aborted_ = false;
    body_.reset();
    model_.clear();
    status_ = 0;
    endpoint_ = "local";
    t_start_ = Clock::now();
    ResetPhases(t_start_);
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof) {
      return DoClose();
    }
    if (ec == http::error::body_limit) {
      return SendError(http::status::payload_too_large,
                       "Request body exceeds the limit of " + std::to_string(cfg().max_body_bytes) + " bytes.",
                       "invalid_request_error", "", "local", "client_error", true);
    }
    if (ec == http::error::header_limit) {
      return SendError(http::status::request_header_fields_too_large, "Request header fields too large.",
                       "invalid_request_error", "", "local", "client_error", true);
    }
    if (ec) {
      return SendError(http::status::bad_request, "Malformed HTTP request.", "invalid_request_error", "", "local",
                       "client_error", true);
    }
    auto len = parser_->content_length();
    if (len && *len > cfg().max_body_bytes) {
      return SendError(http::status::payload_too_large,
                       "Request body of " + std::to_string(*len) + " bytes exceeds the limit of " +
                           std::to_string(cfg().max_body_bytes) + " bytes.",
                       "invalid_request_error", "", "local", "client_error", true);
    }
    // Room for simdjson's padding, so the body is parsed where it lies.
    parser_->get().body().reserve((len ? *len : 0) + JsonPadding());
    auto& req = parser_->get();
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      stream_.expires_after(std::chrono::milliseconds(cfg().read_timeout_ms));
      return asio::async_write(stream_, asio::buffer(kContinue),
                               [self = shared_from_this()](beast::error_code e, size_t) {
                                 if (e) return self->DoClose();
                                 self->DoReadBody();
                               });
    }
    DoReadBody();
  }

  void DoReadBody() {
    stream_.expires_after(std::chrono::milliseconds(cfg().read_timeout_ms));
    auto& req = parser_->get();
    auto len = parser_->content_length();
    if (len && *len > kReadChunk && !req.chunked()) return DoReadBodyDirect(*len);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&HttpConn::OnRead, shared_from_this()));
  }

  // A large body of known length is read straight into the body string: one
  // copy (the kernel's) instead of socket -> buffer -> body, in reads as large
  // as the socket has data for. Bytes after the body (a pipelined request)
  // stay in buffer_.
  void DoReadBodyDirect(size_t len) {
    std::string& body = parser_->get().body();
    body.resize(len);
    const size_t have = std::min(buffer_.size(), len);
    std::memcpy(body.data(), buffer_.data().data(), have);
    buffer_.consume(have);
    if (have == len) return HandleRequest();
    asio::async_read(stream_, asio::buffer(body.data() + have, len - have),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->DoClose();  // timeout, reset, or EOF before the body ended
                       self->HandleRequest();
                     });
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit) {
      return SendError(http::status::payload_too_large,
                       "Request body exceeds the limit of " + std::to_string(cfg().max_body_bytes) + " bytes.",
                       "invalid_request_error", "", "local", "client_error", true);
    }
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset || ec == asio::error::eof || ec == http::error::partial_message) {
      return DoClose();
    }
    if (ec) {
      return SendError(http::status::bad_request, "Malformed HTTP request.", "invalid_request_error", "", "local",
                       "client_error", true);
    }
    HandleRequest();
  }

  // ---- routing -----------------------------------------------------------
  void HandleRequest() {
    ResetPhases(Clock::now());
    auto& req = parser_->get();
    keep_alive_ = req.keep_alive();
    method_ = req.method();
    std::string_view target(req.target().data(), req.target().size());
    std::string_view path = target.substr(0, target.find('?'));
    if (path == "/healthz" || path == "/readyz" || path == "/metrics") {
      endpoint_ = "local";
      if (method_ != http::verb::get && method_ != http::verb::head) {
        return SendError(http::status::method_not_allowed, "Method not allowed.", "invalid_request_error", "",
                         "local", "client_error", false);
      }
      if (path == "/healthz") return SendLocal(http::status::ok, "text/plain", "ok\n");
      if (path == "/readyz") {
        bool ready = !srv_->draining && srv_->backends.AnyHealthy();
        return SendLocal(ready ? http::status::ok : http::status::service_unavailable, "text/plain",
                         ready ? "ready\n" : "not ready\n");
      }
      srv_->service.UpdateGauges();
      return SendLocal(http::status::ok, "text/plain; version=0.0.4", m().Serialize());
    }
    if (path == "/v1/completions" && method_ == http::verb::post) return HandleCompletions();
    if (path.substr(0, 4) == "/v1/" || path == "/tokenize" || path == "/detokenize") {
      endpoint_ = "passthrough";
      return Passthrough("");
    }
    endpoint_ = "local";
    SendError(http::status::not_found, "Unknown request URL: " + std::string(http::to_string(method_)) + " " +
                                           std::string(path) + ".",
              "invalid_request_error", "", "local", "client_error", false, "unknown_url");
  }

  void HandleCompletions() {
    endpoint_ = "completions";
    auto& req = parser_->get();
    body_ = std::make_shared<std::string>(std::move(req.body()));
    auto creq = std::make_shared<CompletionRequest>();
    RequestError err;
    const bool parsed = ParseCompletionRequest(*body_, creq.get(), &err);
    t_parsed_ = Clock::now();
    if (!parsed) {
      return SendError(static_cast<http::status>(err.status), err.message, err.type, err.param, "completions",
                       "client_error", false);
    }
    model_ = creq->model;
    ModelRuntime* model = srv_->service.FindModel(creq->model);
    if (!model) return PassthroughCounted("unknown_model");
    if (creq->kind == PromptKind::kTokens) return PassthroughCounted("token_prompt");
    if (!model->ForwardIds()) return PassthroughCounted("text_mode");
    // The body's UTF-8 was validated by the parser; prompt escapes are checked
    // by the worker as it unescapes them.
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
    auto self = shared_from_this();
    bool queued = srv_->service.Submit(model, body_, creq, sref, [self](TokenizeResult res) {
      // On a worker thread: back to the connection's strand.
      asio::post(self->strand_, [self, res = std::move(res)]() mutable {
        if (!res.ok) {
          return self->SendError(http::status::bad_request, "'prompt' is not a valid JSON string: " + res.error,
                                 "invalid_request_error", "prompt", "completions", "client_error", false);
        }
        self->t_worker_start_ = res.worker_start;
        self->t_worker_end_ = res.worker_end;
        self->Forward(std::move(res.body), res.session_key);
      });
    });
    if (!queued) {
      m().counter(metrics::Id::kOverloadPassthrough).Inc();
      return Passthrough("");
    }
  }

  void PassthroughCounted(std::string_view reason) {
    m().counter(metrics::Id::kPassthrough, {reason}).Inc();
    Passthrough("");
  }

  void Passthrough(std::string_view session_key) {
    auto& req = parser_->get();
    if (!body_) body_ = std::make_shared<std::string>(std::move(req.body()));
    // Other /v1/ POSTs (chat, embeddings, /tokenize) go to their model's
    // pool when models have their own.
    if (model_.empty() && srv_->backends.HasModelPools() && method_ == http::verb::post) {
      model_ = ModelOfJsonBody(*body_);
    }
    ForwardBody fb;
    fb.pieces.push_back(*body_);
    fb.owners.push_back(body_);
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

  // ---- forwarding to a backend -------------------------------------------
  void Forward(ForwardBody body, const std::string& session_key) {
    t_tokenized_ = Clock::now();
    WatchClient();
    fwd_ = std::move(body);
    ranking_ = srv_->backends.Rank(model_, session_key);
    attempt_ = 0;
    if (ranking_.empty()) {
      return SendError(http::status::bad_gateway, "No backend configured for this model.", "server_error", "",
                       endpoint_, "bad_gateway", false);
    }
    TryBackend(/*allow_reuse=*/true);
  }

  void BuildHead(const Backend& b) {
    auto& req = parser_->get();
    head_.clear();
    head_.append(req.method_string().data(), req.method_string().size());
    head_ += ' ';
    head_.append(req.target().data(), req.target().size());
    head_ += " HTTP/1.1\r\nHost: ";
    head_ += b.host_header;
    head_ += "\r\n";
    for (const auto& f : req) {
      http::field id = f.name();
      if (IsHopByHop(id, {}) || id == http::field::host || id == http::field::content_length ||
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

  void TryBackend(bool allow_reuse) {
    if (attempt_ >= ranking_.size()) {
      m().counter(metrics::Id::kBackendRequests, {"connect_error"}).Inc();
      return SendError(http::status::bad_gateway, "The backend engine is unreachable.", "server_error", "",
                       endpoint_, "bad_gateway", false);
    }
    Backend* b = ranking_[attempt_];
    backend_ = b;
    BuildHead(*b);
    int fd = allow_reuse ? b->TakeIdle() : -1;
    up_.emplace(strand_);
    if (fd >= 0) {
      beast::error_code ec;
      up_->socket().assign(b->v6 ? tcp::v6() : tcp::v4(), fd, ec);
      if (!ec) {
        reused_ = true;
        return DoUpWrite();
      }
    }
    reused_ = false;
    beast::error_code ec;
    tcp::endpoint ep(asio::ip::make_address(b->host, ec), b->port);
    up_->expires_after(std::chrono::milliseconds(cfg().backend_connect_timeout_ms));
    up_->async_connect(ep, beast::bind_front_handler(&HttpConn::OnUpConnect, shared_from_this()));
  }

  void OnUpConnect(beast::error_code ec) {
    if (aborted_) return;  // the client left; Abort closed both sides
    if (ec) {
      // Failover: the next backend in the ranking (no bytes were sent).
      m().counter(metrics::Id::kBackendRequests, {"failover"}).Inc();
      backend_->healthy = false;
      backend_->health_gauge.Set(0);
      ++attempt_;
      return TryBackend(true);
    }
    beast::error_code e2;
    up_->socket().set_option(tcp::no_delay(true), e2);
    DoUpWrite();
  }

  void DoUpWrite() {
    bufs_.clear();
    bufs_.push_back(asio::buffer(head_));
    for (auto p : fwd_.pieces) {
      if (!p.empty()) bufs_.push_back(asio::buffer(p.data(), p.size()));
    }
    up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
    asio::async_write(*up_, bufs_, beast::bind_front_handler(&HttpConn::OnUpWrite, shared_from_this()));
  }

  void OnUpWrite(beast::error_code ec, size_t) {
    if (aborted_) return;  // the client left; Abort closed both sides
    if (ec) {
      if (reused_) return TryBackend(false);  // a stale pooled connection
      m().counter(metrics::Id::kBackendRequests, {"io_error"}).Inc();
      return SendError(http::status::bad_gateway, "Writing to the backend engine failed: " + ec.message(),
                       "server_error", "", endpoint_, "bad_gateway", false);
    }
    t_sent_ = Clock::now();
    up_buf_.clear();
    up_parser_.emplace();
    up_parser_->body_limit(boost::none);
    if (method_ == http::verb::head) up_parser_->skip(true);
    up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
    http::async_read_header(*up_, up_buf_, *up_parser_,
                            beast::bind_front_handler(&HttpConn::OnUpHeader, shared_from_this()));
  }

  void OnUpHeader(beast::error_code ec, size_t n) {
    if (aborted_) return;  // the client left; Abort closed both sides
    if (ec == beast::error::timeout) {
      m().counter(metrics::Id::kBackendRequests, {"timeout"}).Inc();
      return SendError(http::status::gateway_timeout, "The backend engine did not answer in time.", "timeout", "",
                       endpoint_, "gateway_timeout", false);
    }
    if (ec) {
      if (reused_ && up_buf_.size() == 0) return TryBackend(false);
      m().counter(metrics::Id::kBackendRequests, {"io_error"}).Inc();
      return SendError(http::status::bad_gateway, "The backend engine closed the connection: " + ec.message(),
                       "server_error", "", endpoint_, "bad_gateway", false);
    }
    t_up_header_ = Clock::now();
    m().histogram(metrics::Id::kBackendTtfb).Observe(Seconds(t_sent_, t_up_header_));
    m().counter(metrics::Id::kBackendRequests, {"ok"}).Inc();
    auto& res = up_parser_->get();
    status_ = res.result_int();
    up_keep_alive_ = res.keep_alive();
    const bool chunked = res.chunked();
    const bool has_length = res.has_content_length();
    // Strip hop-by-hop fields; the serializer re-frames the body.
    for (auto it = res.begin(); it != res.end();) {
      if (IsHopByHop(it->name(), {})) it = res.erase(it); else ++it;
    }
    if (chunked || (!has_length && !up_parser_->is_done())) {
      if (parser_->get().version() >= 11) {
        res.chunked(true);
      } else {
        keep_alive_ = false;
      }
    }
    res.keep_alive(keep_alive_);
    relay_.reset(new char[kRelayBuffer]);
    sr_.emplace(res);
    stream_.expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
    http::async_write_header(stream_, *sr_,
                             beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
  }

  void RelayRead() {
    auto& body = up_parser_->get().body();
    if (up_parser_->is_done()) {
      body.data = nullptr;
      body.size = 0;
      body.more = false;
      return DoClientWrite();
    }
    body.data = relay_.get();
    body.size = kRelayBuffer;
    up_->expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
    http::async_read_some(*up_, up_buf_, *up_parser_,
                          beast::bind_front_handler(&HttpConn::OnRelayRead, shared_from_this()));
  }

  void OnRelayRead(beast::error_code ec, size_t) {
    if (aborted_) return;  // the client left; Abort closed both sides
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      // The backend failed mid-response: the client sees a truncated message.
      m().counter(metrics::Id::kBackendRequests, {ec == beast::error::timeout ? "timeout" : "io_error"}).Inc();
      return Abort("backend_error");
    }
    auto& body = up_parser_->get().body();
    size_t n = kRelayBuffer - body.size;
    body.data = relay_.get();
    body.size = n;
    body.more = !up_parser_->is_done();
    if (n == 0 && body.more) return RelayRead();
    DoClientWrite();
  }

  void DoClientWrite() {
    stream_.expires_after(std::chrono::milliseconds(cfg().backend_timeout_ms));
    http::async_write(stream_, *sr_, beast::bind_front_handler(&HttpConn::OnClientWrite, shared_from_this()));
  }

  void OnClientWrite(beast::error_code ec, size_t) {
    if (aborted_) return;  // the client left; Abort closed both sides
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      // The client went away: cancel the backend request by closing it.
      return Abort("client_closed");
    }
    if (!sr_->is_done()) return RelayRead();
    FinishRelay();
  }

  void FinishRelay() {
    // Return the backend connection to the pool when reusable.
    if (up_ && up_parser_->is_done() && up_keep_alive_ && backend_) {
      up_->expires_never();
      beast::error_code ec;
      int fd = up_->release_socket().release(ec);
      if (!ec && fd >= 0) backend_->PutIdle(fd);
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

  // ---- noticing a client that leaves while the backend works --------------
  // A read on the client socket while the request is at the backend: EOF or
  // an error means the client is gone, so the backend request is cancelled
  // (its connection closed, as nginx does) instead of running to the end.
  // Bytes that arrive instead are a pipelined request: they stay in buffer_.
  // The read is raw (no beast timer), on the strand, and always finished
  // before the connection reads or closes again (AfterWatch).
  void WatchClient() {
    if (watching_) return;
    watching_ = true;
    watch_armed_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(kReadChunk),
        asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t n) {
          self->OnClientWatch(ec, n);
        }));
  }

  void OnClientWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (!ec) buffer_.commit(n);
    if (after_watch_) {
      auto next = std::move(after_watch_);
      after_watch_ = nullptr;
      return next();
    }
    if (ec && ec != asio::error::operation_aborted && watch_armed_) Abort("client_closed");
  }

  // Runs `next` once no watch read is pending (cancelling it).
  void AfterWatch(std::function<void()> next) {
    watch_armed_ = false;
    if (!watching_) return next();
    after_watch_ = std::move(next);
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void Abort(std::string_view outcome) {
    // Backend operations still pending (connect, write, header) complete
    // with operation_aborted: they must not count a failover or answer.
    aborted_ = true;
    watch_armed_ = false;
    Record(outcome);
    if (up_) {
      if (outcome == "client_closed") m().counter(metrics::Id::kBackendRequests, {"cancelled"}).Inc();
      beast::error_code ec;
      up_->socket().shutdown(tcp::socket::shutdown_both, ec);
      up_->close();
    }
    up_.reset();
    DoClose();
  }

  // ---- local responses ---------------------------------------------------
  void SendLocal(http::status status, std::string_view content_type, std::string body) {
    SendResponse(status, content_type, std::move(body), "ok", false);
  }

  void SendError(http::status status, std::string message, std::string type, std::string param,
                 std::string_view endpoint, std::string_view outcome, bool close, std::string code = "") {
    endpoint_ = std::string(endpoint);
    RequestError e;
    e.status = static_cast<int>(status);
    e.message = std::move(message);
    e.type = std::move(type);
    e.param = std::move(param);
    e.code = std::move(code);
    if (up_) {
      beast::error_code ec;
      up_->close();
      up_.reset();
    }
    SendResponse(status, "application/json", ErrorJson(e), outcome, close);
  }

  void SendResponse(http::status status, std::string_view content_type, std::string body, std::string_view outcome,
                    bool close) {
    auto res = std::make_shared<http::response<http::string_body>>(status, 11);
    res->set(http::field::server, "toktier");
    res->set(http::field::content_type, content_type);
    res->body() = std::move(body);
    if (close || !parser_ || !parser_->is_header_done()) keep_alive_ = false;
    res->keep_alive(keep_alive_);
    res->prepare_payload();
    if (method_ == http::verb::head) res->body().clear();
    status_ = static_cast<unsigned>(status);
    outcome_ = std::string(outcome);
    stream_.expires_after(std::chrono::milliseconds(cfg().read_timeout_ms));
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      self->Record(self->outcome_);
      self->body_.reset();
      if (ec) return self->DoClose();
      self->AfterWatch([s = self.get()] {
        if (!s->keep_alive_) return s->DoLingerClose();
        s->DoRead();
      });
    });
  }

  // Phases a request skips (a local answer, a passthrough) log as 0 ms.
  void ResetPhases(Clock::time_point t) {
    t_body_ = t_parsed_ = t_worker_start_ = t_worker_end_ = t_tokenized_ = t_sent_ = t_up_header_ = t;
  }

  void Record(std::string_view outcome) {
    if (recorded_) return;
    recorded_ = true;
    m().counter(metrics::Id::kRequests, {endpoint_, outcome}).Inc();
    m().histogram(metrics::Id::kRequestDuration, {endpoint_}).Observe(Seconds(t_start_, Clock::now()));
    if (cfg().log_requests) {
      auto ms = [](Clock::time_point a, Clock::time_point b) { return std::max(0.0, Seconds(a, b) * 1e3); };
      const auto now = Clock::now();
      std::fprintf(stderr,
                   "toktier: %s %u %s %.3f ms (body %.3f, tokenize %.3f [parse %.3f, queue %.3f, worker %.3f, "
                   "return %.3f], forward %.3f, backend header %.3f, relay %.3f)\n",
                   endpoint_.c_str(), status_, std::string(outcome).c_str(), ms(t_start_, now), ms(t_start_, t_body_),
                   ms(t_body_, t_tokenized_), ms(t_body_, t_parsed_), ms(t_parsed_, t_worker_start_),
                   ms(t_worker_start_, t_worker_end_), ms(t_worker_end_, t_tokenized_), ms(t_tokenized_, t_sent_),
                   ms(t_sent_, t_up_header_), ms(t_up_header_, now));
    }
  }

  void DoClose() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  // Closing with request bytes unread (413, malformed): send FIN, then discard
  // what the client still sends for a while, so that the kernel does not
  // answer with a reset that could destroy the error response in flight.
  void DoLingerClose() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (!linger_buf_) linger_buf_.reset(new char[16384]);
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(asio::buffer(linger_buf_.get(), 16384),
                            [self = shared_from_this()](beast::error_code e, size_t) {
                              if (e) return self->stream_.close();
                              self->DoLingerClose();
                            });
  }

 private:
  Server::Impl* srv_;  // outlives every connection (Shutdown joins the I/O threads)
  beast::tcp_stream stream_;
  asio::any_io_executor strand_;
  static constexpr size_t kReadChunk = 64 * 1024;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool idle_ = false;
  bool keep_alive_ = true;
  bool recorded_ = false;
  bool aborted_ = false;
  http::verb method_ = http::verb::get;
  std::string endpoint_ = "local";
  std::string outcome_;
  std::string model_;
  unsigned status_ = 0;
  // Phases of the current request, for log_requests: header read, body
  // read, tokenized (back on the strand), forwarded, backend header.
  Clock::time_point t_start_, t_body_, t_tokenized_, t_sent_, t_up_header_;
  Clock::time_point t_parsed_, t_worker_start_, t_worker_end_;  // inside the tokenize phase
  std::shared_ptr<std::string> body_;

  // Backend exchange.
  ForwardBody fwd_;
  std::vector<Backend*> ranking_;
  size_t attempt_ = 0;
  Backend* backend_ = nullptr;
  bool reused_ = false;
  bool up_keep_alive_ = false;
  std::string head_;
  std::vector<asio::const_buffer> bufs_;
  std::optional<beast::tcp_stream> up_;
  beast::flat_buffer up_buf_;
  std::optional<http::response_parser<http::buffer_body>> up_parser_;
  std::optional<http::response_serializer<http::buffer_body>> sr_;
  std::unique_ptr<char[]> relay_;
  std::unique_ptr<char[]> linger_buf_;
  bool watching_ = false;     // a watch read is pending
  bool watch_armed_ = false;  // its EOF/error would mean the client left
  std::function<void()> after_watch_;
};

void Server::Impl::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc), beast::bind_front_handler(&Impl::OnAccept, this));
}

void Server::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    return DoAccept();  // e.g. EMFILE: keep accepting
  }
  if (draining) return;
  beast::error_code e2;
  socket.set_option(tcp::no_delay(true), e2);
  auto conn = std::make_shared<HttpConn>(this, std::move(socket));
  {
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->expired()) it = conns.erase(it); else ++it;
    }
    conns.push_back(conn);
  }
  conn->Run();
  DoAccept();
}

void Server::Impl::Drain() {
  std::lock_guard<std::mutex> lock(conns_mu);
  for (auto& w : conns) {
    if (auto c = w.lock()) c->CloseIfIdle();
  }
}

Server::Server(Config config) : impl_(std::make_shared<Impl>(std::move(config))) {}

Server::~Server() { Shutdown(); }

bool Server::Start(std::string* error) {
  Impl& s = *impl_;
  if (!s.service.Init(error)) return false;
  if (!s.backends.Init(&s.service, error)) return false;
  s.service.Start();
  s.backends.Start();
  beast::error_code ec;
  auto addr = asio::ip::make_address(s.config.listen_address, ec);
  if (ec) {
    *error = "bad listen address: " + s.config.listen_address;
    return false;
  }
  tcp::endpoint ep(addr, s.config.port);
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    *error = "cannot listen on " + s.config.listen_address + ":" + std::to_string(s.config.port) + ": " + ec.message();
    return false;
  }
  s.bound_port = s.acceptor.local_endpoint(ec).port();
  s.work.emplace(s.ioc.get_executor());
  s.DoAccept();
  for (int i = 0; i < std::max(1, s.config.io_threads); ++i) {
    s.threads.emplace_back([&s] {
      pthread_setname_np(pthread_self(), "toktier-io");
      s.ioc.run();
    });
  }
  return true;
}

uint16_t Server::port() const { return impl_->bound_port; }

void Server::RunUntilSignal() {
  asio::io_context sig_ioc;
  asio::signal_set signals(sig_ioc, SIGINT, SIGTERM);
  signals.async_wait([](beast::error_code, int sig) {
    std::fprintf(stderr, "toktier: signal %d: draining\n", sig);
  });
  sig_ioc.run();
  Shutdown();
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  s.draining = true;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
  });
  auto deadline = Clock::now() + std::chrono::milliseconds(s.config.drain_timeout_ms);
  while (Clock::now() < deadline) {
    s.Drain();
    if (s.connections.load() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  s.backends.Stop();
  s.service.Stop();
}

const Config& Server::config() const { return impl_->config; }
metrics::Metrics& Server::metrics() { return impl_->metrics; }
TokenizeService& Server::service() { return impl_->service; }
Backends& Server::backends() { return impl_->backends; }

}  // namespace toktier::proxy
