#include "mock_engine.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <list>
#include <string_view>
#include <thread>

namespace toktier::test {
namespace {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
}  // namespace

struct MockEngine::Impl {
  asio::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::thread accept_thread;
  std::mutex mu;
  std::vector<MockRequest> requests;
  std::list<std::thread> conn_threads;
  std::list<std::shared_ptr<tcp::socket>> sockets;
  std::atomic<bool> stop{false};
  Clock::time_point first_event, last_event;
  std::vector<std::pair<std::string, std::string>> response_headers;
  std::string completion_text, completion_finish;  // "" = the fixed OkBody
  std::vector<uint32_t> generate_ids;
  std::string generate_finish = "length";

  void Serve(MockEngine* e, std::shared_ptr<tcp::socket> sock);
};

MockEngine::MockEngine(uint16_t port, bool record) : impl_(std::make_unique<Impl>()), record_(record) {
  beast::error_code ec;
  tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  impl_->acceptor.open(ep.protocol(), ec);
  impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  impl_->acceptor.bind(ep, ec);
  impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  port_ = impl_->acceptor.local_endpoint(ec).port();
  impl_->accept_thread = std::thread([this] {
    for (;;) {
      auto sock = std::make_shared<tcp::socket>(impl_->ioc);
      beast::error_code aec;
      impl_->acceptor.accept(*sock, aec);
      if (impl_->stop) return;
      if (aec) continue;
      sock->set_option(tcp::no_delay(true), aec);
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->sockets.push_back(sock);
      impl_->conn_threads.emplace_back([this, sock] { impl_->Serve(this, sock); });
    }
  });
}

MockEngine::~MockEngine() {
  impl_->stop = true;
  beast::error_code ec;
  // Wake the accept call.
  {
    tcp::socket s(impl_->ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
  }
  impl_->accept_thread.join();
  impl_->acceptor.close(ec);
  std::list<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& s : impl_->sockets) s->shutdown(tcp::socket::shutdown_both, ec);
    threads.swap(impl_->conn_threads);
  }
  for (auto& t : threads) t.join();
}

std::vector<MockRequest> MockEngine::Requests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->requests;
}
void MockEngine::ClearRequests() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->requests.clear();
}
Clock::time_point MockEngine::last_event_time() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->last_event;
}
Clock::time_point MockEngine::first_event_time() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->first_event;
}

void MockEngine::SetResponseHeaders(std::vector<std::pair<std::string, std::string>> headers) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->response_headers = std::move(headers);
}

void MockEngine::SetGenerateIds(std::vector<uint32_t> ids, std::string finish_reason) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->generate_ids = std::move(ids);
  impl_->generate_finish = std::move(finish_reason);
}

void MockEngine::SetCompletionText(std::string text, std::string finish_reason) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->completion_text = std::move(text);
  impl_->completion_finish = std::move(finish_reason);
}

namespace {

// The JSON body of a normal answer, with the request's nonce when it sent one.
std::string OkBody(const std::string& nonce) {
  static const std::string kBody =
      R"({"id":"cmpl-mock","object":"text_completion","model":"mock","choices":[{"text":"ok","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})";
  if (nonce.empty()) return kBody;
  return kBody.substr(0, kBody.size() - 1) + ",\"nonce\":" + nlohmann::json(nonce).dump() + "}";
}

// The same for /v1/chat/completions: an engine that speaks chat (SGLang,
// Dynamo, vLLM) answers a chat completion.
std::string ChatOkBody(const std::string& nonce) {
  static const std::string kBody =
      R"({"id":"chatcmpl-mock","object":"chat.completion","created":1,"model":"mock","choices":[{"index":0,)"
      R"("message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],)"
      R"("usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}})";
  if (nonce.empty()) return kBody;
  return kBody.substr(0, kBody.size() - 1) + ",\"nonce\":" + nlohmann::json(nonce).dump() + "}";
}

// A complete 200 response as raw bytes (for the modes that write by hand).
std::string RawOk(const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Mock: 1\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string Chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return std::string(size) + data + "\r\n";
}

// One SSE event carrying `data`, as a chunk.
std::string SseChunk(const std::string& data) { return Chunk("data: " + data + "\n\n"); }

}  // namespace

void MockEngine::Impl::Serve(MockEngine* e, std::shared_ptr<tcp::socket> sock) {
  beast::flat_buffer buf;
  buf.reserve(64 * 1024);  // else each read takes ~512 bytes: thousands per MB
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(1ull << 31);
    parser.header_limit(1 << 20);  // the proxy's limit (64 KiB by default) is what tests probe
    beast::error_code ec;
    if (e->mode.load() == MockMode::kSlowRead) {
      // 4 KiB per read with a pause after each: the proxy's writes back up.
      beast::flat_buffer small(4096);
      small.reserve(4096);  // else each read takes 512 bytes
      while (!ec && !parser.is_done()) {
        http::read_some(*sock, small, parser, ec);
        std::this_thread::sleep_for(std::chrono::milliseconds(e->fault_delay_ms.load()));
      }
    } else {
      http::read(*sock, buf, parser, ec);
    }
    if (ec) break;
    auto& req = parser.get();
    const std::string nonce(req["X-Nonce"]);
    auto raw = [&](const std::string& bytes) { asio::write(*sock, asio::buffer(bytes), ec); };
    auto pause = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(e->fault_delay_ms.load())); };
    const std::string_view target = req.target();
    if (target != "/health") e->requests_seen++;
    // Without recording (the load generator) nothing is copied: a 1 MB body
    // copied per request was a large share of the harness's own CPU.
    if (e->record_ && target != "/health") {
      MockRequest r;
      r.method = std::string(req.method_string());
      r.target = std::string(target);
      for (const auto& f : req) {
        std::string name(f.name_string());
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        r.headers[name] = std::string(f.value());
      }
      r.body = req.body();
      std::lock_guard<std::mutex> lock(mu);
      requests.push_back(std::move(r));
    }
    const std::string_view path = target.substr(0, target.find('?'));
    auto respond = [&](http::status st, const std::string& ctype, std::string body) {
      http::response<http::string_body> res{st, 11};
      res.set(http::field::content_type, ctype);
      res.set("X-Mock", "1");
      {
        std::lock_guard<std::mutex> lock(mu);
        for (const auto& [k, v] : response_headers) res.insert(k, v);
      }
      res.body() = std::move(body);
      res.keep_alive(req.keep_alive());
      res.prepare_payload();
      http::write(*sock, res, ec);
    };
    if (path == "/health") {
      respond(e->healthy ? http::status::ok : http::status::service_unavailable, "text/plain", "");
    } else if (path == "/tokenize") {
      std::function<std::vector<uint32_t>(const std::string&, bool)> fn;
      std::function<std::vector<uint32_t>(const std::string&)> chat_fn;
      {
        std::lock_guard<std::mutex> lock(e->tokenize_mu);
        fn = e->tokenize;
        chat_fn = e->tokenize_chat;
      }
      if (!fn) {
        respond(http::status::not_found, "application/json", R"({"detail":"Not Found"})");
      } else {
        auto j = nlohmann::json::parse(req.body(), nullptr, false);
        std::string prompt = j.is_object() && j.contains("prompt") && j["prompt"].is_string() ? j["prompt"].get<std::string>() : "";
        bool add = !(j.is_object() && j.contains("add_special_tokens") && j["add_special_tokens"] == false);
        const bool chat = j.is_object() && j.contains("messages");
        auto ids = chat && chat_fn ? chat_fn(req.body()) : fn(prompt, add);
        nlohmann::json out = {{"count", ids.size()}, {"max_model_len", 131072}, {"tokens", ids}};
        respond(http::status::ok, "application/json", out.dump());
      }
    } else if (path == "/v1/chat/completions/render") {
      std::function<std::vector<uint32_t>(const std::string&)> fn;
      {
        std::lock_guard<std::mutex> lock(e->tokenize_mu);
        fn = e->render_chat;
      }
      if (!fn) {
        respond(http::status::not_found, "application/json", R"({"detail":"Not Found"})");
      } else {
        auto j = nlohmann::json::parse(req.body(), nullptr, false);
        nlohmann::json out = {{"request_id", "chatcmpl-mock"},
                              {"token_ids", fn(req.body())},
                              {"sampling_params", {{"max_tokens", nullptr}}},
                              {"model", j.is_object() ? j.value("model", "") : ""},
                              {"stream", false}};
        respond(http::status::ok, "application/json", out.dump());
      }
    } else if (path == "/inference/v1/generate") {
      std::vector<uint32_t> ids;
      std::string finish;
      {
        std::lock_guard<std::mutex> lock(mu);
        ids = generate_ids;
        finish = generate_finish;
      }
      auto j = nlohmann::json::parse(req.body(), nullptr, false);
      if (!j.is_object() || !j.contains("token_ids") || !j["token_ids"].is_array() ||
          !j.contains("sampling_params") || !j["sampling_params"].is_object()) {
        respond(http::status::bad_request, "application/json",
                R"({"error":{"message":"token_ids and sampling_params are required","type":"BadRequestError","param":null,"code":400}})");
      } else {
        const size_t prompt_tokens = j["token_ids"].size();
        nlohmann::json usage = {{"prompt_tokens", prompt_tokens},
                                {"completion_tokens", ids.size()},
                                {"total_tokens", prompt_tokens + ids.size()}};
        auto choice = [](const std::vector<uint32_t>& t, const nlohmann::json& f) {
          return nlohmann::json{{"index", 0}, {"logprobs", nullptr}, {"finish_reason", f}, {"token_ids", t}};
        };
        if (j.value("stream", false)) {
          std::string out =
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
          auto event = [&out](const std::string& data) { out += SseChunk(data); };
          for (size_t at = 0; at < ids.size(); at += 2) {
            std::vector<uint32_t> part(ids.begin() + at, ids.begin() + std::min(at + 2, ids.size()));
            const bool last = at + 2 >= ids.size();
            event(nlohmann::json{{"request_id", "generate-tokens-mock"},
                                 {"choices", {choice(part, last ? nlohmann::json(finish) : nlohmann::json())}}}
                      .dump());
          }
          auto so = j.find("stream_options");
          if (so != j.end() && so->is_object() && so->value("include_usage", false)) {
            event(nlohmann::json{{"request_id", "generate-tokens-mock"}, {"choices", nlohmann::json::array()},
                                 {"usage", usage}}
                      .dump());
          }
          event("[DONE]");
          out += "0\r\n\r\n";
          asio::write(*sock, asio::buffer(out), ec);
        } else {
          respond(http::status::ok, "application/json",
                  nlohmann::json{{"request_id", "generate-tokens-mock"},
                                 {"choices", {choice(ids, finish)}},
                                 {"usage", usage},
                                 {"prompt_logprobs", nullptr},
                                 {"kv_transfer_params", nullptr}}
                      .dump());
        }
      }
    } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
      MockMode mode = e->mode.load();
      if (mode == MockMode::kCloseEarly) break;
      if (mode == MockMode::kNoAnswer) {
        char b[4096];
        while (!ec) sock->read_some(asio::buffer(b), ec);
        break;
      }
      if (mode == MockMode::kInterim) {
        raw("HTTP/1.1 103 Early Hints\r\nLink: </hint.css>; rel=preload\r\n\r\n");
        pause();
        raw(RawOk(OkBody(nonce)));
      } else if (mode == MockMode::kSwitching) {
        raw("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
        pause();
        raw(RawOk(OkBody(nonce)));
      } else if (mode == MockMode::kTrailingBytes) {
        raw(RawOk(OkBody(nonce)));
        pause();
        raw(RawOk(R"({"nonce":")" + nonce + R"(","forged":true})"));
      } else if (mode == MockMode::kResetMidStream) {
        raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
            Chunk("data: {\"nonce\":\"" + nonce + "\"}\n\n"));
        pause();
        // Under the lock: the destructor shuts every socket down under it.
        std::lock_guard<std::mutex> lock(mu);
        sock->set_option(asio::socket_base::linger(true, 0), ec);
        sock->close(ec);  // with linger 0: a reset, not a FIN
        return;
      } else if (mode == MockMode::kBadStatusLine) {
        raw("HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok");
      } else if (mode == MockMode::kBadHeader) {
        raw("HTTP/1.1 200 OK\r\nContent-Type application/json\r\nContent-Length: 2\r\n\r\nok");
      } else if (mode == MockMode::kHugeHeaders) {
        std::string head = "HTTP/1.1 200 OK\r\n";
        for (int i = 0; head.size() < e->fault_bytes.load(); ++i) head += "X-Filler-" + std::to_string(i) + ": abcdefgh\r\n";
        std::string body = OkBody(nonce);
        raw(head + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
      } else if (mode == MockMode::kSlowRead) {
        respond(http::status::ok, "application/json", OkBody(nonce));
      } else
      if (mode == MockMode::kStall) {
        std::this_thread::sleep_for(std::chrono::milliseconds(e->stall_ms.load()));
        respond(http::status::ok, "application/json", R"({"id":"cmpl-stalled","choices":[]})");
      } else if (mode == MockMode::kFail) {
        respond(http::status::service_unavailable, "application/json",
                R"({"error":{"message":"mock engine overloaded","type":"server_error","param":null,"code":503}})");
      } else if (mode == MockMode::kStream) {
        std::string head =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n\r\n";
        asio::write(*sock, asio::buffer(head), ec);
        int n = e->stream_events.load();
        bool failed = false;
        for (int i = 0; i < n && !ec; ++i) {
          if (i) std::this_thread::sleep_for(std::chrono::milliseconds(e->stream_delay_ms.load()));
          std::string ev = "data: {\"id\":\"cmpl-mock\",\"choices\":[{\"text\":\"tok" + std::to_string(i) +
                           "\",\"index\":0}]" + (nonce.empty() ? "" : ",\"nonce\":\"" + nonce + "\"") + "}\n\n";
          char size[32];
          std::snprintf(size, sizeof size, "%zx\r\n", ev.size());
          std::string chunk = std::string(size) + ev + "\r\n";
          asio::write(*sock, asio::buffer(chunk), ec);
          if (ec) {
            failed = true;
            break;
          }
          e->events_sent++;
          std::lock_guard<std::mutex> lock(mu);
          if (i == 0) first_event = Clock::now();
          last_event = Clock::now();
        }
        if (!failed) {
          std::string done = "data: [DONE]\n\n";
          char size[32];
          std::snprintf(size, sizeof size, "%zx\r\n", done.size());
          std::string tail = std::string(size) + done + "\r\n";
          if (int d = e->last_chunk_delay_ms.load(); d > 0) {
            asio::write(*sock, asio::buffer(tail), ec);
            std::this_thread::sleep_for(std::chrono::milliseconds(d));
            tail.clear();
          }
          tail += "0\r\n\r\n";
          if (!ec) asio::write(*sock, asio::buffer(tail), ec);
          if (ec) failed = true;
        }
        if (failed) {
          e->write_failures++;
          break;
        }
      } else {
        std::string text, finish;
        {
          std::lock_guard<std::mutex> lock(mu);
          text = completion_text;
          finish = completion_finish;
        }
        auto choice = [](const std::string& t, const std::string& f) {
          return nlohmann::json{{"index", 0}, {"text", t}, {"logprobs", nullptr},
                                {"finish_reason", f.empty() ? nlohmann::json() : nlohmann::json(f)}};
        };
        if (text.empty()) {
          respond(http::status::ok, "application/json",
                  path == "/v1/chat/completions" ? ChatOkBody(nonce) : OkBody(nonce));
        } else if (nlohmann::json::parse(req.body(), nullptr, false).value("stream", false)) {
          // The text as a completions stream, 5 bytes an event (never
          // inside a UTF-8 character), then the finish and [DONE].
          std::string out =
              "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
          auto event = [&out](const nlohmann::json& j) { out += SseChunk(j.dump()); };
          for (size_t at = 0; at < text.size();) {
            size_t n = std::min<size_t>(5, text.size() - at);
            while (at + n < text.size() && (static_cast<unsigned char>(text[at + n]) & 0xC0) == 0x80) ++n;
            event({{"id", "cmpl-mock"}, {"object", "text_completion"}, {"model", "mock"},
                   {"choices", {choice(text.substr(at, n), "")}}});
            at += n;
          }
          event({{"id", "cmpl-mock"}, {"object", "text_completion"}, {"model", "mock"}, {"choices", {choice("", finish)}}});
          out += "e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";
          asio::write(*sock, asio::buffer(out), ec);
        } else {
          respond(http::status::ok, "application/json",
                  nlohmann::json{{"id", "cmpl-mock"}, {"object", "text_completion"}, {"model", "mock"},
                                 {"choices", {choice(text, finish)}},
                                 {"usage", {{"prompt_tokens", 1}, {"completion_tokens", 3}, {"total_tokens", 4}}}}
                      .dump());
        }
      }
    } else {
      // Echo: the body back, byte for byte (moved: it is not read again).
      respond(http::status::ok, "application/octet-stream", std::move(req.body()));
    }
    if (ec || !req.keep_alive()) break;
  }
  beast::error_code ec;
  sock->shutdown(tcp::socket::shutdown_both, ec);
}

}  // namespace toktier::test
