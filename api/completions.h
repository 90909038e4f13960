// Parsing a /v1/completions body with simdjson (on-demand, on the padded
// request buffer). Only the fields the proxy needs are read; the prompt's
// byte range in the original body is kept so the forwarded body is the
// original bytes with the prompt value replaced (no re-serialization).
// Prompt strings are not unescaped here (that is O(prompt) on the I/O
// thread): their raw byte ranges go to the worker, which unescapes only what
// changed since the session's previous request (api/json_string.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/json_limits.h"

namespace toktier::api {

enum class PromptKind : uint8_t { kString, kStringList, kTokens };

struct CompletionRequest {
  std::string model;
  PromptKind kind = PromptKind::kString;
  // Raw (still escaped) contents of the prompt strings, between the quotes,
  // as byte ranges of the body (kString: one, kStringList: each). The body's
  // UTF-8 was validated; escapes are checked when they are unescaped.
  struct RawRange {
    size_t begin = 0;
    size_t end = 0;
  };
  std::vector<RawRange> prompts;
  size_t prompt_begin = 0;           // byte range of the prompt value in the body
  size_t prompt_end = 0;
  bool has_add_special_tokens = false;
  bool add_special_tokens = true;
  bool stream = false;
};

// The "type" of an OpenAI error object.
enum class ErrorType : uint8_t {
  kInvalidRequest,  // "invalid_request_error": the client's request (4xx)
  kServer,          // "server_error": the engine failed or could not be reached (502)
  kTimeout,         // "timeout": the engine did not answer in time (504)
};
std::string_view ErrorTypeName(ErrorType type);

// An OpenAI-style request error.
struct RequestError {
  int status = 400;
  std::string message;
  ErrorType type = ErrorType::kInvalidRequest;
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// The padding simdjson needs after the body (reserve it in the body's capacity).
size_t JsonPadding();

// The raw contents of prompt string i.
inline std::string_view RawPrompt(std::string_view body, const CompletionRequest& r, size_t i) {
  return body.substr(r.prompts[i].begin, r.prompts[i].end - r.prompts[i].begin);
}

// Parses `body` (its capacity must exceed size() by JsonPadding(); the
// bytes beyond size() are not modified). False and *error for malformed
// JSON (including anything but whitespace after the one top-level value),
// nesting deeper than `max_depth` (api/json_limits.h; the prompt's bytes
// are not scanned again), wrong field types, a missing or empty prompt.
bool ParseCompletionRequest(const std::string& body, CompletionRequest* out, RequestError* error,
                            size_t max_depth = kDefaultJsonMaxDepth);

// The top-level "model" string of a JSON object body ("" when the body is
// not such an object): routes passthrough requests to the model's pool.
// Same padding contract as ParseCompletionRequest.
std::string ModelOfJsonBody(const std::string& body);

// {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const RequestError& e);

// Appends "a,b,c" (no brackets) for ids[from:] with std::to_chars.
void AppendIdList(std::string& out, const uint32_t* ids, size_t n);

}  // namespace toktier::api
