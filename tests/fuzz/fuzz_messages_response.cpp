// The Anthropic Messages translation of an engine's chat completions answer
// (untrusted engine bytes, api/messages_response.h): the first byte picks
// how the stream is cut, whether the request named stop sequences, and
// whether a chat translator (a completions-format engine) runs first; the
// rest is the engine's body. As a whole body: a translation that succeeds is
// one Anthropic message. As an SSE stream fed whole and in random pieces: it
// succeeds or fails alike and writes the same bytes, and what it writes is
// named events in Anthropic's grammar (message_start, blocks opened, filled
// and closed in index order, one message_delta, message_stop last; or an
// error event last). The engine's body as an error answer always gives an
// Anthropic error body.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "api/api.h"

using toktier::api::MessagesTranslateOptions;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_messages_response", what); }

MessagesTranslateOptions Options(uint8_t knobs) {
  MessagesTranslateOptions o;
  o.id = "msg_fuzz";
  o.model = "m";
  o.prompt_tokens = 5;
  if (knobs & 0x20) o.stop_sequences = {"x", "END"};
  return o;
}

// Cut points from a small generator seeded by the knobs: pieces of 1..16
// bytes, the same for the same input.
template <class FeedFn>
bool FeedInPieces(std::string_view body, uint8_t knobs, FeedFn feed) {
  uint32_t state = 0x9E3779B9u ^ knobs;
  for (size_t at = 0; at < body.size();) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    size_t n = std::min<size_t>(1 + state % 16, body.size() - at);
    if (!feed(body.substr(at, n), at + n == body.size())) return false;
    at += n;
  }
  return body.empty() ? feed("", true) : true;
}

// Anthropic's grammar over the translator's output, which Finish always ends.
void CheckEvents(const std::string& out) {
  enum class Phase { kBefore, kMessage, kDelta, kEnded } phase = Phase::kBefore;
  bool open = false;
  std::string open_type;
  int64_t blocks = 0;
  size_t pos = 0;
  while (pos < out.size()) {
    Check(phase != Phase::kEnded, "nothing follows message_stop or an error");
    size_t end = out.find("\n\n", pos);
    Check(end != std::string::npos, "an event ends in a blank line");
    std::string_view ev(out.data() + pos, end - pos);
    pos = end + 2;
    Check(ev.starts_with("event: "), "an event starts with its name");
    size_t newline = ev.find('\n');
    Check(newline != std::string_view::npos, "an event has a data line");
    std::string_view name = ev.substr(7, newline - 7);
    std::string_view data = ev.substr(newline + 1);
    Check(data.starts_with("data: ") && data.find('\n') == std::string_view::npos, "one data line");
    auto j = nlohmann::json::parse(data.substr(6), nullptr, false);
    Check(j.is_object() && j["type"].is_string() && j["type"] == name, "the data is an object of the event's type");
    if (name == "error") {
      Check(j["error"].is_object() && j["error"]["type"].is_string() && j["error"]["message"].is_string(),
            "an error event has a type and a message");
      phase = Phase::kEnded;
      continue;
    }
    if (name == "message_start") {
      Check(phase == Phase::kBefore, "one message_start, first");
      Check(j["message"]["content"].is_array() && j["message"]["content"].empty(), "message_start has no content");
      phase = Phase::kMessage;
      continue;
    }
    Check(phase != Phase::kBefore, "message_start comes first");
    if (name == "ping") continue;
    if (name == "content_block_start") {
      Check(phase == Phase::kMessage && !open, "a block opens when none is open");
      Check(j["index"] == blocks, "blocks open in index order");
      Check(j["content_block"].is_object() && j["content_block"]["type"].is_string(), "a block has a type");
      open_type = j["content_block"]["type"].get<std::string>();
      Check(open_type == "text" || open_type == "thinking" || open_type == "tool_use", "a known block type");
      if (open_type == "tool_use") {
        Check(j["content_block"]["id"].is_string() && j["content_block"]["name"].is_string(), "tool_use id and name");
      }
      open = true;
    } else if (name == "content_block_delta") {
      Check(open && j["index"] == blocks, "a delta is for the open block");
      auto d = j["delta"];
      Check(d.is_object(), "a delta is an object");
      const std::string type = d["type"].is_string() ? d["type"].get<std::string>() : "";
      Check((type == "text_delta" && open_type == "text" && d["text"].is_string()) ||
                (type == "thinking_delta" && open_type == "thinking" && d["thinking"].is_string()) ||
                (type == "signature_delta" && open_type == "thinking" && d["signature"].is_string()) ||
                (type == "input_json_delta" && open_type == "tool_use" && d["partial_json"].is_string()),
            "a delta fits its block");
    } else if (name == "content_block_stop") {
      Check(open && j["index"] == blocks, "the open block closes");
      open = false;
      ++blocks;
    } else if (name == "message_delta") {
      Check(phase == Phase::kMessage && !open, "one message_delta, after the blocks");
      Check(j["delta"]["stop_reason"].is_string() && j["usage"]["output_tokens"].is_number_unsigned(),
            "message_delta has the stop reason and usage");
      phase = Phase::kDelta;
    } else if (name == "message_stop") {
      Check(phase == Phase::kDelta, "message_stop follows message_delta");
      phase = Phase::kEnded;
    } else {
      Check(false, "a known event");
    }
  }
  Check(phase == Phase::kEnded, "a finished stream ends in message_stop or an error");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  const std::string expanded = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data) + 1, size - 1});
  std::string_view body = expanded;
  const MessagesTranslateOptions o = Options(knobs);

  std::string message;
  if (toktier::api::TranslateChatToMessage(body, o, &message).ok()) {
    auto j = nlohmann::json::parse(message, nullptr, false);
    Check(j.is_object() && j["type"] == "message" && j["content"].is_array(), "a translated body is a message");
    Check(j["stop_reason"].is_string() && j["usage"]["input_tokens"].is_number_unsigned(), "with its end and usage");
    for (auto block : j["content"]) {
      Check(block.is_object() && block["type"].is_string(), "a block has a type");
      Check(block["type"] != "tool_use" || block["input"].is_object(), "a tool_use input is an object");
    }
  }

  auto error = nlohmann::json::parse(toktier::api::AnthropicErrorFromEngine(400 + knobs, body), nullptr, false);
  Check(error.is_object() && error["type"] == "error" && error["error"]["message"].is_string(),
        "an engine error gives an Anthropic error body");

  // The stream, through the ResponseTranslator the proxy uses: with a chat
  // translator first when the knob says the engine answers in completions.
  const bool inner = knobs & 0x10;
  auto make = [&] {
    std::unique_ptr<toktier::api::ResponseTranslator> chat;
    if (inner) {
      toktier::api::ChatTranslateOptions co;
      co.id = "chatcmpl-fuzz";
      co.model = "m";
      co.tools = static_cast<toktier::api::ToolCallFormat>(knobs & 3);
      co.reasoning = knobs & 4;
      chat = toktier::api::MakeChatTranslator(co, /*stream=*/true, 1 << 20);
    }
    return toktier::api::MakeMessagesTranslator(std::move(chat), o, /*stream=*/true, 1 << 20);
  };
  std::string whole, pieces;
  auto tr_whole = make();
  const bool ok_whole = tr_whole->Feed(body, true, &whole);
  auto tr_pieces = make();
  const bool ok_pieces = FeedInPieces(body, knobs, [&](std::string_view piece, bool last) {
    return tr_pieces->Feed(piece, last, &pieces);
  });
  Check(ok_whole == ok_pieces, "a stream fails or not whatever its cuts");
  if (ok_whole) {
    // A chat translator first passes its text on as it arrives: then only
    // the deltas' cuts differ.
    if (!inner) Check(whole == pieces, "a stream's output does not depend on its cuts");
    CheckEvents(pieces);
    CheckEvents(whole);
  }
  return 0;
}
