// /v1/responses (OpenAI Responses, what the Codex CLI speaks) mapped onto
// the chat completions path, by vLLM's conversion rules
// (vllm/entrypoints/openai/responses/utils.py construct_input_messages,
// construct_tool_dicts; docs/agents.md). Pure.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "api/completions.h"
#include "api/json_limits.h"

namespace toktier::api {

// A namespace's function tool as the client names it; the prompt names it
// NamespacedToolName(ns, name) (vLLM's flattening).
struct NamespacedTool {
  std::string ns;
  std::string name;
};
// The prompt's name of each namespace tool -> the client's. A name a plain
// function tool also has is left out: that tool is the one it means.
using NamespacedTools = std::unordered_map<std::string, NamespacedTool>;

struct ResponsesRequest {
  nlohmann::ordered_json chat;  // the chat completions request
  std::string model;
  bool stream = false;
  std::string session_id;          // prompt_cache_key ("" when absent)
  size_t hosted_tools_dropped = 0;  // web_search, custom, ... left out of the prompt
  NamespacedTools namespaced_tools;  // how the answer names a call of one back
  // Request fields the response object echoes (instructions, tools,
  // tool_choice, parallel_tool_calls, temperature, top_p,
  // max_output_tokens, reasoning, store, metadata, text, truncation,
  // prompt_cache_key, previous_response_id).
  nlohmann::ordered_json echo = nlohmann::ordered_json::object();
};

// The function name a namespace's tool gets in the prompt (vLLM's
// flattening): "<namespace>__<name>".
std::string NamespacedToolName(const std::string& ns, const std::string& name);

// A Responses body -> *out. False and *error (400 naming the field) for a
// body the API would refuse or that the token path cannot carry:
// previous_response_id (toktier keeps no responses: send the whole input,
// as Codex does with store false), encrypted reasoning, images and files,
// a forced tool choice or output format.
// The body's texts are moved into the chat request; `leftovers`, when set,
// receives the emptied parse tree for the caller to free off its critical
// path.
[[nodiscard]] bool ParseResponsesRequest(std::string_view body, ResponsesRequest* out, RequestError* error,
                                         size_t max_depth = kDefaultJsonMaxDepth,
                                         std::shared_ptr<void>* leftovers = nullptr);

}  // namespace toktier::api
