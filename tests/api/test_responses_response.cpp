// api/responses_response: chat completions answers -> OpenAI Responses,
// whole bodies and event streams. Every stream case is also accumulated the
// way the `openai` SDK's ResponseStream does (lib/responses/
// ResponseAccumulator), checking the event grammar on the way, and its final
// response object must be the whole body.
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
using api::ResponsesStreamTranslator;
using api::ResponsesTranslateOptions;

ResponsesTranslateOptions Options() {
  ResponsesTranslateOptions options;
  options.id = "resp_t1";
  options.model = "client-model";
  options.created_at = 1700000000;
  options.prompt_tokens = 7;
  return options;
}

json Usage(uint64_t prompt, uint64_t completion, std::optional<uint64_t> cached = std::nullopt) {
  json usage = {{"prompt_tokens", prompt}, {"total_tokens", prompt + completion}, {"completion_tokens", completion}};
  if (cached) usage["prompt_tokens_details"] = {{"cached_tokens", *cached}};
  return usage;
}

json ResponsesUsage(uint64_t input, uint64_t cached, uint64_t output, uint64_t reasoning = 0) {
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", cached}, {"cache_write_tokens", 0}}},
          {"output_tokens", output},
          {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
          {"total_tokens", input + output}};
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
  json usage = Usage(7, 3);  // null: none
};

std::string ChatBody(const Answer& a) {
  json message = {{"role", "assistant"}, {"content", a.content.empty() ? json(nullptr) : json(a.content)}};
  if (!a.reasoning.empty()) message["reasoning_content"] = a.reasoning;
  if (!a.tool_calls.empty()) message["tool_calls"] = a.tool_calls;
  json choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", a.finish_reason}};
  json chat = {{"id", "chatcmpl-1"}, {"object", "chat.completion"}, {"created", 1}, {"model", "engine"},
               {"choices", json::array({choice})}};
  if (!a.usage.is_null()) chat["usage"] = a.usage;
  return chat.dump();
}

json Translate(const std::string& chat, const ResponsesTranslateOptions& options = Options()) {
  std::string response;
  core::Status st = api::TranslateChatToResponse(chat, options, &response);
  INFO(st.message());
  REQUIRE(st.ok());
  return json::parse(response);
}

// ---- streams ----

std::string Event(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

json Chunk(json delta, json finish_reason = nullptr) {
  json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  return {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "engine"},
          {"choices", json::array({choice})}};
}

json UsageChunk(json usage) {
  return {{"id", "chatcmpl-1"}, {"object", "chat.completion.chunk"}, {"created", 1}, {"model", "engine"},
          {"choices", json::array()}, {"usage", std::move(usage)}};
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
  sse += Event(Chunk(json::object(), a.finish_reason));
  if (!a.usage.is_null()) sse += Event(UsageChunk(a.usage));
  if (done) sse += "data: [DONE]\n\n";
  return sse;
}

enum class Split { kWhole, kByteByByte, kRandom };

std::string RunStream(const std::string& sse, Split split = Split::kWhole,
                      const ResponsesTranslateOptions& options = Options(), unsigned seed = 7) {
  ResponsesStreamTranslator translator(options);
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
// the data's "type", sequence numbers 0, 1, 2, ...
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
    CHECK(e.data["sequence_number"] == events.size());
    events.push_back(std::move(e));
    pos = end + 2;
  }
  return events;
}

bool Terminal(const std::string& name) {
  return name == "response.completed" || name == "response.incomplete" || name == "response.failed";
}

// Accumulates the events as the SDK's ResponseStream does, checking the
// grammar: response.created then .in_progress first; each item added at the
// next output index, its part added before its deltas, its done events
// repeating exactly what the deltas added up to; one item open at a time;
// one terminal event last, whose output is what the deltas built (for
// completed and incomplete). Returns the terminal event's response.
json Assemble(const std::string& out) {
  std::vector<Ev> events = Events(out);
  REQUIRE(events.size() >= 3);
  REQUIRE(events[0].name == "response.created");
  REQUIRE(events[1].name == "response.in_progress");
  json snapshot = events[0].data["response"];
  CHECK(snapshot["status"] == "in_progress");
  CHECK(snapshot["output"] == json::array());
  CHECK(snapshot["usage"].is_null());
  CHECK(events[1].data["response"] == snapshot);
  bool open = false;
  for (size_t i = 2; i < events.size(); ++i) {
    const Ev& e = events[i];
    const json& d = e.data;
    INFO(e.name << " " << d.dump());
    if (Terminal(e.name)) {
      CHECK(i + 1 == events.size());
      const json& response = d["response"];
      if (e.name == "response.failed") {
        CHECK(response["status"] == "failed");
        CHECK(response["error"]["code"] == "server_error");
        CHECK(response["error"]["message"].is_string());
        return response;
      }
      CHECK(!open);
      CHECK(response["status"] == (e.name == "response.completed" ? "completed" : "incomplete"));
      CHECK(response["error"].is_null());
      CHECK(response["output"] == snapshot["output"]);
      return response;
    }
    json& output = snapshot["output"];
    if (e.name == "response.output_item.added") {
      CHECK(!open);
      CHECK(d["output_index"] == output.size());
      CHECK(d["item"]["status"] == "in_progress");
      output.push_back(d["item"]);
      open = true;
      continue;
    }
    REQUIRE(open);
    REQUIRE(d["output_index"] == output.size() - 1);
    json& item = output.back();
    if (e.name == "response.output_item.done") {
      json done = d["item"];
      CHECK(done["id"] == item["id"]);
      CHECK(done["status"] != "in_progress");
      item["status"] = done["status"];
      CHECK(done == item);
      open = false;
      continue;
    }
    CHECK(d["item_id"] == item["id"]);
    if (e.name == "response.content_part.added") {
      CHECK(d["content_index"] == item["content"].size());
      CHECK(d["part"]["text"] == "");
      CHECK(d["part"]["type"] == (item["type"] == "message" ? "output_text" : "reasoning_text"));
      item["content"].push_back(d["part"]);
    } else if (e.name == "response.output_text.delta" || e.name == "response.reasoning_text.delta") {
      CHECK(item["type"] == (e.name == "response.output_text.delta" ? "message" : "reasoning"));
      REQUIRE(d["content_index"] < item["content"].size());
      json& part = item["content"][d["content_index"].get<size_t>()];
      part["text"] = part["text"].get<std::string>() + d["delta"].get<std::string>();
      if (item["type"] == "message") CHECK(d["logprobs"] == json::array());
    } else if (e.name == "response.output_text.done" || e.name == "response.reasoning_text.done") {
      REQUIRE(d["content_index"] < item["content"].size());
      CHECK(item["content"][d["content_index"].get<size_t>()]["text"] == d["text"]);
    } else if (e.name == "response.content_part.done") {
      REQUIRE(d["content_index"] < item["content"].size());
      CHECK(item["content"][d["content_index"].get<size_t>()] == d["part"]);
    } else if (e.name == "response.function_call_arguments.delta") {
      CHECK(item["type"] == "function_call");
      item["arguments"] = item["arguments"].get<std::string>() + d["delta"].get<std::string>();
    } else if (e.name == "response.function_call_arguments.done") {
      CHECK(item["arguments"] == d["arguments"]);
      CHECK(item["name"] == d["name"]);
    } else {
      FAIL("unexpected event " << e.name);
    }
  }
  FAIL("no terminal event");
  return {};
}

// Both forms of `a`: the whole translation, and the stream's final response
// fed whole, byte by byte, in random pieces and with "\r\n" line endings.
json CheckBothForms(const Answer& a, const ResponsesTranslateOptions& options = Options()) {
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

// The response object for Options() with no request echo, around `output`.
std::string ResponseText(const std::string& status, const std::string& incomplete_details, const std::string& output,
                         const std::string& usage) {
  return R"({"id":"resp_t1","object":"response","created_at":1700000000,"status":")" + status +
         R"(","error":null,"incomplete_details":)" + incomplete_details +
         R"(,"instructions":null,"max_output_tokens":null,"model":"client-model","output":)" + output +
         R"(,"parallel_tool_calls":true,"previous_response_id":null,"reasoning":null,"store":false,)"
         R"("temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,)"
         R"("truncation":"disabled","usage":)" + usage + R"(,"metadata":{}})";
}

// ---- whole answers ----

TEST_CASE("responses response: text only, exact body") {
  Answer a;
  a.content = "Hello there";
  std::string response;
  REQUIRE(api::TranslateChatToResponse(ChatBody(a), Options(), &response).ok());
  CHECK(response ==
        ResponseText("completed", "null",
                     R"([{"id":"msg_t1_0","type":"message","role":"assistant","status":"completed",)"
                     R"("content":[{"type":"output_text","text":"Hello there","annotations":[],"logprobs":[]}]}])",
                     R"({"input_tokens":7,"input_tokens_details":{"cached_tokens":0,"cache_write_tokens":0},)"
                     R"("output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":10})"));
  CheckBothForms(a);
}

TEST_CASE("responses response: reasoning comes first as a reasoning item") {
  Answer a;
  a.reasoning = "The user greets; greet back.";
  a.content = "Hi!";
  json r = CheckBothForms(a);
  REQUIRE(r["output"].size() == 2);
  CHECK(r["output"][0] == json{{"id", "rs_t1_0"}, {"type", "reasoning"}, {"summary", json::array()},
                               {"content", json::array({{{"type", "reasoning_text"}, {"text", a.reasoning}}})},
                               {"status", "completed"}});
  CHECK(r["output"][1]["id"] == "msg_t1_1");
  CHECK(r["output"][1]["content"][0]["text"] == "Hi!");

  SUBCASE("vLLM's newer \"reasoning\" field, and only one of the two names") {
    json chat = json::parse(ChatBody(a));
    chat["choices"][0]["message"].erase("reasoning_content");
    chat["choices"][0]["message"]["reasoning"] = a.reasoning;
    CHECK(Translate(chat.dump()) == r);
    chat["choices"][0]["message"]["reasoning_content"] = a.reasoning;
    CHECK(Translate(chat.dump()) == r);
  }
  SUBCASE("empty reasoning gives no reasoning item") {
    a.reasoning.clear();
    CHECK(CheckBothForms(a)["output"].size() == 1);
  }
  SUBCASE("reasoning alone") {
    a.content.clear();
    json only = CheckBothForms(a);
    REQUIRE(only["output"].size() == 1);
    CHECK(only["output"][0]["type"] == "reasoning");
  }
}

TEST_CASE("responses response: two tool calls become function_call items, arguments as sent") {
  Answer a;
  a.content = "Let me check.";
  a.tool_calls = json::array({ToolCall("call_a", "get_weather", R"({"city": "Paris", "days": [1, 2]})"),
                              ToolCall("call_b", "get_time", R"({"tz":"Europe/Paris"})")});
  a.finish_reason = "tool_calls";
  json r = CheckBothForms(a);
  REQUIRE(r["output"].size() == 3);
  CHECK(r["output"][0]["type"] == "message");
  CHECK(r["output"][1] == json{{"id", "fc_t1_1"}, {"type", "function_call"}, {"status", "completed"},
                               {"call_id", "call_a"}, {"name", "get_weather"},
                               {"arguments", R"({"city": "Paris", "days": [1, 2]})"}});
  CHECK(r["output"][2] == json{{"id", "fc_t1_2"}, {"type", "function_call"}, {"status", "completed"},
                               {"call_id", "call_b"}, {"name", "get_time"}, {"arguments", R"({"tz":"Europe/Paris"})"}});
  CHECK(r["status"] == "completed");

  SUBCASE("a call without an id gets one; empty arguments stay empty") {
    a.content.clear();
    a.tool_calls = json::array({ToolCall("", "now", ""), ToolCall("", "later", "{}")});
    json only = CheckBothForms(a);
    REQUIRE(only["output"].size() == 2);
    CHECK(only["output"][0]["call_id"] == "call_t1_0");
    CHECK(only["output"][0]["arguments"] == "");
    CHECK(only["output"][1]["call_id"] == "call_t1_1");
    CHECK(only["output"][1]["id"] == "fc_t1_1");
  }
  SUBCASE("arguments a server sent as an object are its JSON text; none are empty") {
    json chat = json::parse(ChatBody(a));
    chat["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {{"city", "Paris"}};
    chat["choices"][0]["message"]["tool_calls"][1]["function"].erase("arguments");
    json t = Translate(chat.dump());
    CHECK(t["output"][1]["arguments"] == R"({"city":"Paris"})");
    CHECK(t["output"][2]["arguments"] == "");
  }
}

TEST_CASE("responses response: a call of a namespace's tool is named back by namespace and name") {
  // The prompt named it mcp__github__search (api/responses_request.h); the
  // names come from the request's own mapping.
  api::ResponsesRequest request;
  api::RequestError err;
  REQUIRE(api::ParseResponsesRequest(R"({"model": "m", "input": "x", "tools": [
      {"type": "namespace", "name": "mcp__github", "tools": [{"type": "function", "name": "search"},
                                                              {"type": "web_search"}]},
      {"type": "function", "name": "mcp__docs__read"},
      {"type": "namespace", "name": "mcp__docs", "tools": [{"type": "function", "name": "read"}]}]})",
                                     &request, &err));
  ResponsesTranslateOptions options = Options();
  options.namespaced_tools = request.namespaced_tools;
  Answer a;
  a.tool_calls = json::array({ToolCall("call_a", "mcp__github__search", R"({"q":"crash"})"),
                              ToolCall("call_b", "mcp__docs__read", "{}"), ToolCall("call_c", "plain", "{}"),
                              ToolCall("call_d", "mcp__github__web_search", "{}")});
  a.finish_reason = "tool_calls";
  json r = CheckBothForms(a, options);
  REQUIRE(r["output"].size() == 4);
  CHECK(r["output"][0] == json{{"id", "fc_t1_0"}, {"type", "function_call"}, {"status", "completed"},
                               {"call_id", "call_a"}, {"name", "search"}, {"namespace", "mcp__github"},
                               {"arguments", R"({"q":"crash"})"}});
  // A plain function tool of the flattened name is the one called.
  CHECK(r["output"][1]["name"] == "mcp__docs__read");
  CHECK_FALSE(r["output"][1].contains("namespace"));
  // Names no tool has, and a namespace's hosted tool, stay as the model wrote them.
  CHECK(r["output"][2]["name"] == "plain");
  CHECK(r["output"][3]["name"] == "mcp__github__web_search");
  CHECK_FALSE(r["output"][3].contains("namespace"));
  std::vector<Ev> events = Events(RunStream(ChatStream(a), Split::kWhole, options));
  auto done = std::find_if(events.begin(), events.end(),
                           [](const Ev& e) { return e.name == "response.function_call_arguments.done"; });
  REQUIRE(done != events.end());
  CHECK(done->data["name"] == "search");
}

TEST_CASE("responses response: length is an incomplete response") {
  Answer a;
  a.reasoning = "so";
  a.content = "Once upon a";
  a.finish_reason = "length";
  json r = CheckBothForms(a);
  CHECK(r["status"] == "incomplete");
  CHECK(r["incomplete_details"] == json{{"reason", "max_output_tokens"}});
  // The item the limit cut is incomplete; the one before it was whole.
  CHECK(r["output"][0]["status"] == "completed");
  CHECK(r["output"][1]["status"] == "incomplete");
  CHECK(Events(RunStream(ChatStream(a))).back().name == "response.incomplete");

  SUBCASE("inside a tool call") {
    a.tool_calls = json::array({ToolCall("c", "f", R"({"x": "unfini)")});
    json cut = CheckBothForms(a);
    CHECK(cut["output"][2]["status"] == "incomplete");
    CHECK(cut["output"][2]["arguments"] == R"({"x": "unfini)");
  }
  SUBCASE("content_filter") {
    a.finish_reason = "content_filter";
    CHECK(CheckBothForms(a)["incomplete_details"] == json{{"reason", "content_filter"}});
  }
  SUBCASE("other finish reasons, or none, are completed") {
    for (json reason : {json("stop"), json("tool_calls"), json("abort"), json(nullptr)}) {
      a.finish_reason = reason;
      json t = Translate(ChatBody(a));
      CHECK(t["status"] == "completed");
      CHECK(t["incomplete_details"].is_null());
      CHECK(t["output"][1]["status"] == "completed");
    }
  }
}

TEST_CASE("responses response: usage counts cached tokens inside input_tokens") {
  Answer a;
  a.content = "ok";
  a.usage = Usage(100, 5, 64);
  CHECK(CheckBothForms(a)["usage"] == ResponsesUsage(100, 64, 5));

  SUBCASE("reasoning tokens when the engine counts them") {
    a.usage["completion_tokens_details"] = {{"reasoning_tokens", 3}};
    CHECK(CheckBothForms(a)["usage"] == ResponsesUsage(100, 64, 5, 3));
  }
  SUBCASE("no usage: the proxy's prompt count and no output tokens") {
    a.usage = nullptr;
    CHECK(CheckBothForms(a)["usage"] == ResponsesUsage(7, 0, 0));
  }
  SUBCASE("null details, no prompt_tokens, more cached than prompt") {
    a.usage = {{"completion_tokens", 2}, {"prompt_tokens_details", nullptr}};
    CHECK(CheckBothForms(a)["usage"] == ResponsesUsage(7, 0, 2));
    a.usage = Usage(10, 2, 50);
    CHECK(CheckBothForms(a)["usage"] == ResponsesUsage(10, 10, 2));
  }
}

TEST_CASE("responses response: request fields are echoed, with defaults") {
  ResponsesTranslateOptions options = Options();
  options.request_echo = {{"instructions", "Be brief."},
                          {"tools", json::array({{{"type", "function"}, {"name", "get_weather"}}})},
                          {"tool_choice", "required"},
                          {"parallel_tool_calls", false},
                          {"temperature", 0.5},
                          {"store", true},
                          {"text", nullptr},
                          {"prompt_cache_key", "session-1"},
                          {"id", "resp_evil"},
                          {"status", "failed"},
                          {"output_text", "x"}};
  Answer a;
  a.content = "ok";
  json r = CheckBothForms(a, options);
  CHECK(r["id"] == "resp_t1");
  CHECK(r["status"] == "completed");
  CHECK(r["instructions"] == "Be brief.");
  CHECK(r["tools"] == options.request_echo["tools"]);
  CHECK(r["tool_choice"] == "required");
  CHECK(r["parallel_tool_calls"] == false);
  CHECK(r["temperature"] == 0.5);
  CHECK(r["store"] == true);
  CHECK(r["text"] == json{{"format", {{"type", "text"}}}});  // null takes the default
  CHECK(r["top_p"].is_null());
  CHECK(r["prompt_cache_key"] == "session-1");
  CHECK(!r.contains("output_text"));
  // The stream's first events echo them too.
  std::vector<Ev> events = Events(RunStream(ChatStream(a), Split::kWhole, options));
  CHECK(events[0].data["response"]["instructions"] == "Be brief.");
  CHECK(events[0].data["response"]["id"] == "resp_t1");
}

TEST_CASE("responses response: an empty answer has no items") {
  Answer a;
  json r = CheckBothForms(a);
  CHECK(r["output"] == json::array());
  CHECK(r["status"] == "completed");
}

TEST_CASE("responses response: malformed whole answers are errors") {
  Answer ok;
  ok.content = "x";
  json good = json::parse(ChatBody(ok));
  auto error_of = [](const std::string& body) {
    std::string out;
    core::Status st = api::TranslateChatToResponse(body, Options(), &out);
    CHECK(!st.ok());
    CHECK(!st.message().empty());
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
  auto with_choice = [&](const std::function<void(json&)>& edit) {
    json body = good;
    edit(body["choices"][0]);
    return error_of(body.dump());
  };
  with_choice([](json& c) { c.erase("message"); });
  with_choice([](json& c) { c["message"] = "hi"; });
  with_choice([](json& c) { c["message"]["content"] = 5; });
  with_choice([](json& c) { c["message"]["content"] = json::array({{{"type", "text"}, {"text", "x"}}}); });
  with_choice([](json& c) { c["message"]["reasoning_content"] = json::array(); });
  with_choice([](json& c) { c["finish_reason"] = 1; });
  with_choice([](json& c) { c["index"] = 1; });
  with_choice([](json& c) { c["message"]["tool_calls"] = "f"; });
  with_choice([](json& c) { c["message"]["tool_calls"] = json::array({ToolCall("c", "", "{}")}); });
  with_choice([](json& c) { c["message"]["tool_calls"] = json::array({json{{"id", "c"}}}); });
  with_choice([](json& c) { c["message"]["tool_calls"] = json::array({7}); });
  with_choice([](json& c) {
    c["message"]["tool_calls"] = json::array({ToolCall("c", "f", "{}")});
    c["message"]["tool_calls"][0]["function"]["arguments"] = 12;
  });
  with_choice([](json& c) {
    c["message"]["tool_calls"] = json::array({ToolCall("c", "f", "{}")});
    c["message"]["tool_calls"][0]["id"] = 3;
  });
  {
    json body = good;
    body["usage"] = {{"prompt_tokens", -1}};
    error_of(body.dump());
    body["usage"] = {{"prompt_tokens", "many"}};
    error_of(body.dump());
    body["usage"] = {{"prompt_tokens_details", 5}};
    error_of(body.dump());
    body["usage"] = "lots";
    error_of(body.dump());
  }
  error_of(std::string(100000, '[') + std::string(100000, ']'));
  // Invalid UTF-8 is malformed JSON, never a throw.
  error_of("{\"choices\":[{\"message\":{\"content\":\"\xff\"}}]}");
}

// ---- streams ----

TEST_CASE("responses response: stream events, exact") {
  Answer a;
  a.content = "Hi";
  a.usage = Usage(7, 2, 4);
  std::string sse = ": keep-alive\n\nevent: x\n" + Event(Chunk({{"role", "assistant"}, {"content", ""}})) +
                    Event(Chunk({{"content", "H"}})) + Event(Chunk({{"content", "i"}})) +
                    Event(Chunk(json::object(), "stop")) + Event(UsageChunk(a.usage)) + "data: [DONE]\n\n";
  auto event = [](const std::string& type, int seq, const std::string& rest) {
    return "event: " + type + "\ndata: {\"type\":\"" + type + "\",\"sequence_number\":" + std::to_string(seq) + rest +
           "}\n\n";
  };
  const std::string item = R"("item_id":"msg_t1_0","output_index":0,"content_index":0)";
  const std::string part = R"({"type":"output_text","text":"Hi","annotations":[],"logprobs":[]})";
  const std::string done_item =
      R"({"id":"msg_t1_0","type":"message","role":"assistant","status":"completed","content":[)" + part + "]}";
  const std::string in_progress = ResponseText("in_progress", "null", "[]", "null");
  std::string expected =
      event("response.created", 0, ",\"response\":" + in_progress) +
      event("response.in_progress", 1, ",\"response\":" + in_progress) +
      event("response.output_item.added", 2,
            R"(,"output_index":0,"item":{"id":"msg_t1_0","type":"message","role":"assistant","status":"in_progress","content":[]})") +
      event("response.content_part.added", 3,
            "," + item + R"(,"part":{"type":"output_text","text":"","annotations":[],"logprobs":[]})") +
      event("response.output_text.delta", 4, "," + item + R"(,"delta":"H","logprobs":[])") +
      event("response.output_text.delta", 5, "," + item + R"(,"delta":"i","logprobs":[])") +
      event("response.output_text.done", 6, "," + item + R"(,"text":"Hi","logprobs":[])") +
      event("response.content_part.done", 7, "," + item + ",\"part\":" + part) +
      event("response.output_item.done", 8, R"(,"output_index":0,"item":)" + done_item) +
      event("response.completed", 9,
            ",\"response\":" +
                ResponseText("completed", "null", "[" + done_item + "]",
                             R"({"input_tokens":7,"input_tokens_details":{"cached_tokens":4,"cache_write_tokens":0},)"
                             R"("output_tokens":2,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":9})"));
  CHECK(RunStream(sse) == expected);
  CHECK(RunStream(sse, Split::kByteByByte) == expected);
  // The final object is the whole translation of the same answer.
  CHECK(Assemble(expected) == Translate(ChatBody(a)));
}

TEST_CASE("responses response: stream event order for reasoning and a tool call") {
  Answer a;
  a.reasoning = "r";
  a.content = "c";
  a.tool_calls = json::array({ToolCall("call_1", "f", "{}")});
  a.finish_reason = "tool_calls";
  std::vector<std::string> names;
  for (const Ev& e : Events(RunStream(ChatStream(a)))) names.push_back(e.name);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done",
      "response.completed"};
  CHECK(names == expected);
}

TEST_CASE("responses response: streams assemble into the whole response, however cut") {
  std::mt19937 rng(11);
  const std::vector<std::string> texts = {"", "a", "Grüße, 世界! 😀", "line\nbreak \"quoted\" \\ back"};
  for (int round = 0; round < 40; ++round) {
    Answer a;
    a.reasoning = texts[rng() % texts.size()];
    a.content = texts[rng() % texts.size()];
    for (size_t n = rng() % 3, i = 0; i < n; ++i) {
      a.tool_calls.push_back(ToolCall(rng() % 4 ? "call_" + std::to_string(i) : "", "f" + std::to_string(i),
                                      json{{"text", texts[rng() % texts.size()]}, {"n", i}}.dump()));
    }
    const json finishes[] = {"stop", "length", "tool_calls", nullptr};
    a.finish_reason = finishes[rng() % 4];
    if (rng() % 3 == 0) a.usage = rng() % 2 ? json(nullptr) : Usage(50, 9, 32);
    INFO("round " << round);
    CheckBothForms(a);
  }
}

TEST_CASE("responses response: a kind that comes back opens a new item") {
  std::string sse = Event(Chunk({{"content", "a"}})) + Event(Chunk({{"reasoning_content", "r"}})) +
                    Event(Chunk({{"content", "b"}})) + Event(Chunk(json::object(), "stop")) + "data: [DONE]\n\n";
  json r = Assemble(RunStream(sse));
  REQUIRE(r["output"].size() == 3);
  CHECK(r["output"][0]["id"] == "msg_t1_0");
  CHECK(r["output"][1]["id"] == "rs_t1_1");
  CHECK(r["output"][2]["id"] == "msg_t1_2");
  CHECK(r["output"][2]["content"][0]["text"] == "b");
}

TEST_CASE("responses response: stream endings") {
  Answer a;
  a.content = "done";
  SUBCASE("no [DONE] after the usage chunk, or after the finish: completed at Finish") {
    CHECK(Assemble(RunStream(ChatStream(a, 3, /*done=*/false))) == Translate(ChatBody(a)));
    a.usage = nullptr;
    CHECK(Assemble(RunStream(ChatStream(a, 3, /*done=*/false))) == Translate(ChatBody(a)));
  }
  SUBCASE("the usage chunk ends the response; [DONE] passes on nothing") {
    std::string out = RunStream(ChatStream(a));
    CHECK(Events(out).back().name == "response.completed");
    CHECK(out.find("[DONE]") == std::string::npos);
  }
  SUBCASE("no usage chunk: completed at [DONE], with the proxy's count") {
    a.usage = nullptr;
    CHECK(Assemble(RunStream(ChatStream(a)))["usage"] == ResponsesUsage(7, 0, 0));
  }
  SUBCASE("usage riding on the finish chunk (llama.cpp)") {
    json finish = Chunk(json::object(), "stop");
    finish["usage"] = Usage(9, 1, 2);
    std::string sse = Event(Chunk({{"content", "done"}})) + Event(finish) + "data: [DONE]\n\n";
    CHECK(Assemble(RunStream(sse))["usage"] == ResponsesUsage(9, 2, 1));
  }
  SUBCASE("[DONE] alone is still a whole, empty response") {
    json r = Assemble(RunStream("data: [DONE]\n\n"));
    CHECK(r["status"] == "completed");
    CHECK(r["output"] == json::array());
  }
  SUBCASE("deltas after the finish and after the end are dropped") {
    std::string sse = Event(Chunk({{"content", "done"}}, "stop")) + Event(Chunk({{"content", "more"}})) +
                      "data: [DONE]\n\ndata: {\"late\":1}\n\n";
    std::string out = RunStream(sse);
    CHECK(Assemble(out)["output"][0]["content"][0]["text"] == "done");
    CHECK(out.find("more") == std::string::npos);
  }
  SUBCASE("a stream cut off before its finish ends in response.failed") {
    std::string out = RunStream(Event(Chunk({{"content", "do"}})));
    std::vector<Ev> events = Events(out);
    REQUIRE(events.size() == 6);  // created, in_progress, item added, part added, delta, failed
    json r = Assemble(out);
    CHECK(r["error"]["message"] == "the engine's stream ended before its answer did");
    CHECK(r["usage"].is_null());
    REQUIRE(r["output"].size() == 1);
    CHECK(r["output"][0]["status"] == "incomplete");
    CHECK(r["output"][0]["content"][0]["text"] == "do");
    CHECK(out.find("response.completed") == std::string::npos);
    std::vector<Ev> empty = Events(RunStream(""));
    REQUIRE(empty.size() == 3);
    CHECK(empty[2].name == "response.failed");
  }
  SUBCASE("an unterminated last event still counts") {
    std::string sse = Event(Chunk({{"content", "done"}}, "stop")) + "data: [DONE]";
    CHECK(Assemble(RunStream(sse))["status"] == "completed");
  }
}

TEST_CASE("responses response: an engine error event becomes response.failed and ends the stream") {
  std::string sse = Event(Chunk({{"content", "partial"}})) +
                    R"(data: {"error":{"message":"out of KV cache","type":"InternalServerError","code":500}})" "\n\n" +
                    Event(Chunk({{"content", "more"}})) + "data: [DONE]\n\n";
  std::string out = RunStream(sse, Split::kByteByByte);
  CHECK(out == RunStream(sse));
  std::vector<Ev> events = Events(out);
  REQUIRE(!events.empty());
  CHECK(events.back().name == "response.failed");
  json r = Assemble(out);
  CHECK(r["status"] == "failed");
  CHECK(r["error"] == json{{"code", "server_error"}, {"message", "out of KV cache"}});
  REQUIRE(r["output"].size() == 1);
  CHECK(r["output"][0]["content"][0]["text"] == "partial");
  CHECK(out.find("more") == std::string::npos);
  CHECK(out.find("response.completed") == std::string::npos);

  SUBCASE("an error event first, and an error that is a string") {
    std::vector<Ev> only = Events(RunStream(R"(data: {"error":"boom"})" "\n\n"));
    REQUIRE(only.size() == 3);
    CHECK(only[2].data["response"]["error"]["message"] == "boom");
    CHECK(only[2].data["response"]["output"] == json::array());
  }
  SUBCASE("an error without a message keeps its JSON") {
    std::vector<Ev> only = Events(RunStream(R"(data: {"error":{"code":1}})" "\n\n"));
    CHECK(only.back().data["response"]["error"]["message"] == R"({"code":1})");
  }
}

TEST_CASE("responses response: malformed streams return false, and stay failed") {
  auto fails = [](const std::string& sse) {
    ResponsesStreamTranslator translator(Options());
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
  fails(R"(data: {"choices":[{"index":0,"delta":{"reasoning":[]}}]})" "\n\n");
  fails(R"(data: {"choices":[{"index":0,"delta":"x"}]})" "\n\n");
  fails(R"(data: {"choices":[7]})" "\n\n");
  fails(R"(data: {"choices":[{"index":0,"delta":{},"finish_reason":7}]})" "\n\n");
  fails(R"(data: {"choices":[],"usage":{"prompt_tokens":"many"}})" "\n\n");
  fails(R"(data: {"choices":[],"usage":{"completion_tokens_details":[]}})" "\n\n");
  fails("data: " + std::string(300, '[') + std::string(300, ']') + "\n\n");
  fails("data: {\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}\n\n");
  auto call = [](json entry) { return Event(Chunk({{"tool_calls", json::array({std::move(entry)})}})); };
  CHECK(fails(call({{"index", 0}, {"function", {{"arguments", "{}"}}}})).find("name") != std::string::npos);
  CHECK(fails(call({{"index", 0}, {"id", "a"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}) +
              call({{"index", 1}, {"id", "b"}, {"function", {{"name", "g"}, {"arguments", "{}"}}}}) +
              call({{"index", 0}, {"function", {{"arguments", " "}}}}))
            .find("resumed") != std::string::npos);
  fails(call({{"index", -1}, {"id", "a"}, {"function", {{"name", "f"}}}}));
  fails(call({{"index", "0"}, {"id", "a"}, {"function", {{"name", "f"}}}}));
  fails(call({{"index", 0}, {"id", "a"}, {"function", "f"}}));
  fails(call({{"index", 0}, {"id", "a"}, {"function", {{"name", "f"}, {"arguments", json::object()}}}}));
  fails(Event(Chunk({{"tool_calls", "f"}})));
}

TEST_CASE("responses response: tool call deltas without an index continue the open call") {
  std::string sse = Event(Chunk({{"tool_calls", json::array({{{"id", "a"}, {"function", {{"name", "f"}, {"arguments", "{\"x\""}}}}})}})) +
                    Event(Chunk({{"tool_calls", json::array({{{"function", {{"arguments", ":1}"}}}}})}})) +
                    Event(Chunk({{"tool_calls", json::array({{{"id", "b"}, {"function", {{"name", "g"}}}}})}})) +
                    Event(Chunk(json::object(), "tool_calls")) + "data: [DONE]\n\n";
  json r = Assemble(RunStream(sse));
  REQUIRE(r["output"].size() == 2);
  CHECK(r["output"][0]["arguments"] == "{\"x\":1}");
  CHECK(r["output"][0]["call_id"] == "a");
  CHECK(r["output"][1]["call_id"] == "b");
  CHECK(r["output"][1]["arguments"] == "");
}

TEST_CASE("responses response: over-long lines and output are refused") {
  const std::string mib(size_t{1} << 20, 'a');
  SUBCASE("one SSE line over 64 MiB") {
    ResponsesStreamTranslator translator(Options());
    std::string out;
    bool ok = translator.Feed("data: ", &out);
    for (int i = 0; ok && i < 65; ++i) ok = translator.Feed(mib, &out);
    CHECK(!ok);
    CHECK(translator.error().find("64 MiB") != std::string::npos);
  }
  SUBCASE("the answer's text over 64 MiB in all, in events of 1 MiB") {
    ResponsesStreamTranslator translator(Options());
    std::string out;
    const std::string event = Event(Chunk({{"content", mib}}));
    bool ok = true;
    for (int i = 0; ok && i < 65; ++i) {
      out.clear();  // what went to the client is gone
      ok = translator.Feed(event, &out);
    }
    CHECK(!ok);
    CHECK(translator.error().find("output is over 64 MiB") != std::string::npos);
  }
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

TEST_CASE("responses response: over the chat translator of a completions answer") {
  const json usage = Usage(7, 1, 3);
  const json expected = json::parse(ResponseText(
      "completed", "null",
      R"([{"id":"msg_t1_0","type":"message","role":"assistant","status":"completed",)"
      R"("content":[{"type":"output_text","text":"Hello","annotations":[],"logprobs":[]}]}])",
      ResponsesUsage(7, 3, 1).dump()));
  SUBCASE("whole") {
    std::string body = json{{"id", "cmpl-1"}, {"object", "text_completion"}, {"created", 1}, {"model", "engine"},
                            {"choices", json::array({{{"index", 0}, {"text", "Hello"}, {"logprobs", nullptr},
                                                      {"finish_reason", "stop"}}})},
                            {"usage", usage}}
                           .dump();
    for (size_t step : {size_t{1}, size_t{7}, body.size()}) {
      auto tr = api::MakeResponsesTranslator(api::MakeChatTranslator(ChatOptions(), false, 1 << 20), Options(),
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
      auto tr = api::MakeResponsesTranslator(api::MakeChatTranslator(ChatOptions(), true, 1 << 20), Options(),
                                             /*stream=*/true, 1 << 20);
      CHECK(tr->streaming());
      std::string out = RunTranslator(*tr, sse, step);
      CHECK(Assemble(out) == expected);
      if (first.empty()) first = out;
      CHECK(out == first);
    }
  }
}

TEST_CASE("responses response: the translator without an inner stage, and its bounds") {
  Answer a;
  a.content = "Hi";
  std::string body = ChatBody(a);
  auto whole = api::MakeResponsesTranslator(nullptr, Options(), false, body.size());
  CHECK(json::parse(RunTranslator(*whole, body, 3)) == Translate(body));

  auto small = api::MakeResponsesTranslator(nullptr, Options(), false, body.size() - 1);
  std::string out;
  CHECK(!small->Feed(body, true, &out));
  CHECK(small->error().find("larger") != std::string::npos);
  CHECK(!small->Feed("", true, &out));

  auto broken = api::MakeResponsesTranslator(nullptr, Options(), false, 100);
  CHECK(!broken->Feed("{}", true, &out));
  CHECK(!broken->error().empty());

  auto stream = api::MakeResponsesTranslator(nullptr, Options(), true, 0);
  CHECK(Assemble(RunTranslator(*stream, ChatStream(a), 4)) == Translate(body));
  auto bad_stream = api::MakeResponsesTranslator(nullptr, Options(), true, 0);
  CHECK(!bad_stream->Feed("data: nope\n\n", false, &out));
  CHECK(!bad_stream->error().empty());
  CHECK(!bad_stream->Feed("", true, &out));
}

}  // namespace
}  // namespace toktier::test
