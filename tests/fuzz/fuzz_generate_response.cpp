// vLLM's /inference/v1/generate answers (untrusted engine bytes: token IDs)
// translated to chat by the "vllm" mode (api/chat_response.h with
// decode_with, api/token_text.h). The first byte picks the tool-call
// format, reasoning, stop strings, skip_special_tokens and the stream's
// cuts; the rest is the engine's body. A translated body is one
// chat.completion; a stream fails or not whatever its cuts, writes only
// "data: " events, and its content deltas add up to the same text fed
// whole or in pieces. Every decoded text is valid UTF-8.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat_stream_fuzz.h"
#include "api/api.h"

using toktier::api::ChatTranslateOptions;

namespace {

std::shared_ptr<const toktier::core::Tokenizer>& Qwen() {
  static std::shared_ptr<const toktier::core::Tokenizer> t;
  return t;
}

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_generate_response", what); }

// The events' content and reasoning deltas; every decoded text is UTF-8.
std::string Deltas(const std::string& out) {
  std::string text = toktier::fuzz::CheckChatEvents(out, "fuzz_generate_response");
  Check(toktier::core::FindInvalidUtf8(text) == std::string::npos, "decoded text is valid UTF-8");
  return text;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto all = toktier::fuzz::LoadTokenizers({"qwen3"});
  if (!all.empty()) Qwen() = all[0];
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || !Qwen()) return 0;
  const uint8_t knobs = data[0];
  const std::string expanded = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data) + 1, size - 1});
  std::string_view body = expanded;
  ChatTranslateOptions o = toktier::fuzz::FuzzTranslateOptions(knobs);
  o.decode_with = Qwen();
  o.decode.skip_special_tokens = !(knobs & 8);
  if (knobs & 16) o.decode.stop = {"\n\n", "</", "é"};
  o.decode.include_stop_str_in_output = knobs & 32;

  std::string chat;
  if (toktier::api::TranslateCompletion(body, o, &chat).ok()) {
    auto j = nlohmann::json::parse(chat, nullptr, false);
    Check(j.is_object() && j["object"] == "chat.completion", "a translated body is a chat.completion");
  }
  std::string whole, pieces;
  const bool ok_whole = toktier::fuzz::TranslateStream(o, body, body.size() + 1, &whole);
  const bool ok_pieces = toktier::fuzz::TranslateStream(o, body, 1 + (knobs >> 6) * 7, &pieces);
  Check(ok_whole == ok_pieces, "a stream fails or not whatever its cuts");
  if (ok_whole) Check(Deltas(whole) == Deltas(pieces), "the deltas add up to the same text whatever the cuts");
  return 0;
}
