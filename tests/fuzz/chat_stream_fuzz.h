// Shared by the chat translation fuzz targets (fuzz_chat_response,
// fuzz_generate_response): a translator fed in pieces, and the check of what
// it writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "api/api.h"

namespace toktier::fuzz {

// The options both targets draw from the knob byte: the tool-call format
// (bits 0-1) and reasoning (bit 2); the callers set what else their bits mean.
inline api::ChatTranslateOptions FuzzTranslateOptions(uint8_t knobs) {
  api::ChatTranslateOptions o;
  o.id = "chatcmpl-fuzz";
  o.created = 1;
  o.model = "m";
  o.tools = static_cast<api::ToolCallFormat>(knobs & 3);
  o.reasoning = knobs & 4;
  return o;
}

// Feeds `body` to a fresh translator `step` bytes at a time, then finishes.
inline bool TranslateStream(const api::ChatTranslateOptions& o, std::string_view body, size_t step,
                            std::string* out) {
  api::ChatStreamTranslator tr(o);
  for (size_t at = 0; at < body.size(); at += step) {
    if (!tr.Feed(body.substr(at, step), out)) return false;
  }
  return tr.Finish(out);
}

// Checks that `out` is "data: " events ending in a blank line, each a JSON
// object or [DONE]; returns the content and reasoning deltas concatenated.
inline std::string CheckChatEvents(const std::string& out, const char* target) {
  std::string text;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find("\n\n", pos);
    Check(end != std::string::npos, target, "an event ends in a blank line");
    std::string_view ev(out.data() + pos, end - pos);
    Check(ev.substr(0, 6) == "data: ", target, "an event is a data line");
    ev.remove_prefix(6);
    if (ev != "[DONE]") {
      auto j = nlohmann::json::parse(ev, nullptr, false);
      Check(j.is_object(), target, "an event is a JSON object");
      if (j.contains("choices") && j["choices"].is_array()) {
        for (const auto& c : j["choices"]) {
          if (!c.is_object() || !c.contains("delta") || !c["delta"].is_object()) continue;
          for (const char* k : {"content", "reasoning_content"}) {
            if (c["delta"].contains(k) && c["delta"][k].is_string()) text += c["delta"][k].get<std::string>();
          }
        }
      }
    }
    pos = end + 2;
  }
  return text;
}

}  // namespace toktier::fuzz
