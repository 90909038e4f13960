// api/messages_response: chat completions answers -> Anthropic Messages,
// whole bodies and event streams. Every stream case is also reassembled the
// way an Anthropic SDK accumulates events, and must give the whole body.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "api/api.h"

namespace toktier::test {
namespace {

using json = nlohmann::ordered_json;
using api::MessagesStreamTranslator;
using api::MessagesTranslateOptions;

MessagesTranslateOptions Options() {
  MessagesTranslateOptions options;
  options.id = "msg_t1";
  options.model = "client-model";
  options.prompt_tokens = 7;
  options.stop_sequences = {"END", "###"};
  return options;
}

json Usage(uint64_t prompt, uint64_t completion, std::optional<uint64_t> cached = std::nullopt) {
  json usage = {{"prompt_tokens", prompt}, {"total_tokens", prompt + completion}, {"completion_tokens", completion}};
  if (cached) usage["prompt_tokens_details"] = {{"cached_tokens", *cached}};
  return usage;
}

json ToolCall(const std::string& id, const std::string& name, const std::string& arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

// What the engine answered, in the terms both forms share.
struct Answer {
  std::string reasoning;
  std::string content;
  json tool_calls = json::array();  // chat tool calls, arguments as text
  json finish_reason = "stop";
  json stop_reason = nullptr;  // vLLM's matched stop string
  json usage = Usage(7, 3);    // null: none
};

std::string ChatBody(const Answer& a) {
  json message = {{"role", "assistant"}, {"content", a.content.empty() ? json(nullptr) : json(a.content)}};
  if (!a.reasoning.empty()) message["reasoning_content"] = a.reasoning;
  if (!a.tool_calls.empty()) message["tool_calls"] = a.tool_calls;
  json choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", a.finish_reason}};
  choice["stop_reason"] = a.stop_reason;
  json chat = {{"id", "chatcmpl-1"}, {"object", "chat.completion"}, {"created", 1}, {"model", "engine"},
               {"choices", json::array({choice})}};
  if (!a.usage.is_null()) chat["usage"] = a.usage;
  return chat.dump();
}

json Translate(const std::string& chat, const MessagesTranslateOptions& options = Options()) {
  std::string message;
  core::Status st = api::TranslateChatToMessage(chat, options, &message);
  INFO(st.message());
  REQUIRE(st.ok());
  return json::parse(message);
}

// ---- streams ----

std::string Event(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

json Chunk(json delta, json finish_reason = nullptr, json stop_reason = nullptr) {
  json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (!finish_reason.is_null()) choice["stop_reason"] = stop_reason;
  return {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "engine"},
          {"choices", json::array({choice})}};
}

// Pieces of `text` of 1..3 whole characters, as a detokenizer emits them
// (a JSON string cannot hold half of one; the SSE bytes are cut anywhere
// by RunStream).
std::vector<std::string> Pieces(const std::string& text, std::mt19937& rng) {
  std::vector<std::string> pieces;
  for (size_t i = 0; i < text.size();) {
    std::string piece;
    for (size_t n = 1 + rng() % 3; n > 0 && i < text.size(); --n) {
      do piece += text[i++];
      while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80);
    }
    pieces.push_back(piece);
  }
  return pieces;
}

// The engine's SSE for `a` as vLLM streams it: role chunk, reasoning and
// content pieces, each tool call (id and name first, arguments in pieces),
// the finish chunk, the usage chunk, [DONE].
std::string ChatStream(const Answer& a, unsigned seed = 3, bool done = true) {
  std::mt19937 rng(seed);
  std::string sse = Event(Chunk({{"role", "assistant"}, {"content", ""}}));
  for (const std::string& p : Pieces(a.reasoning, rng)) sse += Event(Chunk({{"reasoning_content", p}}));
  for (const std::string& p : Pieces(a.content, rng)) sse += Event(Chunk({{"content", p}}));
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    const json& call = a.tool_calls[i];
    json start = {{"index", i}, {"id", call["id"]}, {"type", "function"},
                  {"function", {{"name", call["function"]["name"]}, {"arguments", ""}}}};
    sse += Event(Chunk({{"tool_calls", json::array({start})}}));
    for (const std::string& p : Pieces(call["function"]["arguments"].get<std::string>(), rng)) {
      sse += Event(Chunk({{"tool_calls", json::array({{{"index", i}, {"function", {{"arguments", p}}}}})}}));
    }
  }
  sse += Event(Chunk(json::object(), a.finish_reason, a.stop_reason));
  if (!a.usage.is_null()) {
    json usage_chunk = {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1},
                        {"model", "engine"}, {"choices", json::array()}, {"usage", a.usage}};
    sse += Event(usage_chunk);
  }
  if (done) sse += "data: [DONE]\n\n";
  return sse;
}

enum class Split { kWhole, kByteByByte, kRandom };

std::string RunStream(const std::string& sse, Split split = Split::kWhole, const MessagesTranslateOptions& options = Options(),
                      unsigned seed = 7) {
  MessagesStreamTranslator translator(options);
  std::string out;
  std::mt19937 rng(seed);
  for (size_t i = 0; i < sse.size();) {
    size_t n = split == Split::kWhole ? sse.size() : split == Split::kByteByByte ? 1 : 1 + rng() % 40;
    n = std::min(n, sse.size() - i);
    bool ok = translator.Feed(std::string_view(sse).substr(i, n), &out);
    INFO(translator.error());
    REQUIRE(ok);
    i += n;
  }
  bool ok = translator.Finish(&out);
  INFO(translator.error());
  REQUIRE(ok);
  return out;
}

struct Ev {
  std::string name;
  json data;
};

// Splits the output into `event: NAME\ndata: JSON\n\n` events, NAME always
// the data's "type".
std::vector<Ev> Events(const std::string& out) {
  std::vector<Ev> events;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    std::string ev = out.substr(pos, end - pos);
    REQUIRE(ev.starts_with("event: "));
    size_t newline = ev.find('\n');
    REQUIRE(newline != std::string::npos);
    REQUIRE(ev.substr(newline + 1).starts_with("data: "));
    Ev e{ev.substr(7, newline - 7), json::parse(ev.substr(newline + 7))};
    CHECK(e.data["type"] == e.name);
    events.push_back(std::move(e));
    pos = end + 2;
  }
  return events;
}

// Accumulates the events as an Anthropic SDK does, checking the grammar:
// message_start first (then ping), blocks opened in index order and
// closed before the next opens, one message_delta, one message_stop last.
json Assemble(const std::string& out) {
  std::vector<Ev> events = Events(out);
  REQUIRE(!events.empty());
  REQUIRE(events[0].name == "message_start");
  json message = events[0].data["message"];
  CHECK(message["content"] == json::array());
  CHECK(message["stop_reason"].is_null());
  int deltas = 0, stops = 0;
  bool open = false;
  std::string partial_json;
  for (size_t i = 1; i < events.size(); ++i) {
    const Ev& e = events[i];
    INFO(e.name << " " << e.data.dump());
    CHECK(stops == 0);
    if (e.name == "ping") continue;
    if (e.name == "content_block_start") {
      CHECK(!open);
      CHECK(e.data["index"] == message["content"].size());
      message["content"].push_back(e.data["content_block"]);
      open = true;
      partial_json.clear();
    } else if (e.name == "content_block_delta") {
      REQUIRE(open);
      REQUIRE(e.data["index"] == message["content"].size() - 1);
      json& block = message["content"].back();
      const json& d = e.data["delta"];
      if (d["type"] == "text_delta") {
        CHECK(block["type"] == "text");
        block["text"] = block["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (d["type"] == "thinking_delta") {
        CHECK(block["type"] == "thinking");
        block["thinking"] = block["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      } else if (d["type"] == "signature_delta") {
        CHECK(block["type"] == "thinking");
        block["signature"] = d["signature"];
      } else if (d["type"] == "input_json_delta") {
        CHECK(block["type"] == "tool_use");
        partial_json += d["partial_json"].get<std::string>();
      } else {
        FAIL("unknown delta " << d.dump());
      }
    } else if (e.name == "content_block_stop") {
      REQUIRE(open);
      CHECK(e.data["index"] == message["content"].size() - 1);
      json& block = message["content"].back();
      if (block["type"] == "tool_use" && !partial_json.empty()) block["input"] = json::parse(partial_json);
      if (block["type"] == "thinking") CHECK(!block["signature"].get<std::string>().empty());
      open = false;
    } else if (e.name == "message_delta") {
      CHECK(!open);
      ++deltas;
      message["stop_reason"] = e.data["delta"]["stop_reason"];
      message["stop_sequence"] = e.data["delta"]["stop_sequence"];
      message["usage"] = e.data["usage"];
    } else if (e.name == "message_stop") {
      CHECK(deltas == 1);
      ++stops;
    } else {
      FAIL("unexpected event " << e.name);
    }
  }
  CHECK(deltas == 1);
  CHECK(stops == 1);
  return message;
}

// Both forms of `a`: the whole translation, and the stream's assembly fed
// whole, byte by byte, in random pieces and with "\r\n" line endings.
json CheckBothForms(const Answer& a, const MessagesTranslateOptions& options = Options()) {
  json whole = Translate(ChatBody(a), options);
  std::string sse = ChatStream(a);
  std::string crlf;
  for (char c : sse) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  std::string fed_whole = RunStream(sse, Split::kWhole, options);
  CHECK(RunStream(sse, Split::kByteByByte, options) == fed_whole);
  CHECK(RunStream(sse, Split::kRandom, options) == fed_whole);
  CHECK(RunStream(crlf, Split::kRandom, options) == fed_whole);
  CHECK(Assemble(fed_whole) == whole);
  return whole;
}

// ---- whole answers ----

TEST_CASE("messages response: text only, exact body") {
  Answer a;
  a.content = "Hello there";
  std::string message;
  REQUIRE(api::TranslateChatToMessage(ChatBody(a), Options(), &message).ok());
  CHECK(message ==
        R"({"id":"msg_t1","type":"message","role":"assistant","model":"client-model",)"
        R"("content":[{"type":"text","text":"Hello there"}],"stop_reason":"end_turn","stop_sequence":null,)"
        R"("usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3}})");
  CheckBothForms(a);
}

TEST_CASE("messages response: reasoning comes first as a signed thinking block") {
  Answer a;
  a.reasoning = "The user greets; greet back.";
  a.content = "Hi!";
  json m = CheckBothForms(a);
  REQUIRE(m["content"].size() == 2);
  CHECK(m["content"][0]["type"] == "thinking");
  CHECK(m["content"][0]["thinking"] == a.reasoning);
  CHECK(!m["content"][0]["signature"].get<std::string>().empty());
  CHECK(m["content"][1] == json{{"type", "text"}, {"text", "Hi!"}});

  SUBCASE("vLLM's newer \"reasoning\" field, and only one of the two names") {
    json chat = json::parse(ChatBody(a));
    chat["choices"][0]["message"].erase("reasoning_content");
    chat["choices"][0]["message"]["reasoning"] = a.reasoning;
    CHECK(Translate(chat.dump()) == m);
    chat["choices"][0]["message"]["reasoning_content"] = a.reasoning;
    CHECK(Translate(chat.dump()) == m);
  }
  SUBCASE("empty reasoning gives no thinking block") {
    a.reasoning.clear();
    CHECK(CheckBothForms(a)["content"].size() == 1);
  }
}

TEST_CASE("messages response: two tool calls become tool_use blocks with parsed input") {
  Answer a;
  a.content = "Let me check.";
  a.tool_calls = json::array({ToolCall("call_a", "get_weather", R"({"city": "Paris", "days": [1, 2]})"),
                              ToolCall("call_b", "get_time", R"({"tz":"Europe/Paris"})")});
  a.finish_reason = "tool_calls";
  json m = CheckBothForms(a);
  REQUIRE(m["content"].size() == 3);
  CHECK(m["content"][0]["type"] == "text");
  CHECK(m["content"][1] == json{{"type", "tool_use"}, {"id", "call_a"}, {"name", "get_weather"},
                                {"input", {{"city", "Paris"}, {"days", {1, 2}}}}});
  CHECK(m["content"][2] == json{{"type", "tool_use"}, {"id", "call_b"}, {"name", "get_time"},
                                {"input", {{"tz", "Europe/Paris"}}}});
  CHECK(m["stop_reason"] == "tool_use");

  SUBCASE("finish_reason stop with tool calls is tool_use too") {
    a.finish_reason = "stop";
    CHECK(CheckBothForms(a)["stop_reason"] == "tool_use");
  }
  SUBCASE("empty arguments are no arguments; a call without an id gets one") {
    a.content.clear();
    a.tool_calls = json::array({ToolCall("", "now", "")});
    json only = CheckBothForms(a);
    REQUIRE(only["content"].size() == 1);
    CHECK(only["content"][0]["input"] == json::object());
    CHECK(only["content"][0]["id"] == "toolu_t1_0");
  }
}

TEST_CASE("messages response: a matched stop sequence") {
  Answer a;
  a.content = "Counting: 1 2 3";
  a.stop_reason = "END";
  json m = CheckBothForms(a);
  CHECK(m["stop_reason"] == "stop_sequence");
  CHECK(m["stop_sequence"] == "END");

  SUBCASE("a stop string the request did not name, or a stop token ID, is end_turn") {
    a.stop_reason = "STOP";
    CHECK(CheckBothForms(a)["stop_reason"] == "end_turn");
    a.stop_reason = 128001;
    json other = CheckBothForms(a);
    CHECK(other["stop_reason"] == "end_turn");
    CHECK(other["stop_sequence"].is_null());
  }
}

TEST_CASE("messages response: finish reasons") {
  Answer a;
  a.content = "Once upon a";
  a.finish_reason = "length";
  CHECK(CheckBothForms(a)["stop_reason"] == "max_tokens");
  a.finish_reason = nullptr;
  CHECK(Translate(ChatBody(a))["stop_reason"] == "end_turn");
  a.finish_reason = "content_filter";
  CHECK(CheckBothForms(a)["stop_reason"] == "refusal");
  a.finish_reason = "abort";
  CHECK(CheckBothForms(a)["stop_reason"] == "end_turn");
}

TEST_CASE("messages response: usage counts cached prompt tokens apart") {
  Answer a;
  a.content = "ok";
  a.usage = Usage(100, 5, 64);
  json m = CheckBothForms(a);
  CHECK(m["usage"] == json{{"input_tokens", 36}, {"cache_creation_input_tokens", 0},
                           {"cache_read_input_tokens", 64}, {"output_tokens", 5}});

  SUBCASE("no usage: the proxy's prompt count and no output tokens") {
    a.usage = nullptr;
    CHECK(CheckBothForms(a)["usage"] == json{{"input_tokens", 7}, {"cache_creation_input_tokens", 0},
                                             {"cache_read_input_tokens", 0}, {"output_tokens", 0}});
  }
  SUBCASE("null prompt_tokens_details") {
    a.usage = Usage(10, 2);
    a.usage["prompt_tokens_details"] = nullptr;
    CHECK(CheckBothForms(a)["usage"]["input_tokens"] == 10);
  }
}

TEST_CASE("messages response: an empty answer has no blocks") {
  Answer a;
  json m = CheckBothForms(a);
  CHECK(m["content"] == json::array());
  CHECK(m["stop_reason"] == "end_turn");
}

TEST_CASE("messages response: malformed whole answers are errors") {
  Answer ok;
  ok.content = "x";
  json good = json::parse(ChatBody(ok));
  auto error_of = [](const std::string& body) {
    std::string out;
    core::Status st = api::TranslateChatToMessage(body, Options(), &out);
    CHECK(!st.ok());
    return st.message();
  };
  error_of("not json");
  error_of("");
  error_of("[]");
  error_of(R"({"id":"x"})");
  error_of(R"({"choices":{}})");
  CHECK(error_of(R"({"choices":[]})").find("no choices") != std::string::npos);
  {
    json two = good;
    two["choices"].push_back(two["choices"][0]);
    two["choices"][1]["index"] = 1;
    CHECK(error_of(two.dump()).find("more than one") != std::string::npos);
  }
  auto with_message = [&](const std::function<void(json&)>& edit) {
    json body = good;
    edit(body["choices"][0]);
    return error_of(body.dump());
  };
  with_message([](json& c) { c.erase("message"); });
  with_message([](json& c) { c["message"]["content"] = 5; });
  with_message([](json& c) { c["message"]["reasoning_content"] = json::array(); });
  with_message([](json& c) { c["finish_reason"] = 1; });
  with_message([](json& c) { c["index"] = 1; });
  with_message([](json& c) { c["message"]["tool_calls"] = "f"; });
  CHECK(with_message([](json& c) {
          c["message"]["tool_calls"] = json::array({ToolCall("c", "f", R"({"a": )")});
        }).find("arguments") != std::string::npos);
  with_message([](json& c) { c["message"]["tool_calls"] = json::array({ToolCall("c", "f", "[1,2]")}); });
  with_message([](json& c) { c["message"]["tool_calls"] = json::array({ToolCall("c", "", "{}")}); });
  with_message([](json& c) { c["message"]["tool_calls"] = json::array({json{{"id", "c"}}}); });
  with_message([](json& c) { c["message"]["tool_calls"] = json::array({ToolCall("c", "f", std::string(300, '[') + std::string(300, ']'))}); });
  {
    json body = good;
    body["usage"] = {{"prompt_tokens", -1}};
    error_of(body.dump());
    body["usage"] = "lots";
    error_of(body.dump());
  }
  error_of(std::string(100000, '[') + std::string(100000, ']'));
}

// ---- streams ----

TEST_CASE("messages response: stream events, exact") {
  Answer a;
  a.reasoning = "hm";
  a.content = "Hi";
  a.usage = Usage(7, 2, 4);
  json usage_chunk = Chunk(json::object());
  usage_chunk["choices"] = json::array();
  usage_chunk["usage"] = a.usage;
  std::string sse = ": keep-alive\n\nevent: x\n" + Event(Chunk({{"role", "assistant"}, {"content", ""}})) +
                    Event(Chunk({{"reasoning_content", "hm"}})) + Event(Chunk({{"content", "Hi"}})) +
                    Event(Chunk(json::object(), "stop")) + Event(usage_chunk) + "data: [DONE]\n\n";
  const std::string start =
      R"({"type":"message_start","message":{"id":"msg_t1","type":"message","role":"assistant",)"
      R"("model":"client-model","content":[],"stop_reason":null,"stop_sequence":null,)"
      R"("usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}}})";
  auto event = [](const char* name, const std::string& data) { return std::string("event: ") + name + "\ndata: " + data + "\n\n"; };
  std::string expected =
      event("message_start", start) + event("ping", R"({"type":"ping"})") +
      event("content_block_start",
            R"({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}})") +
      event("content_block_delta",
            R"({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}})") +
      event("content_block_delta",
            R"({"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"toktier-msg_t1"}})") +
      event("content_block_stop", R"({"type":"content_block_stop","index":0})") +
      event("content_block_start",
            R"({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}})") +
      event("content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Hi"}})") +
      event("content_block_stop", R"({"type":"content_block_stop","index":1})") +
      event("message_delta",
            R"({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},)"
            R"("usage":{"input_tokens":3,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":2}})") +
      event("message_stop", R"({"type":"message_stop"})");
  CHECK(RunStream(sse) == expected);
  CHECK(RunStream(sse, Split::kByteByByte) == expected);
}

TEST_CASE("messages response: streams assemble into the whole message, however cut") {
  std::mt19937 rng(11);
  const std::vector<std::string> texts = {"", "a", "Grüße, 世界! 😀", "line\nbreak \"quoted\" \\ back"};
  for (int round = 0; round < 40; ++round) {
    Answer a;
    a.reasoning = texts[rng() % texts.size()];
    a.content = texts[rng() % texts.size()];
    for (size_t n = rng() % 3, i = 0; i < n; ++i) {
      a.tool_calls.push_back(ToolCall("call_" + std::to_string(i), "f" + std::to_string(i),
                                      json{{"text", texts[rng() % texts.size()]}, {"n", i}}.dump()));
    }
    const json finishes[] = {"stop", "length", "tool_calls", nullptr};
    a.finish_reason = finishes[rng() % 4];
    if (rng() % 3 == 0) a.stop_reason = "###";
    if (rng() % 3 == 0) a.usage = rng() % 2 ? json(nullptr) : Usage(50, 9, 32);
    INFO("round " << round);
    CheckBothForms(a);
  }
}

TEST_CASE("messages response: stream endings") {
  Answer a;
  a.content = "done";
  SUBCASE("no [DONE] after the finish: message_stop at Finish") {
    json m = Assemble(RunStream(ChatStream(a, 3, /*done=*/false)));
    CHECK(m == Translate(ChatBody(a)));
  }
  SUBCASE("no usage chunk: message_delta at [DONE], with the proxy's count") {
    a.usage = nullptr;
    CHECK(Assemble(RunStream(ChatStream(a)))["usage"]["input_tokens"] == 7);
  }
  SUBCASE("usage riding on the finish chunk (llama.cpp)") {
    json finish = Chunk(json::object(), "stop");
    finish["usage"] = Usage(9, 1, 2);
    std::string sse = Event(Chunk({{"content", "done"}})) + Event(finish) + "data: [DONE]\n\n";
    json m = Assemble(RunStream(sse));
    CHECK(m["usage"]["input_tokens"] == 7);
    CHECK(m["usage"]["cache_read_input_tokens"] == 2);
  }
  SUBCASE("[DONE] alone is still a whole, empty message") {
    json m = Assemble(RunStream("data: [DONE]\n\n"));
    CHECK(m["content"] == json::array());
  }
  SUBCASE("deltas after the finish and after the usage chunk are dropped") {
    std::string sse = Event(Chunk({{"content", "done"}}, "stop")) + Event(Chunk({{"content", "more"}})) +
                      "data: [DONE]\n\ndata: {\"late\":1}\n\n";
    CHECK(Assemble(RunStream(sse))["content"] == json::array({{{"type", "text"}, {"text", "done"}}}));
  }
  SUBCASE("a stream cut off before its finish ends in an error event") {
    std::string out = RunStream(Event(Chunk({{"content", "do"}})));
    std::vector<Ev> events = Events(out);
    REQUIRE(events.size() == 5);  // message_start, ping, block start, delta, error
    CHECK(events.back().name == "error");
    CHECK(events.back().data["error"]["type"] == "api_error");
    CHECK(out.find("message_stop") == std::string::npos);
    CHECK(Events(RunStream(""))[0].name == "error");
  }
  SUBCASE("an unterminated last event still counts") {
    std::string sse = Event(Chunk({{"content", "done"}}, "stop")) + "data: [DONE]";
    CHECK(Assemble(RunStream(sse))["stop_reason"] == "end_turn");
  }
}

TEST_CASE("messages response: an engine error event ends the stream") {
  std::string sse = Event(Chunk({{"content", "partial"}})) +
                    R"(data: {"error":{"message":"out of KV cache","type":"InternalServerError","code":500}})" "\n\n" +
                    Event(Chunk({{"content", "more"}})) + "data: [DONE]\n\n";
  std::string out = RunStream(sse, Split::kByteByByte);
  CHECK(out == RunStream(sse));
  std::vector<Ev> events = Events(out);
  REQUIRE(!events.empty());
  CHECK(events.back().name == "error");
  CHECK(events.back().data == json{{"type", "error"}, {"error", {{"type", "api_error"}, {"message", "out of KV cache"}}}});
  CHECK(out.find("more") == std::string::npos);
  CHECK(out.find("message_stop") == std::string::npos);

  SUBCASE("an error event first, and an error that is a string") {
    std::vector<Ev> only = Events(RunStream(R"(data: {"error":"boom"})" "\n\n"));
    REQUIRE(only.size() == 1);
    CHECK(only[0].data["error"]["message"] == "boom");
  }
}

TEST_CASE("messages response: malformed streams return false, and stay failed") {
  auto fails = [](const std::string& sse) {
    MessagesStreamTranslator translator(Options());
    std::string out;
    bool ok = translator.Feed(sse, &out) && translator.Finish(&out);
    CHECK(!ok);
    CHECK(!translator.error().empty());
    CHECK(!translator.Feed(Event(Chunk({{"content", "x"}})), &out));
    CHECK(!translator.Finish(&out));
    return translator.error();
  };
  fails("data: not json\n\n");
  fails("data: [1]\n\n");
  fails(R"(data: {"choices":{}})" "\n\n");
  fails(R"(data: {"choices":[{"index":1,"delta":{"content":"x"}}]})" "\n\n");
  fails(R"(data: {"choices":[{"index":0,"delta":{"content":5}}]})" "\n\n");
  fails(R"(data: {"choices":[{"index":0,"delta":"x"}]})" "\n\n");
  fails(R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":7}]})" "\n\n");
  fails(R"(data: {"choices":[],"usage":{"prompt_tokens":"many"}})" "\n\n");
  fails("data: " + std::string(300, '[') + std::string(300, ']') + "\n\n");
  auto call = [](json entry) { return Event(Chunk({{"tool_calls", json::array({std::move(entry)})}})); };
  CHECK(fails(call({{"index", 0}, {"function", {{"arguments", "{}"}}}})).find("name") != std::string::npos);
  CHECK(fails(call({{"index", 0}, {"id", "a"}, {"function", {{"name", "f"}, {"arguments", "{\"x\":"}}}}) +
              Event(Chunk(json::object(), "tool_calls")) + "data: [DONE]\n\n")
            .find("arguments") != std::string::npos);
  fails(call({{"index", 0}, {"id", "a"}, {"function", {{"name", "f"}, {"arguments", "[]"}}}}) +
        Event(Chunk({{"content", "x"}})));
  CHECK(fails(call({{"index", 0}, {"id", "a"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}) +
              call({{"index", 1}, {"id", "b"}, {"function", {{"name", "g"}, {"arguments", "{}"}}}}) +
              call({{"index", 0}, {"function", {{"arguments", " "}}}}))
            .find("resumed") != std::string::npos);
  fails(call({{"index", -1}, {"id", "a"}, {"function", {{"name", "f"}}}}));
  fails(call({{"index", 0}, {"id", "a"}, {"function", "f"}}));
}

TEST_CASE("messages response: tool call deltas without an index continue the open call") {
  std::string sse = Event(Chunk({{"tool_calls", json::array({{{"id", "a"}, {"function", {{"name", "f"}, {"arguments", "{\"x\""}}}}})}})) +
                    Event(Chunk({{"tool_calls", json::array({{{"function", {{"arguments", ":1}"}}}}})}})) +
                    Event(Chunk({{"tool_calls", json::array({{{"id", "b"}, {"function", {{"name", "g"}}}}})}})) +
                    Event(Chunk(json::object(), "tool_calls")) + "data: [DONE]\n\n";
  json m = Assemble(RunStream(sse));
  REQUIRE(m["content"].size() == 2);
  CHECK(m["content"][0]["input"] == json{{"x", 1}});
  CHECK(m["content"][1]["id"] == "b");
  CHECK(m["content"][1]["input"] == json::object());
}

TEST_CASE("messages response: an over-long SSE line is refused") {
  MessagesStreamTranslator translator(Options());
  std::string out;
  const std::string mib(size_t{1} << 20, 'a');
  bool ok = translator.Feed("data: ", &out);
  for (int i = 0; ok && i < 65; ++i) ok = translator.Feed(mib, &out);
  CHECK(!ok);
  CHECK(translator.error().find("64 MiB") != std::string::npos);
}

// ---- the ResponseTranslator ----

std::string RunTranslator(api::ResponseTranslator& tr, const std::string& bytes, size_t step) {
  std::string out;
  for (size_t i = 0; i < bytes.size() || i == 0; i += step) {
    bool last = i + step >= bytes.size();
    std::string piece;
    bool ok = tr.Feed(std::string_view(bytes).substr(i, std::min(step, bytes.size() - i)), last, &piece);
    INFO(tr.error());
    REQUIRE(ok);
    out += piece;
    if (last) break;
  }
  return out;
}

api::ChatTranslateOptions ChatOptions() {
  api::ChatTranslateOptions options;
  options.id = "chatcmpl-x";
  options.created = 1;
  options.model = "client-model";
  return options;
}

TEST_CASE("messages response: over the chat translator of a completions answer") {
  const json usage = Usage(7, 1, 3);
  const json expected = {{"id", "msg_t1"},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", "client-model"},
                         {"content", json::array({{{"type", "text"}, {"text", "Hello"}}})},
                         {"stop_reason", "end_turn"},
                         {"stop_sequence", nullptr},
                         {"usage", {{"input_tokens", 4}, {"cache_creation_input_tokens", 0},
                                    {"cache_read_input_tokens", 3}, {"output_tokens", 1}}}};
  SUBCASE("whole") {
    std::string body = json{{"id", "cmpl-1"}, {"object", "text_completion"}, {"created", 1}, {"model", "engine"},
                            {"choices", json::array({{{"index", 0}, {"text", "Hello"}, {"logprobs", nullptr},
                                                      {"finish_reason", "stop"}}})},
                            {"usage", usage}}
                           .dump();
    for (size_t step : {size_t{1}, size_t{7}, body.size()}) {
      auto tr = api::MakeMessagesTranslator(api::MakeChatTranslator(ChatOptions(), false, 1 << 20), Options(),
                                            /*stream=*/false, 1 << 20);
      CHECK(!tr->streaming());
      CHECK(json::parse(RunTranslator(*tr, body, step)) == expected);
    }
  }
  SUBCASE("stream") {
    auto chunk = [](json choices) {
      return json{{"id", "cmpl-1"}, {"object", "text_completion"}, {"created", 1}, {"model", "engine"},
                  {"choices", std::move(choices)}};
    };
    json last = chunk(json::array());
    last["usage"] = usage;
    std::string sse = Event(chunk(json::array({{{"index", 0}, {"text", "Hel"}, {"finish_reason", nullptr}}}))) +
                      Event(chunk(json::array({{{"index", 0}, {"text", "lo"}, {"finish_reason", nullptr}}}))) +
                      Event(chunk(json::array({{{"index", 0}, {"text", ""}, {"finish_reason", "stop"}}}))) +
                      Event(last) + "data: [DONE]\n\n";
    std::string first;
    for (size_t step : {size_t{1}, size_t{5}, sse.size()}) {
      auto tr = api::MakeMessagesTranslator(api::MakeChatTranslator(ChatOptions(), true, 1 << 20), Options(),
                                            /*stream=*/true, 1 << 20);
      CHECK(tr->streaming());
      std::string out = RunTranslator(*tr, sse, step);
      CHECK(Assemble(out) == expected);
      if (first.empty()) first = out;
      CHECK(out == first);
    }
  }
}

TEST_CASE("messages response: the translator without an inner stage, and its bounds") {
  Answer a;
  a.content = "Hi";
  std::string body = ChatBody(a);
  auto whole = api::MakeMessagesTranslator(nullptr, Options(), false, body.size());
  CHECK(json::parse(RunTranslator(*whole, body, 3)) == Translate(body));

  auto small = api::MakeMessagesTranslator(nullptr, Options(), false, body.size() - 1);
  std::string out;
  CHECK(!small->Feed(body, true, &out));
  CHECK(small->error().find("larger") != std::string::npos);
  CHECK(!small->Feed("", true, &out));

  auto broken = api::MakeMessagesTranslator(nullptr, Options(), false, 100);
  CHECK(!broken->Feed("{}", true, &out));
  CHECK(!broken->error().empty());

  auto stream = api::MakeMessagesTranslator(nullptr, Options(), true, 0);
  CHECK(Assemble(RunTranslator(*stream, ChatStream(a), 4)) == Translate(body));
  auto bad_stream = api::MakeMessagesTranslator(nullptr, Options(), true, 0);
  CHECK(!bad_stream->Feed("data: nope\n\n", false, &out));
  CHECK(!bad_stream->error().empty());
}

// ---- errors ----

TEST_CASE("messages response: Anthropic error bodies") {
  CHECK(api::AnthropicErrorJson(400, "bad \"field\"") ==
        R"({"type":"error","error":{"type":"invalid_request_error","message":"bad \"field\""}})");
  const std::pair<int, const char*> types[] = {
      {400, "invalid_request_error"}, {401, "authentication_error"}, {402, "billing_error"},
      {403, "permission_error"},      {404, "not_found_error"},      {413, "request_too_large"},
      {429, "rate_limit_error"},      {500, "api_error"},            {504, "timeout_error"},
      {529, "overloaded_error"},      {422, "invalid_request_error"}, {502, "api_error"},
      {503, "api_error"},             {200, "api_error"}};
  for (auto [status, type] : types) {
    INFO(status);
    CHECK(api::AnthropicErrorType(status) == type);
    CHECK(json::parse(api::AnthropicErrorJson(status, "m"))["error"]["type"] == type);
  }
  // Invalid UTF-8 in a message is replaced, never thrown.
  CHECK(json::parse(api::AnthropicErrorJson(500, "\xff\xfe"))["error"]["message"].is_string());
}

TEST_CASE("messages response: engine errors keep their message") {
  auto message = [](int status, const std::string& body) {
    json e = json::parse(api::AnthropicErrorFromEngine(status, body));
    CHECK(e["type"] == "error");
    return std::make_pair(e["error"]["type"].get<std::string>(), e["error"]["message"].get<std::string>());
  };
  CHECK(message(400, R"({"error":{"message":"max_tokens is too large","type":"BadRequestError","code":400}})") ==
        std::make_pair(std::string("invalid_request_error"), std::string("max_tokens is too large")));
  CHECK(message(503, R"({"error":"loading model"})").second == "loading model");
  CHECK(message(422, R"({"detail":"field required"})").second == "field required");
  CHECK(message(404, R"({"message":"no such model"})").second == "no such model");
  CHECK(message(502, "<html>Bad Gateway</html>\n").second == "<html>Bad Gateway</html>");
  CHECK(message(500, "").second == "the engine answered HTTP 500");
  CHECK(message(500, R"({"error":{"code":1}})").second == R"({"error":{"code":1}})");
  std::string big = "é" + std::string(5000, 'x');
  std::string cut = message(500, std::string(4095, 'y') + "é").second;
  CHECK(cut == std::string(4095, 'y'));  // never half a character
  CHECK(message(500, big).second.size() == 4096);
  CHECK(message(529, std::string(100000, '[')).first == "overloaded_error");
}

}  // namespace
}  // namespace toktier::test
