// /v1/messages (Anthropic Messages) and /v1/messages/count_tokens mapped
// onto the chat completions path, by vLLM's conversion rules
// (vllm/entrypoints/anthropic/serving.py, docs/agents.md): the body becomes
// the chat completions request vLLM would build from it, which then renders
// and tokenizes like any chat request (api/chat_conversation.h). Pure.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/completions.h"
#include "api/json_limits.h"

namespace toktier::api {

struct MessagesOptions {
  // Claude Code's first system block, "x-anthropic-billing-header: ...",
  // can carry a per-request hash that would change every prompt's first
  // tokens; vLLM drops it, and so does the mapping unless this is false.
  bool drop_billing_header = true;
};

struct MessagesRequest {
  nlohmann::ordered_json chat;  // the chat completions request
  std::string model;
  bool stream = false;
  std::vector<std::string> stop_sequences;
  // metadata.user_id's "session_id" when user_id is a JSON object text
  // (Claude Code's shape); "" otherwise.
  std::string session_id;
};

// A Messages body (count_tokens: the count_tokens body, where max_tokens is
// not required) -> *out. False and *error (400, the message says which
// field) for a body Anthropic's API would refuse or that carries what the
// token path cannot (images, documents, a forced tool choice). The body's
// texts are moved into the chat request; `leftovers`, when set, receives
// the emptied parse tree for the caller to free off its critical path.
[[nodiscard]] bool ParseMessagesRequest(std::string_view body, const MessagesOptions& options, bool count_tokens,
                                        MessagesRequest* out, RequestError* error,
                                        size_t max_depth = kDefaultJsonMaxDepth,
                                        std::shared_ptr<void>* leftovers = nullptr);

// Python's json.dumps(value) with its defaults (", " and ": " separators,
// every non-ASCII character as \uXXXX): how vLLM writes a tool_use block's
// input as the tool call's arguments string.
std::string PythonJsonDumps(const nlohmann::ordered_json& value);

// {"input_tokens": n}
std::string CountTokensJson(size_t input_tokens);

}  // namespace toktier::api
