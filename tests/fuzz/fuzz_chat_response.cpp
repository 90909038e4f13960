// The chat translation of an engine's completions answer (untrusted engine
// bytes, proxy/chat_response.h): the first byte picks the tool-call format,
// reasoning and how the stream is cut; the rest is the engine's body. As a
// whole body: a translation that succeeds is one chat.completion object. As
// an SSE stream fed in pieces: it succeeds or fails as it does fed whole, and
// every event it writes is "data: " JSON (or [DONE]) ending in a blank line.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "proxy/chat_response.h"

using toktier::proxy::ChatStreamTranslator;
using toktier::proxy::ChatTranslateOptions;
using toktier::proxy::ToolCallFormat;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_chat_response", what); }

void CheckEvents(const std::string& out) {
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find("\n\n", pos);
    Check(end != std::string::npos, "an event ends in a blank line");
    std::string_view ev(out.data() + pos, end - pos);
    Check(ev.substr(0, 6) == "data: ", "an event is a data line");
    ev.remove_prefix(6);
    if (ev != "[DONE]") {
      auto j = nlohmann::json::parse(ev, nullptr, false);
      Check(j.is_object(), "an event is a JSON object");
    }
    pos = end + 2;
  }
}

bool Stream(const ChatTranslateOptions& o, std::string_view body, size_t step, std::string* out) {
  ChatStreamTranslator tr(o);
  for (size_t at = 0; at < body.size(); at += step) {
    if (!tr.Feed(body.substr(at, step), out)) return false;
  }
  return tr.Finish(out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  ChatTranslateOptions o;
  o.id = "chatcmpl-fuzz";
  o.created = 1;
  o.model = "m";
  o.tools = static_cast<ToolCallFormat>(knobs & 3);
  o.reasoning = knobs & 4;
  o.think_open_in_prompt = knobs & 8;

  std::string chat;
  std::string error;
  if (toktier::proxy::TranslateCompletion(body, o, &chat, &error)) {
    auto j = nlohmann::json::parse(chat, nullptr, false);
    Check(j.is_object() && j["object"] == "chat.completion", "a translated body is a chat.completion");
    Check(j["choices"].is_array(), "a translated body has choices");
  }
  std::string whole, pieces;
  const bool ok_whole = Stream(o, body, body.size() + 1, &whole);
  const bool ok_pieces = Stream(o, body, 1 + (knobs >> 4), &pieces);
  Check(ok_whole == ok_pieces, "a stream fails or not whatever its cuts");
  if (ok_whole) {
    CheckEvents(whole);
    CheckEvents(pieces);
  }
  return 0;
}
