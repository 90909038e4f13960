// Parsing a /v1/completions body with simdjson (on-demand, on the padded
// request buffer). Only the fields the proxy needs are read; the prompt's
// byte range in the original body is kept so the forwarded body is the
// original bytes with the prompt value replaced (no re-serialization).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace toktier::proxy {

enum class PromptKind : uint8_t { kString, kStringList, kTokens };

struct CompletionRequest {
  std::string model;
  PromptKind kind = PromptKind::kString;
  std::vector<std::string> prompts;  // unescaped text (kString: one, kStringList: each)
  size_t prompt_begin = 0;           // byte range of the prompt value in the body
  size_t prompt_end = 0;
  bool has_add_special_tokens = false;
  bool add_special_tokens = true;
  bool stream = false;
};

// An OpenAI-style request error.
struct RequestError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};

// The padding simdjson needs after the body (reserve it in the body's capacity).
size_t JsonPadding();

// Parses `body` (its capacity must exceed size() by JsonPadding(); the
// bytes beyond size() are not modified). False and *error for malformed
// JSON, wrong field types, a missing or empty prompt.
bool ParseCompletionRequest(const std::string& body, CompletionRequest* out, RequestError* error);

// {"error": {"message", "type", "param", "code"}}.
std::string ErrorJson(const RequestError& e);

// Appends "a,b,c" (no brackets) for ids[from:] with std::to_chars.
void AppendIdList(std::string& out, const uint32_t* ids, size_t n);

}  // namespace toktier::proxy
