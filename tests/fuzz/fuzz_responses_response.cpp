// The OpenAI Responses translation of an engine's chat completions answer
// (untrusted engine bytes, api/responses_response.h): the first byte picks
// how the stream is cut, whether the request echoed fields, and whether a
// chat translator (a completions-format engine) runs first; the rest is the
// engine's body. As a whole body: a translation that succeeds is one
// response object. As an SSE stream fed whole and in random pieces: it
// succeeds or fails alike and writes the same bytes, and what it writes is
// the Responses event grammar the `openai` SDK's accumulator needs
// (response.created and .in_progress first, sequence numbers 0, 1, ...,
// items added at the next output index, filled and done one at a time, one
// terminal event last whose output is the items done).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "api/api.h"

using toktier::api::ResponsesTranslateOptions;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_responses_response", what); }

ResponsesTranslateOptions Options(uint8_t knobs) {
  ResponsesTranslateOptions o;
  o.id = "resp_fuzz";
  o.model = "m";
  o.created_at = 1;
  o.prompt_tokens = 5;
  if (knobs & 0x20) {
    o.request_echo = {{"instructions", "i"},
                      {"tools", nlohmann::ordered_json::parse(
                                    R"([{"type":"namespace","name":"ns","tools":[{"type":"function","name":"f"}]},
                                        {"type":"function","name":"g"}])")},
                      {"store", true},
                      {"text", nullptr},
                      {"id", "resp_other"}};
    // That namespace's tool: a call of "ns__f" is named back as f in ns.
    o.namespaced_tools = {{"ns__f", {"ns", "f"}}};
  }
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

bool KnownItem(const nlohmann::json& item) {
  if (!item.is_object() || !item["id"].is_string()) return false;
  if (item["type"] == "message") return item["content"].is_array() && item["role"] == "assistant";
  if (item["type"] == "reasoning") return item["content"].is_array() && item["summary"].is_array();
  if (item["type"] == "function_call") {
    return item["call_id"].is_string() && item["name"].is_string() && item["arguments"].is_string();
  }
  return false;
}

void CheckResponse(const nlohmann::json& r, const ResponsesTranslateOptions& o) {
  Check(r.is_object() && r["object"] == "response" && r["id"] == o.id, "a response object with its id");
  Check(r["output"].is_array() && r["tools"].is_array() && r["parallel_tool_calls"].is_boolean(),
        "output, tools and parallel_tool_calls as the SDK types them");
  for (const auto& item : r["output"]) Check(KnownItem(item), "an output item is a message, reasoning or function_call");
}

// The Responses event grammar over the translator's output, which Finish
// always ends.
void CheckEvents(const std::string& out, const ResponsesTranslateOptions& o) {
  size_t pos = 0;
  uint64_t sequence = 0;
  bool ended = false;
  bool open = false;
  nlohmann::json items = nlohmann::json::array();
  while (pos < out.size()) {
    Check(!ended, "nothing follows the terminal event");
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
    Check(j["sequence_number"] == sequence, "sequence numbers count up from 0");
    if (sequence == 0) Check(name == "response.created", "response.created first");
    if (sequence == 1) Check(name == "response.in_progress", "then response.in_progress");
    ++sequence;
    if (name == "response.created" || name == "response.in_progress") {
      Check(sequence <= 2, "one response.created and .in_progress");
      CheckResponse(j["response"], o);
      Check(j["response"]["status"] == "in_progress" && j["response"]["output"].empty(), "an empty response first");
      continue;
    }
    if (name == "response.completed" || name == "response.incomplete" || name == "response.failed") {
      const auto& r = j["response"];
      CheckResponse(r, o);
      if (name == "response.failed") {
        Check(r["status"] == "failed" && r["error"]["message"].is_string(), "a failed response has its error");
      } else {
        Check(!open, "every item is done before the response");
        Check(r["status"] == (name == "response.completed" ? "completed" : "incomplete"), "the status fits the event");
        Check(r["output"] == items, "the response's output is the items done");
        Check(r["usage"]["input_tokens"].is_number_unsigned() && r["usage"]["total_tokens"].is_number_unsigned(),
              "a finished response has its usage");
      }
      ended = true;
      continue;
    }
    Check(j["output_index"] == items.size(), "events are for the next output index");
    if (name == "response.output_item.added") {
      Check(!open && KnownItem(j["item"]) && j["item"]["status"] == "in_progress", "an item opens when none is");
      open = true;
    } else if (name == "response.output_item.done") {
      Check(open && KnownItem(j["item"]) && j["item"]["status"] != "in_progress", "the open item is done");
      items.push_back(j["item"]);
      open = false;
    } else if (name == "response.content_part.added" || name == "response.content_part.done" ||
               name == "response.output_text.delta" || name == "response.output_text.done" ||
               name == "response.reasoning_text.delta" || name == "response.reasoning_text.done" ||
               name == "response.function_call_arguments.delta" || name == "response.function_call_arguments.done") {
      Check(open && j["item_id"].is_string(), "a part or delta is for the open item");
    } else {
      Check(false, "a known event");
    }
  }
  Check(ended, "a finished stream ends in its terminal event");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t knobs = data[0];
  const std::string expanded = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data) + 1, size - 1});
  std::string_view body = expanded;
  const ResponsesTranslateOptions o = Options(knobs);

  std::string response;
  if (toktier::api::TranslateChatToResponse(body, o, &response).ok()) {
    auto j = nlohmann::json::parse(response, nullptr, false);
    CheckResponse(j, o);
    Check(j["status"] == "completed" || j["status"] == "incomplete", "a whole response is completed or incomplete");
    Check(j["usage"]["input_tokens"].is_number_unsigned(), "with its usage");
  }

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
    return toktier::api::MakeResponsesTranslator(std::move(chat), o, /*stream=*/true, 1 << 20);
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
    CheckEvents(pieces, o);
    CheckEvents(whole, o);
  }
  return 0;
}
