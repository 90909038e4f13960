// The conversation a chat template renders, built from a chat request the way
// vLLM builds it (its parse_chat_messages for a text-only model and the
// tools' model_dump()), so the prompt's IDs are the ones vLLM's own
// rendering of the same request gives (docs/chat.md, "what the template
// sees"). Pure; bounded by the request's own size.
#pragma once

#include <nlohmann/json.hpp>

#include "api/completions.h"
#include "chat/chat_template.h"

namespace toktier::api {

// messages -> conversation:
//  - content: a string is one text part; null is no parts; a list's "text"
//    parts are joined by "\n" for a kString template, or kept as
//    {"type": "text", "text"} parts for a kOpenAI one (and then a tool
//    message's all-text list is joined again). Any other part (images,
//    audio, files) is a 400: the token path carries text only.
//  - each message becomes {role, content}, then for an assistant its
//    tool_calls (arguments parsed from their JSON string into a value; {}
//    when they are not JSON; an empty list dropped) and its "reasoning" (as
//    "reasoning" and "reasoning_content"); for a tool message its
//    tool_call_id; a string "name"; a developer message's "tools" (null
//    when absent).
// False and *error (400) for a message or part of the wrong shape.
[[nodiscard]] bool BuildConversation(const nlohmann::ordered_json& messages, chat::ContentFormat format,
                                     nlohmann::ordered_json* conversation, RequestError* error);
// The same, moving the texts out of `messages` instead of copying them.
[[nodiscard]] bool BuildConversation(nlohmann::ordered_json&& messages, chat::ContentFormat format,
                                     nlohmann::ordered_json* conversation, RequestError* error);

// tools -> the dicts vLLM passes to the template: {"type", "function":
// {"name", "description" (null when absent), "parameters" (null when
// absent), other fields as given}} and a tool's other fields after them.
[[nodiscard]] bool BuildToolDicts(const nlohmann::ordered_json& tools, nlohmann::ordered_json* dicts,
                                  RequestError* error);

// A request's reasoning effort (chat's `reasoning_effort`, Messages'
// `output_config.effort`) into the template's kwargs, as vLLM merges it:
// `reasoning_effort` set over the request's own, and `enable_thinking`
// (false for "none", else true) unless the kwargs already name it. "auto"
// sets nothing.
void ApplyReasoningEffort(const std::string& effort, nlohmann::ordered_json* kwargs);

}  // namespace toktier::api
