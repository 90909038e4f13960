// One client connection of `toktier serve`, in the style of Beast's advanced
// server: on its own strand, do_x/on_x pairs, a deadline before every
// operation, error_code overloads only. Three parts:
//   the client side   http_conn.cpp: reading a request under its deadlines
//                     and limits, checking its framing and target, routing,
//                     local answers and errors (ErrorReply), watching the
//                     client while the engine works; chat_conn.cpp: a chat
//                     request's way onto the token path;
//   the engine side   upstream.cpp with one UpstreamAttempt per try
//                     (upstream_attempt.h): failover, the response header,
//                     the relay to the client;
//   the translation   an api::ResponseTranslator between the two when the
//                     client's API is not the engine's (api/api.h).
// Each request gets a fresh RequestState; only the connection's buffers and
// its watch on the client outlive a request.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api.h"
#include "proxy/request_outcome.h"
#include "proxy/server_impl.h"
#include "proxy/tokenize_service.h"
#include "proxy/upstream_attempt.h"

namespace toktier::proxy {

// A client API mapped onto the chat path (api/messages_request.h,
// api/responses_request.h); both null: a plain chat request.
struct MappedRequest {
  std::shared_ptr<const api::MessagesRequest> messages;
  std::shared_ptr<const api::ResponsesRequest> responses;
  bool count_tokens = false;  // /v1/messages/count_tokens: answered here
  bool mapped() const { return messages || responses; }
  // The session the body names (metadata.user_id, prompt_cache_key).
  std::string session_id() const {
    return messages ? messages->session_id : responses ? responses->session_id : std::string();
  }
};

// A chat request (or a mapped one) made ready for the tokenizer, off the
// I/O thread for a large body (HttpConn::Prepare): parsed, checked, its engine body
// planned and its prompt rendered, or what to answer instead. Built by a
// pure function; the connection acts on it back on its strand.
struct PreparedChat {
  enum class Next { kSubmit, kError, kPassthrough };
  Next next = Next::kSubmit;
  ErrorReply error;                   // kError
  std::string passthrough_reason;     // kPassthrough: the counted reason
  std::shared_ptr<api::ChatRequest> chat;
  ModelRuntime* model = nullptr;
  MappedRequest mapped;
  std::shared_ptr<api::ChatForwardPlan> plan;  // null for count_tokens
  std::shared_ptr<std::string> synth;          // the rendered prompt as a completions body
  std::shared_ptr<api::CompletionRequest> creq;
  std::chrono::steady_clock::time_point t_parsed;
  std::string model_name;           // the parsed body's model ("" = keep the request's)
  size_t hosted_tools_dropped = 0;  // /v1/responses: counted on the strand
  // What parsing and rendering left to free (emptied trees: the request's
  // body, the template's values): freed on the prepare thread once the
  // request has moved on.
  std::vector<std::shared_ptr<void>> leftovers;
  // A /render endpoint: the engine body is planned in vLLM's token-in shape
  // (its GenerateRequest) whatever the model's mode, and answered instead of
  // sent.
  bool render = false;

  api::ChatForward BodyMode() const { return render ? api::ChatForward::kVllm : model->chat->mode; }

  void Fail(ErrorReply reply) {
    next = Next::kError;
    error = std::move(reply);
  }
  void Relay(std::string reason) {
    next = Next::kPassthrough;
    passthrough_reason = std::move(reason);
  }
  // Runs a body parser (`parse(RequestError*)` -> bool) and notes when it
  // ended; a refusal, or a parser that throws, becomes the 400 that says why.
  template <typename Parse>
  bool Parsed(Parse parse) {
    api::RequestError err;
    bool ok = false;
    try {
      ok = parse(&err);
    } catch (const std::exception& e) {
      err.message = std::string("The request body could not be read: ") + e.what();
    }
    t_parsed = std::chrono::steady_clock::now();
    if (!ok) Fail(ErrorReply{std::move(err)});
    return ok;
  }
};

// Everything one request owns, from its first byte to its last answer byte.
struct RequestState {
  using Clock = std::chrono::steady_clock;

  Endpoint endpoint = Endpoint::kLocal;
  ClientApi client_api = ClientApi::kOpenAI;  // the shape of its error answers
  Outcome outcome = Outcome::kOk;
  bool recorded = false;
  bool aborted = false;  // the client left: pending engine operations answer nothing
  boost::beast::http::verb method = boost::beast::http::verb::get;
  bool keep_alive = true;
  std::string model;
  unsigned status = 0;
  uint64_t tenant = 0;  // hash of Authorization: the key of the backend connection pools
  // The whole request (header and body) must arrive by this time; it starts
  // with the request's first byte (before that the idle timeout applies).
  Clock::time_point deadline;
  // Phases, for log_requests: header read, body read, tokenized (back on the
  // strand), forwarded, backend header; inside the tokenize phase: parsed,
  // the worker's start and end.
  Clock::time_point t_start, t_body, t_tokenized, t_sent, t_up_header;
  Clock::time_point t_parsed, t_worker_start, t_worker_end;
  std::shared_ptr<std::string> body;

  // The engine side: what is forwarded, where, and the current attempt.
  ForwardBody forward;
  std::string up_target;  // "" = the client's target
  std::vector<Backend*> ranking;
  size_t ranked = 0;  // the index in `ranking` of the backend tried now
  std::unique_ptr<UpstreamAttempt> attempt;
  // The answer's way to the client.
  std::optional<boost::beast::http::response_serializer<boost::beast::http::buffer_body>> serializer;
  std::unique_ptr<char[]> relay;

  // The translation stage (null: the engine's answer is relayed as it is).
  std::unique_ptr<api::ResponseTranslator> translator;
  bool translating = false;  // this answer (a 200) goes through the translator
  // A whole answer being translated: its head goes out with the translated
  // body, so a failure before then is still an error status.
  bool head_deferred = false;
  std::string translated;  // the relay's next piece for the client when translating
};

class HttpConn : public std::enable_shared_from_this<HttpConn> {
 public:
  HttpConn(Server::Impl* srv, boost::asio::ip::tcp::socket&& socket);
  ~HttpConn();
  void Run();
  // Closes the connection if it waits for a request (drain).
  void CloseIfIdle();

 private:
  using Clock = std::chrono::steady_clock;
  using tcp = boost::asio::ip::tcp;
  using error_code = boost::beast::error_code;
  using status = boost::beast::http::status;

  const Config& cfg() const { return srv_->config; }
  metrics::Metrics& m() { return srv_->metrics; }

  // ---- client side (http_conn.cpp) ----------------------------------------
  void DoRead();
  void OnFirstBytes(error_code ec, size_t n);
  void StartRequest();
  void OnReadHeader(error_code ec, size_t header_bytes);
  void DoReadBody();
  void DoReadBodyDirect(size_t len);
  void OnRead(error_code ec, size_t);
  void OnRequestReadError(error_code ec);
  void OnReadFailed(error_code ec);
  void HandleRequest();
  void HandleCompletions();
  void HandleChat(bool render);  // chat_conn.cpp; render: /v1/chat/completions/render
  void ForwardChat(std::shared_ptr<ChatRequest> chat, std::shared_ptr<const ChatForwardPlan> plan, ModelRuntime* model,
                   TokenizeResult res, MappedRequest mapped);
  // Runs `work` (pure: it must not touch the connection) and then `then`
  // with its result on the strand. A large body's work runs on the prepare
  // pool: parsing and rendering a 1 MB conversation takes milliseconds
  // that would hold up every other connection of this I/O thread.
  template <typename Work, typename Then>
  void Prepare(Work work, Then then);
  // The pure part of a chat request's way to the tokenizer (chat_conn.cpp):
  // the engine body's plan, the render and the completions body. Static:
  // it runs on the prepare pool.
  static void RenderForTokenizer(PreparedChat* p);
  // Acts on a prepared chat request: an error, a relay, or the tokenizer.
  void SubmitPrepared(PreparedChat p);
  // A mapped request's checks before RenderForTokenizer (mapped_conn.cpp):
  // the model it names and what its mode cannot carry. Static (pool).
  static void PrepareMapped(TokenizeService* service, ModelRuntime* target, nlohmann::ordered_json chat_body,
                            const std::string& model_name, bool stream, PreparedChat* p);
  void HandleMessages(bool count_tokens, bool render);  // mapped_conn.cpp
  void HandleResponses(bool render);                   // mapped_conn.cpp
  // The local answers' common start: the worker's phases noted, and true
  // when the prompt was tokenized, else a 503 sent.
  bool PromptTokenizedOr503(const TokenizeResult& res);
  void AnswerCountTokens(const TokenizeResult& res);
  // A /render endpoint's answer: vLLM's GenerateRequest (request_id,
  // token_ids, sampling_params, model, stream, ...), what its
  // /inference/v1/generate takes.
  void AnswerRender(const TokenizeResult& res, const ChatForwardPlan& plan, const MappedRequest& mapped);
  // The model a mapped request names, or a relay when it is not on the
  // token path (null: the request was answered or relayed).
  ModelRuntime* MappedModel(Endpoint endpoint);
  // The request's tenant and session header (its session by content when none).
  SessionRef RequestSession();
  void PassthroughCounted(std::string_view reason);
  void Passthrough(std::string_view session_key);
  void WatchClient();
  void OnClientWatch(error_code ec, size_t n);
  void AfterWatch(std::function<void()> next);
  void SendLocal(status st, std::string_view content_type, std::string body);
  // An error answer counted under `endpoint`.
  void SendError(Endpoint endpoint, ErrorReply reply);
  // The same under the request's endpoint.
  void SendError(ErrorReply reply) { SendError(rq_->endpoint, std::move(reply)); }
  void SendResponse(status st, std::string_view content_type, std::string body, Outcome outcome, bool close);
  // The Connection field of a response to this request, from its keep_alive.
  void SetKeepAlive(boost::beast::http::fields& res) const;
  void ResetPhases(Clock::time_point t);
  void Record(Outcome outcome);
  void CountBackend(BackendResult result);
  void DoClose();
  void DoLingerClose();

  // ---- engine side (upstream.cpp) -----------------------------------------
  void Forward(ForwardBody body, const std::string& session_key);
  std::string BuildHead(const Backend& b) const;
  void TryBackend(bool allow_reuse);
  void OnUpConnect(error_code ec);
  void DoUpWrite();
  void OnUpWrite(error_code ec, size_t);
  void DoUpHeader();
  void OnUpHeader(error_code ec, size_t header_bytes);
  void BadResponse(std::string_view why);
  void RelayRead();
  void OnRelayRead(error_code ec, size_t);
  void DoClientWrite();
  void OnClientWrite(error_code ec, size_t);
  void FinishRelay();
  void Abort(Outcome outcome);
  // The relay's next piece for the client through the translator, into
  // rq_->translated (false: the answer is malformed, logged and counted).
  bool TranslateRelayed(std::string_view bytes, bool last);
  // A relay that cannot go on: a 502/504 while nothing went out to the
  // client (a deferred head), else the response is cut off (`outcome`).
  void RelayFailed(Outcome outcome, bool timeout);

  Server::Impl* srv_;  // outlives every connection (Shutdown joins the I/O threads)
  boost::beast::tcp_stream stream_;
  boost::asio::any_io_executor strand_;
  static constexpr size_t kReadChunk = 64 * 1024;
  static constexpr size_t kRelayBuffer = 64 * 1024;
  boost::beast::flat_buffer buffer_;     // client bytes
  boost::beast::flat_buffer up_buffer_;  // engine bytes (the attempts share it)
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::unique_ptr<RequestState> rq_;  // never null; replaced by StartRequest
  bool idle_ = false;
  std::unique_ptr<char[]> linger_buf_;
  bool watching_ = false;     // a watch read is pending
  bool watch_armed_ = false;  // its EOF/error would mean the client left
  std::function<void()> after_watch_;
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

// Bodies from this size on are prepared on the pool; a smaller one is
// parsed and rendered on the I/O thread in well under a millisecond, less
// than the two thread hops would add.
inline constexpr size_t kPrepareOffPoolBelowBytes = 64 * 1024;

template <typename Work, typename Then>
void HttpConn::Prepare(Work work, Then then) {
  if (rq_->body->size() < kPrepareOffPoolBelowBytes) return then(work());
  boost::asio::post(*srv_->prepare_pool, [self = shared_from_this(), work = std::move(work),
                                          then = std::move(then)]() mutable {
    // The pool's thread boundary, as RunIoThread is the I/O threads': an
    // exception the job lets through (a bug: bad input is a 400 inside it)
    // is logged and counted, the request is dropped as the I/O thread drops
    // it, and the thread goes on (an escaping one would end the process).
    std::optional<decltype(work())> result;
    try {
      result.emplace(work());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "toktier: exception on a prepare thread: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "toktier: exception on a prepare thread\n");
    }
    // `self` rides along: while the work ran, nothing else held the
    // connection; without a result it ends on its strand, unanswered.
    auto strand = self->strand_;
    if (!result) {
      return boost::asio::post(strand, [self = std::move(self)] {
        self->m().counter(metrics::Id::kThreadExceptions, {"prepare"}).Inc();
      });
    }
    // Freeing a long conversation's emptied trees takes milliseconds: this
    // thread does it after the hand-off, while the request goes on.
    std::vector<std::shared_ptr<void>> leftovers;
    if constexpr (requires { result->leftovers; }) leftovers = std::move(result->leftovers);
    boost::asio::post(strand, [self = std::move(self), result = std::move(*result), then = std::move(then)]() mutable {
      then(std::move(result));
    });
    leftovers.clear();
  });
}

}  // namespace toktier::proxy
