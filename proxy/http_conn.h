// One client connection of `toktier serve`, in the style of Beast's advanced
// server: on its own strand, do_x/on_x pairs, a deadline before every
// operation, error_code overloads only. Two files implement it:
//   http_conn.cpp  the client side: reading a request under its deadlines and
//                  limits, checking its framing and target, routing, local
//                  answers and errors, watching the client while the backend
//                  works;
//   upstream.cpp   the backend side: the forwarded head, pooled connections,
//                  the response header (interim answers, framing), the relay
//                  and when a connection may go back to the pool.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/chat_forward.h"
#include "proxy/chat_response.h"
#include "proxy/server_impl.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {

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
  void HandleChat();  // chat_conn.cpp
  void ForwardChat(std::shared_ptr<ChatRequest> chat, ModelRuntime* model, TokenizeResult res);
  // The request's tenant and session header (its session by content when none).
  SessionRef RequestSession();
  void PassthroughCounted(std::string_view reason);
  void Passthrough(std::string_view session_key);
  void WatchClient();
  void OnClientWatch(error_code ec, size_t n);
  void AfterWatch(std::function<void()> next);
  void SendLocal(status st, std::string_view content_type, std::string body);
  void SendError(status st, std::string message, std::string type, std::string param, std::string_view endpoint,
                 std::string_view outcome, bool close, std::string code = "");
  void SendResponse(status st, std::string_view content_type, std::string body, std::string_view outcome,
                    bool close);
  // The Connection field of a response to this request, from keep_alive_.
  void SetKeepAlive(boost::beast::http::fields& res) const;
  void ResetPhases(Clock::time_point t);
  void Record(std::string_view outcome);
  void DoClose();
  void DoLingerClose();

  // ---- backend side (upstream.cpp) ----------------------------------------
  void Forward(ForwardBody body, const std::string& session_key);
  void BuildHead(const Backend& b);
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
  void Abort(std::string_view outcome);

  Server::Impl* srv_;  // outlives every connection (Shutdown joins the I/O threads)
  boost::beast::tcp_stream stream_;
  boost::asio::any_io_executor strand_;
  static constexpr size_t kReadChunk = 64 * 1024;
  static constexpr size_t kRelayBuffer = 64 * 1024;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  bool idle_ = false;
  bool keep_alive_ = true;
  bool recorded_ = false;
  bool aborted_ = false;
  boost::beast::http::verb method_ = boost::beast::http::verb::get;
  std::string endpoint_ = "local";
  std::string outcome_;
  std::string model_;
  unsigned status_ = 0;
  uint64_t tenant_ = 0;  // hash of Authorization: the key of the backend connection pools
  // The whole request (header and body) must arrive by this time; it starts
  // with the request's first byte (before that the idle timeout applies).
  Clock::time_point request_deadline_;
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
  size_t up_header_bytes_ = 0;  // of the interim responses before the final one
  std::string head_;
  std::vector<boost::asio::const_buffer> bufs_;
  std::optional<boost::beast::tcp_stream> up_;
  boost::beast::flat_buffer up_buf_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> up_parser_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::buffer_body>> sr_;
  std::unique_ptr<char[]> relay_;
  std::unique_ptr<char[]> linger_buf_;
  bool watching_ = false;     // a watch read is pending
  bool watch_armed_ = false;  // its EOF/error would mean the client left
  std::function<void()> after_watch_;

  // Chat in "completions" mode: the request goes to up_target_ and a 200
  // answer is translated back to the chat format on its way to the client.
  std::string up_target_;  // "" = the client's target
  std::optional<ChatTranslateOptions> chat_translate_;
  bool chat_stream_ = false;
  bool translating_ = false;  // this response (200) is being translated
  // A whole (not streamed) answer being translated: its head goes out with
  // the translated body, so a failure before then is still an error status.
  bool head_deferred_ = false;
  std::unique_ptr<ChatStreamTranslator> chat_stream_tr_;
  std::string tr_in_, tr_out_;
  // The relay's next piece for the client when translating: tr_out_ (false:
  // the answer is malformed, logged and counted).
  bool TranslateRelayed(std::string_view bytes, bool last);
  // A relay that cannot go on: a 502/504 while nothing went out to the
  // client (a deferred head), else the response is cut off (`outcome`).
  void RelayFailed(std::string_view outcome, bool timeout);
};

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b);

}  // namespace toktier::proxy
