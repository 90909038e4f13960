// What happened to a request, as typed values with one name table each: the
// endpoint it was counted under, how it ended (toktier_requests_total), what
// its engine attempt gave (toktier_backend_requests_total), and the error
// the client got (ErrorReply). The names are the metric labels and log
// words of docs/metrics.md; only these tables spell them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/api.h"

namespace toktier::proxy {

enum class Endpoint : uint8_t {
  kLocal,        // /healthz, /readyz, /metrics, unknown URLs, unreadable requests
  kPassthrough,  // relayed as the client sent it
  kCompletions,  // /v1/completions on the token path
  kChat,         // /v1/chat/completions on the token path
  kMessages,     // /v1/messages and /v1/messages/count_tokens on the token path
  kResponses,    // /v1/responses on the token path
  kRender,       // /v1/chat/completions/render, /v1/messages/render, /v1/responses/render: answered here
};
std::string_view EndpointName(Endpoint endpoint);

enum class Outcome : uint8_t {
  kOk,                  // answered (a relayed engine answer below 400 included)
  kClientError,         // a 4xx of toktier's own
  kClientClosed,        // the client left before the answer was complete
  kClientTimeout,       // the request did not arrive within read_timeout_ms
  kClientWriteTimeout,  // the client stopped reading the answer (client_write_timeout_ms)
  kBadGateway,          // 502: the engine unreachable, failed or answered malformed
  kGatewayTimeout,      // 504: the engine did not answer in time
  kBackendError,        // the engine's own answer had a status of 400 or more
  kBackendTimeout,      // the engine stalled after its answer began: cut off
  kBackendTruncated,    // the engine's answer broke off or was malformed after it began: cut off
  kOverloaded,          // 503: a mapped request (/v1/messages, /v1/responses) met a full tokenizer queue
};
std::string_view OutcomeName(Outcome outcome);

// One engine attempt's result.
enum class BackendResult : uint8_t {
  kOk,            // a response header came back
  kConnectError,  // no backend could be connected
  kFailover,      // connecting failed; the next backend is tried
  kIoError,       // the connection failed while writing or reading
  kTimeout,       // no answer in backend_timeout_ms
  kBadResponse,   // malformed, or not translatable to the client's API
  kCancelled,     // the client left or stopped reading: the engine connection was closed
};
std::string_view BackendResultName(BackendResult result);

// Whose wire format a request's errors take: OpenAI's
// {"error": {"message", "type", "param", "code"}} or Anthropic's
// {"type": "error", "error": {"type", "message"}}.
enum class ClientApi : uint8_t { kOpenAI, kAnthropic };

// The error body for `api`.
std::string ErrorBody(ClientApi api, const api::RequestError& error);

// An error answer of toktier's own: the client's error object (status,
// message, type, param, code), how the request is counted, and whether the
// connection is closed after it (the request's framing cannot be trusted).
struct ErrorReply {
  api::RequestError error;
  Outcome outcome = Outcome::kClientError;
  bool close = false;

  // A 4xx about the client's request.
  static ErrorReply Client(int status, std::string message, std::string param = "", std::string code = "");
  // The same, and the connection is closed after it.
  static ErrorReply ClientClose(int status, std::string message, std::string code = "");
  // A 503: the proxy cannot take the request now (a mapped request cannot
  // be relayed as text the way a chat request is on overload).
  static ErrorReply Overloaded(std::string message);
  // A 502 about the engine.
  static ErrorReply BadGateway(std::string message);
  // A 504: the engine did not answer in time.
  static ErrorReply GatewayTimeout(std::string message);
};

}  // namespace toktier::proxy
