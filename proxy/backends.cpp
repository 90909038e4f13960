#include "proxy/backends.h"

#include <poll.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "http/http.h"
#include "api/api.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxIdlePerBackend = 64;

// Blocking request for health checks and the guard, on the checker's own
// io_context. False on I/O errors; *local when the error was this process
// being out of descriptors or buffers (says nothing about the backend).
bool SyncRequest(asio::io_context& ioc, const Backend& b, http::verb verb, const std::string& target,
                 const std::string& body, int timeout_ms, size_t header_limit, int* status, std::string* out,
                 bool* local) {
  *local = false;
  beast::error_code ec;
  tcp::endpoint ep(asio::ip::make_address(b.host, ec), b.port);
  if (ec) return false;
  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  bool done = false;
  stream.async_connect(ep, [&](beast::error_code e) {
    ec = e;
    done = true;
  });
  ioc.restart();
  ioc.run();
  if (ec || !done) {
    *local = http1::IsResourceExhausted(ec);
    return false;
  }
  http::request<http::string_body> req{verb, target, 11};
  req.set(http::field::host, b.host_header);
  req.set(http::field::user_agent, "toktier");
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(8 << 20);
  ioc.restart();
  stream.expires_after(std::chrono::milliseconds(timeout_ms));
  http::async_write(stream, req, [&](beast::error_code e, size_t) {
    ec = e;
    if (ec) return;
    // Every header byte counts against the limit (a hostile engine could
    // otherwise send header fields without end).
    http1::AsyncReadHeaderWithin(stream, buf, parser, header_limit, [&](beast::error_code e2, size_t) {
      ec = e2;
      if (ec || parser.is_done()) return;
      http::async_read(stream, buf, parser, [&](beast::error_code e3, size_t) { ec = e3; });
    });
  });
  ioc.run();
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (ec) return false;
  *status = static_cast<int>(parser.get().result_int());
  *out = std::move(parser.get().body());
  return true;
}

const char* kCanaries[] = {
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "def pipeline(x):\n    return [i ** 2 for i in range(10)]  # squares\n\n\n",
    "  leading spaces, tabs\tand\r\nCRLF; unicode: caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
    "\xf0\x9f\x98\x80 12345678 3.14159",
};

}  // namespace

bool ParseBackendUrl(std::string_view url, std::string* host, uint16_t* port) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) return false;
  url.remove_prefix(kScheme.size());
  while (!url.empty() && url.back() == '/') url.remove_suffix(1);
  if (url.find('/') != std::string_view::npos) return false;
  size_t colon = url.rfind(':');
  std::string_view h = url, p = "80";
  if (colon != std::string_view::npos && url.find(']') == std::string_view::npos) {
    h = url.substr(0, colon);
    p = url.substr(colon + 1);
  }
  if (h.empty() || p.empty()) return false;
  unsigned v = 0;
  for (char c : p) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
    if (v > 65535) return false;
  }
  if (v == 0) return false;
  *host = std::string(h);
  *port = static_cast<uint16_t>(v);
  return true;
}

int Backend::TakeIdle(uint64_t tenant) {
  for (;;) {
    int fd = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = idle_.size(); i-- > 0;) {  // the most recent of this tenant
        if (idle_[i].tenant != tenant) continue;
        fd = idle_[i].fd;
        idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
    if (fd < 0) return -1;
    // An idle connection with anything to read (bytes the engine sent after
    // its response, its FIN, an error) is out of step or closing: discard it.
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) == 0) return fd;
    ::close(fd);
  }
}

void Backend::PutIdle(int fd, uint64_t tenant) {
  int evicted = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() >= kMaxIdlePerBackend) {
      evicted = idle_.front().fd;
      idle_.erase(idle_.begin());
    }
    idle_.push_back({fd, tenant});
  }
  if (evicted >= 0) ::close(evicted);
}

Backend::~Backend() {
  for (const Idle& i : idle_) ::close(i.fd);
}

struct Backends::CheckerIo {
  asio::io_context ioc{1};
};

Backends::Backends(const Config& config, metrics::Metrics* metrics)
    : config_(config), metrics_(metrics), checker_io_(std::make_unique<CheckerIo>()) {}

Backends::~Backends() { Stop(); }

core::Status Backends::Init(TokenizeService* service) {
  service_ = service;
  core::Status error;
  auto get = [&](const std::string& url) -> Backend* {
    for (auto& b : all_) {
      if (b->url == url) return b.get();
    }
    auto b = std::make_unique<Backend>();
    b->url = url;
    std::string host;
    uint16_t port = 0;
    if (!ParseBackendUrl(url, &host, &port)) {
      error = core::Status::Error("backend URL must be http://host:port: " + url);
      return nullptr;
    }
    beast::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) {
      asio::io_context ioc;
      tcp::resolver r(ioc);
      auto res = r.resolve(host, std::to_string(port), ec);
      if (ec || res.empty()) {
        error = core::Status::Error(core::StatusCode::kIoError, "cannot resolve backend " + url + ": " + ec.message());
        return nullptr;
      }
      addr = res.begin()->endpoint().address();
    }
    b->host = addr.to_string();
    b->v6 = addr.is_v6();
    b->port = port;
    b->host_header = host + ":" + std::to_string(port);
    b->health_gauge = metrics_->gauge(metrics::Id::kBackendHealthy, {url});
    b->health_gauge.Set(1);
    all_.push_back(std::move(b));
    return all_.back().get();
  };
  for (const auto& u : config_.backends) {
    Backend* b = get(u);
    if (!b) return error;
    default_pool_.push_back(b);
  }
  for (const auto& m : config_.models) {
    if (m.backends.empty()) continue;
    std::vector<Backend*> pool;
    for (const auto& u : m.backends) {
      Backend* b = get(u);
      if (!b) return error;
      pool.push_back(b);
    }
    model_pools_[m.name] = pool;
    for (const auto& a : m.aliases) model_pools_[a] = pool;
  }
  if (default_pool_.empty() && model_pools_.empty()) return core::Status::Error("no backends configured");
  return core::Status::Ok();
}

void Backends::Start() {
  CheckNow();
  thread_ = std::thread([this] { Loop(); });
}

void Backends::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Backends::Loop() {
  auto next_guard = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.guard_interval_ms);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(std::max(10, config_.health_interval_ms)));
    if (stop_) break;
    lock.unlock();
    HealthRound();
    if (std::chrono::steady_clock::now() >= next_guard) {
      GuardRound();
      next_guard = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.guard_interval_ms);
    }
    lock.lock();
  }
}

void Backends::CheckNow() {
  HealthRound();
  GuardRound();
}

// The checker thread's boundary: nothing may end the process from here (an
// allocation failure, a Beast or asio error that throws). The round is
// skipped, logged and counted; the next one runs as usual.
void Backends::HealthRound() {
  try {
    HealthRoundOrThrow();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toktier: health check round failed: %s\n", e.what());
    metrics_->counter(metrics::Id::kThreadExceptions, {"health"}).Inc();
  } catch (...) {
    std::fprintf(stderr, "toktier: health check round failed\n");
    metrics_->counter(metrics::Id::kThreadExceptions, {"health"}).Inc();
  }
}

void Backends::GuardRound() {
  try {
    GuardRoundOrThrow();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toktier: tokenizer guard round failed: %s\n", e.what());
    metrics_->counter(metrics::Id::kThreadExceptions, {"guard"}).Inc();
  } catch (...) {
    std::fprintf(stderr, "toktier: tokenizer guard round failed\n");
    metrics_->counter(metrics::Id::kThreadExceptions, {"guard"}).Inc();
  }
}

void Backends::HealthRoundOrThrow() {
  std::lock_guard<std::mutex> lock(round_mu_);
  for (auto& b : all_) {
    int status = 0;
    std::string body;
    bool local = false;
    bool ok = SyncRequest(checker_io_->ioc, *b, http::verb::get, config_.health_path, "", 2000,
                          config_.max_header_bytes, &status, &body, &local) &&
              status == 200;
    if (local) {
      // Out of descriptors here says nothing about the backend: keep its state.
      metrics_->counter(metrics::Id::kResourceExhausted, {"health_check"}).Inc();
      continue;
    }
    if (ok != b->healthy.load()) {
      std::fprintf(stderr, "toktier: backend %s is %s\n", b->url.c_str(), ok ? "healthy" : "UNHEALTHY");
    }
    b->healthy = ok;
    b->health_gauge.Set(ok ? 1 : 0);
  }
}

namespace {

enum class EngineIds { kOk, kNoVerdict, kUnavailable };

// Where an engine gives the IDs of a prompt: vLLM's POST /tokenize answers
// them in "tokens" (a prompt, or "messages" it renders); its render endpoint
// in "token_ids" (the GenerateRequest of a chat request).
struct IdsEndpoint {
  const char* target;
  const char* ids_key;
};
constexpr IdsEndpoint kTokenizeEndpoint{"/tokenize", "tokens"};
constexpr IdsEndpoint kChatRenderEndpoint{"/v1/chat/completions/render", "token_ids"};

// The IDs of a backend's answer to `request` (JSON) at `endpoint`: kNoVerdict when
// this process could not send it (out of descriptors), kUnavailable when the
// backend has no such endpoint, rejects the request or answers something
// else (an empty list included: an engine that ignores "messages" tokenizes
// nothing, which is no verdict on its rendering).
EngineIds FetchEngineIds(asio::io_context& ioc, Backend& b, IdsEndpoint endpoint, const std::string& request,
                         size_t max_header_bytes, std::vector<uint32_t>* ids) {
  int status = 0;
  std::string body;
  bool local = false;
  if (!SyncRequest(ioc, b, http::verb::post, endpoint.target, request, 5000, max_header_bytes, &status, &body,
                   &local) ||
      status != 200) {
    return local ? EngineIds::kNoVerdict : EngineIds::kUnavailable;
  }
  nlohmann::json j;
  if (ParseBoundedJson(body, kDefaultJsonMaxDepth, &j) != JsonParseOutcome::kOk || !j.is_object() ||
      !j.contains(endpoint.ids_key) || !j[endpoint.ids_key].is_array() || j[endpoint.ids_key].empty()) {
    return EngineIds::kUnavailable;
  }
  ids->clear();
  for (const auto& x : j[endpoint.ids_key]) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > UINT32_MAX) return EngineIds::kUnavailable;
    ids->push_back(x.get<uint32_t>());
  }
  return EngineIds::kOk;
}

int64_t UnixSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void Backends::GuardRoundOrThrow() {
  if (!config_.guard_enabled || !service_) return;
  std::lock_guard<std::mutex> lock(round_mu_);
  std::vector<std::string_view> canaries(std::begin(kCanaries), std::end(kCanaries));
  canaries.insert(canaries.end(), config_.guard_extra_canaries.begin(), config_.guard_extra_canaries.end());
  for (ModelRuntime* m : service_->Models()) {
    if (m->config.forward_mode != ForwardMode::kIds) continue;
    auto it = model_pools_.find(m->config.name);
    const auto& pool = it == model_pools_.end() ? default_pool_ : it->second;
    // A difference switches the model to text, for completions and chat.
    auto verdict = [&](Backend* b, bool same, const char* match, const char* mismatch, const char* what) {
      metrics_->counter(metrics::Id::kGuardChecks, {m->config.name, same ? match : mismatch}).Inc();
      if (same) return;
      if (!m->guard_text_mode.exchange(true)) {
        std::fprintf(stderr,
                     "toktier: GUARD: backend %s %s differently from %s for model %s; forwarding text for this "
                     "model from now on\n",
                     b->url.c_str(), what, m->config.tokenizer.c_str(), m->config.name.c_str());
      }
      metrics_->gauge(metrics::Id::kGuardTextMode, {m->config.name}).Set(1);
    };
    // The chat template too, where the model renders chat itself: the
    // engine's own rendering of a canary conversation must give the IDs ours
    // does. vLLM renders at /v1/chat/completions/render (the request as
    // /v1/chat/completions takes it) and, older or other engines, at
    // /tokenize with "messages": the render endpoint is asked first.
    // Rendered once per round.
    std::string chat_request;
    std::vector<uint32_t> chat_ids;
    if (m->chat && m->chat->mode != ChatForward::kText) {
      ChatRequest chat;
      chat.body = ChatGuardCanary(m->config.name);
      chat.model = m->config.name;
      std::string prompt;
      if (RenderChatPrompt(*m->chat, chat, UnixSeconds(), &prompt).ok()) {
        m->tokenizer->Encode(prompt, false, chat_ids);
        chat.body["add_generation_prompt"] = true;
        chat.body["add_special_tokens"] = false;
        chat_request = chat.body.dump();
      }
    }
    for (Backend* b : pool) {
      if (!b->healthy) continue;
      std::vector<uint32_t> theirs, ours;
      bool compared_all = true;
      for (std::string_view canary : canaries) {
        nlohmann::json req = {{"model", m->config.name}, {"prompt", canary}, {"add_special_tokens", true}};
        EngineIds got =
            FetchEngineIds(checker_io_->ioc, *b, kTokenizeEndpoint, req.dump(), config_.max_header_bytes, &theirs);
        if (got != EngineIds::kOk) {
          if (got == EngineIds::kNoVerdict) {
            metrics_->counter(metrics::Id::kResourceExhausted, {"health_check"}).Inc();
          } else {
            metrics_->counter(metrics::Id::kGuardChecks, {m->config.name, "unavailable"}).Inc();
          }
          compared_all = false;
          break;  // no /tokenize (or not for this name): nothing to compare
        }
        m->tokenizer->Encode(canary, true, ours);
        verdict(b, ours == theirs, "match", "mismatch", "tokenizes");
        if (ours != theirs) {
          compared_all = false;
          break;
        }
      }
      if (!compared_all || chat_request.empty() || m->guard_text_mode) continue;
      EngineIds got =
          FetchEngineIds(checker_io_->ioc, *b, kChatRenderEndpoint, chat_request, config_.max_header_bytes, &theirs);
      if (got == EngineIds::kUnavailable) {
        got = FetchEngineIds(checker_io_->ioc, *b, kTokenizeEndpoint, chat_request, config_.max_header_bytes, &theirs);
      }
      if (got == EngineIds::kNoVerdict) {
        metrics_->counter(metrics::Id::kResourceExhausted, {"health_check"}).Inc();
        continue;
      }
      if (got == EngineIds::kUnavailable) {
        metrics_->counter(metrics::Id::kGuardChecks, {m->config.name, "chat_unavailable"}).Inc();
        continue;
      }
      verdict(b, chat_ids == theirs, "chat_match", "chat_mismatch", "renders the chat template");
    }
  }
}

std::vector<Backend*> Backends::Rank(std::string_view model, std::string_view session_key) const {
  auto it = model_pools_.find(std::string(model));
  const auto& pool = it == model_pools_.end() ? default_pool_ : it->second;
  std::vector<std::pair<uint64_t, Backend*>> scored;
  scored.reserve(pool.size());
  for (Backend* b : pool) {
    uint64_t h = XXH3_64bits_withSeed(session_key.data(), session_key.size(), XXH3_64bits(b->url.data(), b->url.size()));
    // Healthy first: the top bit orders them.
    if (b->healthy.load(std::memory_order_relaxed)) h |= uint64_t{1} << 63; else h &= ~(uint64_t{1} << 63);
    scored.emplace_back(h, b);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Backend*> out;
  for (auto& s : scored) out.push_back(s.second);
  return out;
}

bool Backends::AnyHealthy() const {
  for (const auto& b : all_) {
    if (b->healthy) return true;
  }
  return false;
}

}  // namespace toktier::proxy
