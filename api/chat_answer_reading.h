// Private to api/: reading an engine's chat-completion JSON, shared by the
// translators that start from it (messages_response.cpp,
// responses_response.cpp). Engine answers are untrusted: parsed under the
// nesting bound, every field type checked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/json_limits.h"

namespace toktier::api::chat_answer {

using Json = nlohmann::ordered_json;

inline std::string Dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The same nesting bound as client bodies (a too-deep answer is discarded,
// i.e. malformed).
inline Json ParseJson(std::string_view text) {
  Json j;
  (void)ParseBoundedJson(text, kDefaultJsonMaxDepth, &j);
  return j;
}

inline std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpaces = " \t\r\n";
  size_t first = s.find_first_not_of(kSpaces);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpaces) + 1 - first);
}

inline bool SetError(std::string* error, std::string message) {
  *error = std::move(message);
  return false;
}

// `key` of `object` as a string: absent or null leaves *out empty.
inline bool ReadString(const Json& object, const char* key, std::optional<std::string>* out, std::string* error) {
  out->reset();
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_string()) return SetError(error, std::string("the engine's ") + key + " is not a string");
  *out = it->get<std::string>();
  return true;
}

// The reasoning text: "reasoning_content" (vLLM before 0.10, DeepSeek,
// llama.cpp) or "reasoning" (vLLM since); one of them, never both added up,
// as some servers send the same text under both names.
inline bool ReadReasoning(const Json& object, std::optional<std::string>* out, std::string* error) {
  if (!ReadString(object, "reasoning_content", out, error)) return false;
  if (*out) return true;
  return ReadString(object, "reasoning", out, error);
}

inline bool ReadCount(const Json& object, const char* key, std::optional<uint64_t>* out, std::string* error) {
  out->reset();
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_number_unsigned()) return SetError(error, std::string("the engine's usage.") + key + " is not a count");
  *out = it->get<uint64_t>();
  return true;
}

}  // namespace toktier::api::chat_answer
