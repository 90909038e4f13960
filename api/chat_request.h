// /v1/chat/completions through the token tier (docs/chat.md): a model's chat
// setup (its template and forwarding mode), the request's parsing and
// rendering, and the bodies sent to the engine in each mode. No HTTP here;
// http_conn.cpp drives it and upstream.cpp translates "completions" answers
// back (api/chat_response.h).
#pragma once

#include <array>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "api/chat_response.h"
#include "api/completions.h"
#include "api/json_limits.h"

namespace toktier::api {

enum class ChatForward { kText, kCompletions, kSglang, kDynamo, kVllm };

// The configuration's names, one table per enum, indexed by its value
// (config/ parses them).
inline constexpr std::array<std::string_view, 5> kChatForwardNames = {"text", "completions", "sglang", "dynamo",
                                                                      "vllm"};
inline constexpr std::array<std::string_view, 4> kToolParserNames = {"none", "hermes", "llama3_json", "deepseek_v3"};

// Immutable after load; shared by every request of the model.
struct ChatModel {
  ChatForward mode = ChatForward::kText;
  std::unique_ptr<chat::ChatTemplate> tmpl;  // null in text mode
  nlohmann::ordered_json tokenizer_config;   // bos/eos for the template inputs
  ToolCallFormat tools = ToolCallFormat::kNone;  // the model's tool_parser
  bool reasoning = false;
};

// Compiles a model's chat setup from its tokenizer_config.json text (named
// `source_name` in errors): the config must be a JSON object with a
// chat_template (a string, or the "default" of a list of named templates).
// Sets out->tokenizer_config and out->tmpl; the caller sets the mode, tools
// and reasoning.
core::Status CompileChatTemplate(std::string_view tokenizer_config_json, const std::string& source_name,
                                 ChatModel* out);

struct ChatRequest {
  nlohmann::ordered_json body;  // the client's request
  std::string model;
  bool stream = false;
  bool has_tools = false;
};

// One JSON object (whitespace only after it) nested at most `max_depth`
// deep (api/json_limits.h), "model" a string, "messages" a non-empty array,
// "stream" a boolean when present. False and *error (400).
[[nodiscard]] bool ParseChatRequest(std::string_view body, ChatRequest* out, RequestError* error,
                                    size_t max_depth = kDefaultJsonMaxDepth);

// Why a parsed request cannot take the token path in `mode` ("" = it can):
// fields whose meaning the forwarded request would lose (a response_format,
// a forced tool_choice, logprobs in completions mode). Such requests are
// relayed as they are, and counted.
std::string ChatUnsupported(ChatForward mode, const ChatRequest& req);

// The prompt: the template over messages, tools, add_generation_prompt,
// bos/eos and chat_template_kwargs (chat::BuildChatInputs), strftime_now at
// `now_unix_seconds`.
[[nodiscard]] chat::Status RenderChatPrompt(const ChatModel& model, const ChatRequest& req, int64_t now_unix_seconds,
                                            std::string* prompt);
// The same, moving the message texts out of req->body (its "messages" are
// left with empty strings): for a caller that has already taken from the
// body all it forwards (PlanChatForward), so a 1 MB conversation is not
// copied on its way to the renderer. `leftovers`, when set, receives the
// emptied trees (the request's messages, now null in the body, the
// template's values and inputs) instead of freeing them: a caller on the
// request's critical path frees them after it has handed the prompt on.
[[nodiscard]] chat::Status RenderChatPromptTakingMessages(const ChatModel& model, ChatRequest* req,
                                                          int64_t now_unix_seconds, std::string* prompt,
                                                          std::shared_ptr<void>* leftovers = nullptr);

// The body for the engine is head + "1,2,3" (the prompt's IDs) + tail, sent
// to `target`.
struct ChatForwardPlan {
  std::string target;
  std::string head;
  std::string tail;
};
ChatForwardPlan PlanChatForward(ChatForward mode, const ChatRequest& req);

// The conversation the compatibility guard renders and has the engine render
// (vLLM: POST /tokenize with "messages"): a system prompt, a user turn with
// non-ASCII text, an assistant answer and a second user turn, as a chat
// request body for `model`.
nlohmann::ordered_json ChatGuardCanary(const std::string& model);

// How the proxy turns the IDs of a "vllm" answer back into text, from the
// request's stop, include_stop_str_in_output and skip_special_tokens.
TokenTextOptions ChatDecodeOptions(const ChatRequest& req);

}  // namespace toktier::api
