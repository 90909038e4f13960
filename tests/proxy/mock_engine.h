// A mock OpenAI-compatible engine for tests and the load generator: a real
// HTTP/1.1 server on 127.0.0.1 (one thread per connection, blocking I/O)
// that records what it receives and can answer, stream SSE with delays,
// stall, fail with 5xx, close early, and serve vLLM's /tokenize. The
// misbehaviour modes (issue 9) break HTTP itself: interim responses, bytes
// after the body, resets, malformed or huge headers, silence, slow reads.
// An `X-Nonce` request header is echoed in every answer (`"nonce":"..."`),
// so tests can tell whose response a client got.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace toktier::test {

struct MockRequest {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

enum class MockMode {
  kOk, kStream, kStall, kFail, kCloseEarly,
  // Misbehaviour (fault injection); fault_delay_ms and fault_bytes tune them.
  kInterim,         // 103 Early Hints, fault_delay_ms later the final response
  kSwitching,       // 101 Switching Protocols (never asked for), then junk
  kTrailingBytes,   // the response, fault_delay_ms later a forged second response
  kResetMidStream,  // SSE header and one event, fault_delay_ms later a TCP reset
  kBadStatusLine,   // "HTTP/1.1 2x0 OK"
  kBadHeader,       // a header line without a colon
  kHugeHeaders,     // fault_bytes of small header fields
  kNoAnswer,        // reads the request, never answers (until the peer closes)
  kSlowRead,        // reads the request 4 KiB per fault_delay_ms, then answers
};

class MockEngine {
 public:
  // port 0: ephemeral.
  explicit MockEngine(uint16_t port = 0, bool record = true);
  ~MockEngine();
  MockEngine(const MockEngine&) = delete;
  MockEngine& operator=(const MockEngine&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Behaviour of /v1/completions (and other /v1/ POSTs except echo paths).
  std::atomic<MockMode> mode{MockMode::kOk};
  std::atomic<int> stream_events{5};
  std::atomic<int> stream_delay_ms{50};
  std::atomic<int> stall_ms{2000};
  std::atomic<bool> healthy{true};
  std::atomic<int> fault_delay_ms{50};
  std::atomic<size_t> fault_bytes{256 * 1024};
  // kStream: > 0 writes the last chunk ("0\r\n\r\n") on its own this much
  // after the [DONE] event (as Node's http server does), not in one write.
  std::atomic<int> last_chunk_delay_ms{0};
  // Extra header fields on every response (e.g. hop-by-hop ones).
  void SetResponseHeaders(std::vector<std::pair<std::string, std::string>> headers);
  // kOk: answer with a completions body of this text and finish_reason
  // ("" = the fixed body whose text is "ok").
  void SetCompletionText(std::string text, std::string finish_reason = "stop");
  // vLLM's POST /inference/v1/generate (tokens in, tokens out): answers
  // these IDs, as one body or (stream) two IDs an event, the finish_reason
  // on the last, a usage event when stream_options.include_usage, [DONE].
  // Default: no IDs, finish_reason "length".
  void SetGenerateIds(std::vector<uint32_t> ids, std::string finish_reason = "stop");
  // /tokenize: nullptr -> 404 (not offered).
  std::function<std::vector<uint32_t>(const std::string& prompt, bool add_special)> tokenize;
  // /tokenize with "messages" (vLLM renders the chat template): the whole
  // request JSON in, the IDs out. nullptr: "messages" is ignored (the prompt
  // is empty), as an engine without chat tokenization does.
  std::function<std::vector<uint32_t>(const std::string& request_json)> tokenize_chat;
  // vLLM's POST /v1/chat/completions/render: the request JSON in, the
  // rendered prompt's IDs out (answered as its GenerateRequest). nullptr: 404.
  std::function<std::vector<uint32_t>(const std::string& request_json)> render_chat;
  std::mutex tokenize_mu;

  // Observations (only while recording; the load generator records only
  // while it checks the IDs, then measures without the copies).
  void set_record(bool on) { record_ = on; }
  std::vector<MockRequest> Requests();
  void ClearRequests();
  std::atomic<int> events_sent{0};
  std::atomic<int> write_failures{0};
  // Requests other than /health: the proxy's health checker probes on a
  // timer, so counting its probes made "the engine saw the request" racy.
  std::atomic<uint64_t> requests_seen{0};
  // Time the last SSE event of the latest stream was written.
  std::chrono::steady_clock::time_point last_event_time() const;
  std::chrono::steady_clock::time_point first_event_time() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::atomic<bool> record_;
  friend struct Impl;
};

}  // namespace toktier::test
