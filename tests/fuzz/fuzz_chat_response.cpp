// The chat translation of an engine's completions answer (untrusted engine
// bytes, api/chat_response.h): the first byte picks the tool-call format,
// reasoning and how the stream is cut; the rest is the engine's body. As a
// whole body: a translation that succeeds is one chat.completion object. As
// an SSE stream fed in pieces: it succeeds or fails as it does fed whole, and
// every event it writes is "data: " JSON (or [DONE]) ending in a blank line.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_stream_fuzz.h"
#include "api/api.h"

using toktier::api::ChatTranslateOptions;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_chat_response", what); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  const std::string expanded = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data) + 1, size - 1});
  std::string_view body = expanded;
  ChatTranslateOptions o = toktier::fuzz::FuzzTranslateOptions(knobs);
  o.think_open_in_prompt = knobs & 8;

  std::string chat;
  if (toktier::api::TranslateCompletion(body, o, &chat).ok()) {
    auto j = nlohmann::json::parse(chat, nullptr, false);
    Check(j.is_object() && j["object"] == "chat.completion", "a translated body is a chat.completion");
    Check(j["choices"].is_array(), "a translated body has choices");
  }
  std::string whole, pieces;
  const bool ok_whole = toktier::fuzz::TranslateStream(o, body, body.size() + 1, &whole);
  const bool ok_pieces = toktier::fuzz::TranslateStream(o, body, 1 + (knobs >> 4), &pieces);
  Check(ok_whole == ok_pieces, "a stream fails or not whatever its cuts");
  if (ok_whole) {
    toktier::fuzz::CheckChatEvents(whole, "fuzz_chat_response");
    toktier::fuzz::CheckChatEvents(pieces, "fuzz_chat_response");
  }
  return 0;
}
