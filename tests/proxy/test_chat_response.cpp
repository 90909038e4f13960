// api/chat_response: completions -> chat completions, bodies and streams.
// Every text case is also streamed (fed whole, byte by byte, and in random
// pieces) and the stream's deltas must add up to the non-streaming message.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "api/api.h"

namespace toktier::test {
namespace {

using nlohmann::json;
using api::ChatStreamTranslator;
using api::ChatTranslateOptions;
using api::ToolCallFormat;

const std::string kDsCallsBegin = "<｜tool▁calls▁begin｜>";
const std::string kDsCallsEnd = "<｜tool▁calls▁end｜>";
const std::string kDsCallBegin = "<｜tool▁call▁begin｜>";
const std::string kDsCallEnd = "<｜tool▁call▁end｜>";
const std::string kDsSep = "<｜tool▁sep｜>";

ChatTranslateOptions Options(ToolCallFormat tools = ToolCallFormat::kNone, bool reasoning = false) {
  ChatTranslateOptions options;
  options.id = "chatcmpl-t1";
  options.created = 42;
  options.model = "client-model";
  options.tools = tools;
  options.reasoning = reasoning;
  return options;
}

json EngineChoice(const std::string& text, const char* finish_reason, int index = 0) {
  return {{"index", index}, {"text", text}, {"logprobs", nullptr},
          {"finish_reason", finish_reason ? json(finish_reason) : json(nullptr)}};
}

std::string CompletionJson(const json& choices) {
  return json{{"id", "cmpl-1"},
              {"object", "text_completion"},
              {"created", 1},
              {"model", "engine-model"},
              {"choices", choices},
              {"usage", {{"prompt_tokens", 5}, {"completion_tokens", 1}, {"total_tokens", 6}}}}
      .dump();
}

json Translate(const std::string& completion, const ChatTranslateOptions& options) {
  std::string chat;
  core::Status st = api::TranslateCompletion(completion, options, &chat);
  INFO(st.message());
  REQUIRE(st.ok());
  return json::parse(chat);
}

// The one choice of the chat response for `text`.
json ChatChoice(const std::string& text, const ChatTranslateOptions& options, const char* finish = "stop") {
  json chat = Translate(CompletionJson(json::array({EngineChoice(text, finish)})), options);
  REQUIRE(chat["choices"].size() == 1);
  return chat["choices"][0];
}

json Call(const std::string& id, const std::string& name, const std::string& arguments) {
  return {{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", arguments}}}};
}

// ---- streams ----

std::string Event(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

json EngineChunk(const json& choices) {
  return {{"id", "cmpl-1"}, {"object", "text_completion"}, {"created", 1}, {"model", "engine-model"},
          {"choices", choices}};
}

// Token-like pieces of whole code points, as an engine's detokenizer emits
// them: 1..max_code_points each.
std::vector<std::string> TokenPieces(const std::string& text, std::mt19937& rng, int max_code_points) {
  std::vector<std::string> pieces;
  std::uniform_int_distribution<int> count(1, max_code_points);
  size_t i = 0;
  while (i < text.size()) {
    std::string piece;
    for (int n = count(rng); n > 0 && i < text.size(); --n) {
      do piece += text[i++];
      while (i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80);
    }
    pieces.push_back(piece);
  }
  return pieces;
}

// The engine's SSE for one choice: its pieces, a finish chunk, a usage chunk, [DONE].
std::string EngineStream(const std::vector<std::string>& pieces, const char* finish, bool usage = true,
                         bool done = true) {
  std::string sse;
  for (const std::string& piece : pieces) sse += Event(EngineChunk(json::array({EngineChoice(piece, nullptr)})));
  if (finish) sse += Event(EngineChunk(json::array({EngineChoice("", finish)})));
  if (usage) {
    json chunk = EngineChunk(json::array());
    chunk["usage"] = {{"prompt_tokens", 5}, {"completion_tokens", 3}, {"total_tokens", 8}};
    sse += Event(chunk);
  }
  if (done) sse += "data: [DONE]\n\n";
  return sse;
}

enum class Split { kWhole, kByteByByte, kRandom };

std::string RunStream(const std::string& sse, const ChatTranslateOptions& options, Split split,
                      unsigned seed = 7) {
  ChatStreamTranslator translator(options);
  std::string out;
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> size(1, 40);
  for (size_t i = 0; i < sse.size();) {
    size_t n = split == Split::kWhole ? sse.size() : split == Split::kByteByByte ? 1 : size(rng);
    n = std::min(n, sse.size() - i);
    bool ok = translator.Feed(std::string_view(sse).substr(i, n), &out);
    INFO(translator.error());
    REQUIRE(ok);
    i += n;
  }
  REQUIRE(translator.Finish(&out));
  return out;
}

struct StreamedChoice {
  std::string content;
  std::string reasoning;
  json tool_calls = json::array();  // without their "index"
  json finish_reason;               // of the finish event; null when none
  int events = 0;
};

struct Streamed {
  std::map<int, StreamedChoice> choices;
  json usage;
  bool done = false;
};

// Parses the translated SSE and checks its framing: every event a chunk with
// the options' envelope, a choice's first delta the role, nothing for a
// choice after its finish event, [DONE] last.
Streamed Reassemble(const std::string& sse, const ChatTranslateOptions& options) {
  Streamed streamed;
  size_t pos = 0;
  while (pos < sse.size()) {
    REQUIRE(!streamed.done);
    size_t end = sse.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    std::string event = sse.substr(pos, end - pos);
    pos = end + 2;
    REQUIRE(event.starts_with("data: "));
    std::string data = event.substr(6);
    if (data == "[DONE]") {
      streamed.done = true;
      continue;
    }
    json chunk = json::parse(data);
    CHECK(chunk["id"] == options.id);
    CHECK(chunk["object"] == "chat.completion.chunk");
    CHECK(chunk["created"] == options.created);
    CHECK(chunk["model"] == options.model);
    if (chunk["choices"].empty()) {
      REQUIRE(chunk.contains("usage"));
      streamed.usage = chunk["usage"];
      continue;
    }
    CHECK(streamed.usage.is_null());  // usage comes after the choices' events
    REQUIRE(chunk["choices"].size() == 1);
    const json& choice = chunk["choices"][0];
    StreamedChoice& out = streamed.choices[choice["index"].get<int>()];
    CHECK(out.finish_reason.is_null());
    CHECK(choice["logprobs"].is_null());
    const json& delta = choice["delta"];
    if (out.events++ == 0) {
      CHECK(delta == json{{"role", "assistant"}, {"content", ""}});
      CHECK(choice["finish_reason"].is_null());
      continue;
    }
    CHECK(!delta.contains("role"));
    if (!choice["finish_reason"].is_null()) {
      CHECK(delta == json::object());
      out.finish_reason = choice["finish_reason"];
      continue;
    }
    REQUIRE(delta.size() == 1);
    if (delta.contains("content")) {
      CHECK(!delta["content"].get<std::string>().empty());
      out.content += delta["content"].get<std::string>();
    } else if (delta.contains("reasoning_content")) {
      out.reasoning += delta["reasoning_content"].get<std::string>();
    } else {
      REQUIRE(delta["tool_calls"].size() == 1);
      json call = delta["tool_calls"][0];
      CHECK(call["index"] == out.tool_calls.size());
      call.erase("index");
      out.tool_calls.push_back(call);
    }
  }
  return streamed;
}

// The non-streaming choice, as a stream would add it up.
void CheckSameAsMessage(const StreamedChoice& streamed, const json& chat_choice) {
  const json& message = chat_choice["message"];
  CHECK(streamed.content == (message["content"].is_null() ? "" : message["content"].get<std::string>()));
  CHECK(streamed.reasoning == message.value("reasoning_content", ""));
  CHECK(streamed.tool_calls == message.value("tool_calls", json::array()));
  CHECK(streamed.finish_reason == chat_choice["finish_reason"]);
}

struct TextCase {
  const char* name;
  ToolCallFormat tools;
  bool reasoning;
  std::string text;
  const char* finish;
};

std::vector<TextCase> TextCases() {
  const std::string weather = R"({"name": "get_weather", "arguments": {"city": "Paris"}})";
  const std::string ds_call = kDsCallBegin + "function" + kDsSep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" +
                              kDsCallEnd;
  const std::string ds_call2 = kDsCallBegin + "function" + kDsSep + "get_time\n```json\n{\"tz\": \"CET\"}\n```" +
                               kDsCallEnd;
  return {
      {"plain", ToolCallFormat::kNone, false, "Hello, world! How are you?\n", "stop"},
      {"plain length", ToolCallFormat::kNone, false, "Hello <tool_call> is kept", "length"},
      {"think closed", ToolCallFormat::kNone, true, "<think>\nLet me think.\n</think>\n\nThe answer is 4.", "stop"},
      {"think unclosed", ToolCallFormat::kNone, true, "  <think>\nstill thinking about </thi", "length"},
      {"only </think>", ToolCallFormat::kNone, true, "Opened in the prompt.\n</think>\n\nAnswer.", "stop"},
      {"reasoning on, none there", ToolCallFormat::kNone, true, "<thinking> is not a marker", "stop"},
      {"hermes one", ToolCallFormat::kHermes, false, "<tool_call>\n" + weather + "\n</tool_call>", "stop"},
      {"hermes two", ToolCallFormat::kHermes, false,
       "Let me check.\n<tool_call>\n" + weather +
           "\n</tool_call>\n<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n",
       "stop"},
      {"hermes malformed", ToolCallFormat::kHermes, false,
       "<tool_call>\n{not json}\n</tool_call>\nSorry.\n<tool_call>\n" + weather + "\n</tool_call>", "stop"},
      {"hermes unclosed", ToolCallFormat::kHermes, false, "Calling <tool_call>\n{\"name\": \"get_", "length"},
      {"hermes with think", ToolCallFormat::kHermes, true,
       "<think>\nI need the weather.\n</think>\n\n<tool_call>\n" + weather + "\n</tool_call>", "stop"},
      {"hermes non-ASCII", ToolCallFormat::kHermes, false, "Grüße, 世界! 😀 <toolbox> ok <tool_cal", "stop"},
      {"llama3 one", ToolCallFormat::kLlama3Json, false,
       R"({"name": "get_weather", "parameters": {"city": "Paris"}})", "stop"},
      {"llama3 two", ToolCallFormat::kLlama3Json, false,
       " {\"name\": \"a\", \"parameters\": {\"s\": \"x;y\"}}; {\"name\": \"b\", \"parameters\": {}}", "stop"},
      {"llama3 text", ToolCallFormat::kLlama3Json, false, "  The weather is {nice}.", "stop"},
      {"llama3 brace text", ToolCallFormat::kLlama3Json, false, "{ this is not json }", "stop"},
      {"deepseek two", ToolCallFormat::kDeepSeekV3, false,
       "Checking.\n" + kDsCallsBegin + ds_call + "\n" + ds_call2 + kDsCallsEnd, "stop"},
      {"deepseek broken", ToolCallFormat::kDeepSeekV3, false,
       "A" + kDsCallsBegin + kDsCallBegin + "garbage" + kDsCallEnd + kDsCallsEnd + "B", "stop"},
  };
}

}  // namespace

TEST_CASE("chat response: plain content, exact body") {
  std::string completion =
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"Hello",)"
      R"("logprobs":null,"finish_reason":"stop","stop_reason":null,"prompt_token_ids":[1,2]}],)"
      R"("usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6},"timings":{"x":1}})";
  std::string chat;
  REQUIRE(api::TranslateCompletion(completion, Options(), &chat).ok());
  CHECK(chat ==
        R"({"id":"chatcmpl-t1","object":"chat.completion","created":42,"model":"client-model","choices":[{"index":0,)"
        R"("message":{"role":"assistant","content":"Hello"},"logprobs":null,"finish_reason":"stop"}],)"
        R"("usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}})");
}

TEST_CASE("chat response: n=2 choices and usage copied as is") {
  std::string completion =
      R"({"choices":[{"index":0,"text":"one","finish_reason":"stop"},{"index":1,"text":"two","finish_reason":"length"}],)"
      R"("usage":{"total_tokens":9,"prompt_tokens":5,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}})";
  json chat = Translate(completion, Options());
  REQUIRE(chat["choices"].size() == 2);
  CHECK(chat["choices"][0]["index"] == 0);
  CHECK(chat["choices"][0]["message"]["content"] == "one");
  CHECK(chat["choices"][1]["index"] == 1);
  CHECK(chat["choices"][1]["message"]["content"] == "two");
  CHECK(chat["choices"][1]["finish_reason"] == "length");
  std::string raw;
  REQUIRE(api::TranslateCompletion(completion, Options(), &raw).ok());
  CHECK(raw.ends_with(
      R"("usage":{"total_tokens":9,"prompt_tokens":5,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2}}})"));
}

TEST_CASE("chat response: malformed engine bodies") {
  std::string chat;
  for (const char* bad : {"", "{", "[]", R"({"choices":{}})", R"({"object":"text_completion"})",
                          R"({"choices":[1]})", R"({"choices":[{"text":5}]})", R"({"choices":[{"index":-1}]})",
                          R"({"choices":[{"text":"a","finish_reason":3}]})"}) {
    INFO(bad);
    core::Status st = api::TranslateCompletion(bad, Options(), &chat);
    CHECK(!st.ok());
    CHECK(!st.message().empty());
  }
}

TEST_CASE("chat response: reasoning") {
  auto options = Options(ToolCallFormat::kNone, true);
  json closed = ChatChoice("<think>\nstep 1\n</think>\n\nThe answer.", options)["message"];
  CHECK(closed == json{{"role", "assistant"}, {"content", "The answer."}, {"reasoning_content", "\nstep 1\n"}});

  json unclosed = ChatChoice("\n<think>still going", options, "length");
  CHECK(unclosed["message"] == json{{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "still going"}});
  CHECK(unclosed["finish_reason"] == "length");

  json only_close = ChatChoice("opened in the prompt</think>\n\nAnswer", options)["message"];
  CHECK(only_close == json{{"role", "assistant"}, {"content", "Answer"}, {"reasoning_content", "opened in the prompt"}});

  CHECK(ChatChoice("no reasoning here", options)["message"] ==
        json{{"role", "assistant"}, {"content", "no reasoning here"}});
  // Reasoning off: the markers are plain text.
  CHECK(ChatChoice("<think>x</think>y", Options())["message"]["content"] == "<think>x</think>y");
  // The prompt opened <think>: reasoning from the first byte even without </think>.
  options.think_open_in_prompt = true;
  CHECK(ChatChoice("all reasoning", options, "length")["message"] ==
        json{{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "all reasoning"}});
}

TEST_CASE("chat response: hermes tool calls") {
  auto options = Options(ToolCallFormat::kHermes);
  json one = ChatChoice("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                        options);
  CHECK(one["message"] == json{{"role", "assistant"},
                               {"content", nullptr},
                               {"tool_calls", {Call("call_t1_0", "get_weather", R"({"city":"Paris"})")}}});
  CHECK(one["finish_reason"] == "tool_calls");

  json two = ChatChoice(
      "Let me check.\n<tool_call>{\"name\":\"a\",\"arguments\":{\"k\":[1, 2]}}</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"raw\\\": true}\"}\n</tool_call>\n",
      options, "length");
  CHECK(two["message"] == json{{"role", "assistant"},
                               {"content", "Let me check."},
                               {"tool_calls", {Call("call_t1_0", "a", R"({"k":[1,2]})"),
                                               Call("call_t1_1", "b", R"({"raw": true})")}}});
  CHECK(two["finish_reason"] == "length");

  // A block that does not parse stays in the content; the next one is a call.
  json malformed = ChatChoice(
      "<tool_call>\n{not json}\n</tool_call>\nthen\n<tool_call>{\"name\":\"c\"}</tool_call> <tool_call>{\"x\":1",
      options);
  CHECK(malformed["message"]["content"] == "<tool_call>\n{not json}\n</tool_call>\nthen\n <tool_call>{\"x\":1");
  CHECK(malformed["message"]["tool_calls"] == json::array({Call("call_t1_0", "c", "{}")}));

  // No calls: the content is the text (trimmed), finish_reason untouched.
  json none = ChatChoice("\n  Just text.  \n", options);
  CHECK(none["message"] == json{{"role", "assistant"}, {"content", "Just text."}});
  CHECK(none["finish_reason"] == "stop");

  // Without a tool format the tags are text.
  CHECK(ChatChoice("<tool_call>{\"name\":\"c\"}</tool_call>", Options())["message"]["content"] ==
        "<tool_call>{\"name\":\"c\"}</tool_call>");
}

TEST_CASE("chat response: tool call ids per choice and without a response id") {
  auto options = Options(ToolCallFormat::kHermes);
  std::string text = "<tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>";
  json chat = Translate(CompletionJson(json::array({EngineChoice(text, "stop", 0), EngineChoice(text, "stop", 1)})),
                        options);
  CHECK(chat["choices"][0]["message"]["tool_calls"][0]["id"] == "call_t1_0");
  CHECK(chat["choices"][1]["message"]["tool_calls"][0]["id"] == "call_t1_1_0");
  options.id.clear();
  CHECK(ChatChoice(text, options)["message"]["tool_calls"][0]["id"] == "call_0");
}

TEST_CASE("chat response: llama3 JSON tool calls") {
  auto options = Options(ToolCallFormat::kLlama3Json);
  json one = ChatChoice(" {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}\n", options);
  CHECK(one["message"] == json{{"role", "assistant"},
                               {"content", nullptr},
                               {"tool_calls", {Call("call_t1_0", "get_weather", R"({"city":"Paris"})")}}});
  CHECK(one["finish_reason"] == "tool_calls");

  json two = ChatChoice(R"({"name": "a", "parameters": {"s": "x;y"}}; {"name": "b", "arguments": {}};)", options);
  CHECK(two["message"]["tool_calls"] ==
        json::array({Call("call_t1_0", "a", R"({"s":"x;y"})"), Call("call_t1_1", "b", "{}")}));

  CHECK(ChatChoice("The weather is nice.", options)["message"] ==
        json{{"role", "assistant"}, {"content", "The weather is nice."}});
  // JSON that is no call (no arguments), or one bad part: all plain content.
  CHECK(ChatChoice(R"({"name": "Bob", "age": 3})", options)["message"]["content"] == R"({"name": "Bob", "age": 3})");
  CHECK(ChatChoice(R"({"name": "a", "parameters": {}}; oops)", options)["message"]["content"] ==
        R"({"name": "a", "parameters": {}}; oops)");
}

TEST_CASE("chat response: DeepSeek-V3 tool calls") {
  auto options = Options(ToolCallFormat::kDeepSeekV3);
  std::string text = "Let me look." + kDsCallsBegin + kDsCallBegin + "function" + kDsSep +
                     "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + kDsCallEnd + "\n" + kDsCallBegin +
                     "function" + kDsSep + "get_time\n```json\n{\"tz\": \"CET\"}\n```" + kDsCallEnd + kDsCallsEnd;
  json two = ChatChoice(text, options);
  CHECK(two["message"] == json{{"role", "assistant"},
                               {"content", "Let me look."},
                               {"tool_calls", {Call("call_t1_0", "get_weather", R"({"city":"Paris"})"),
                                               Call("call_t1_1", "get_time", R"({"tz":"CET"})")}}});
  CHECK(two["finish_reason"] == "tool_calls");

  // V3.1's NAME<sep>ARGS, and a section the engine cut before calls-end.
  json v31 = ChatChoice(kDsCallsBegin + kDsCallBegin + "f" + kDsSep + "{\"a\": 1}" + kDsCallEnd, options);
  CHECK(v31["message"]["content"].is_null());
  CHECK(v31["message"]["tool_calls"] == json::array({Call("call_t1_0", "f", R"({"a":1})")}));

  std::string broken = "x" + kDsCallsBegin + "nonsense" + kDsCallsEnd + "y";
  CHECK(ChatChoice(broken, options)["message"] == json{{"role", "assistant"}, {"content", broken}});
}

TEST_CASE("chat response: streams add up to the non-streaming message") {
  for (const TextCase& text_case : TextCases()) {
    auto options = Options(text_case.tools, text_case.reasoning);
    json chat_choice = ChatChoice(text_case.text, options, text_case.finish);
    for (int max_code_points : {1, 4}) {
      std::mt19937 rng(11);
      std::string sse = EngineStream(TokenPieces(text_case.text, rng, max_code_points), text_case.finish);
      for (Split split : {Split::kWhole, Split::kByteByByte, Split::kRandom}) {
        INFO(text_case.name, " pieces<=", max_code_points, " split ", static_cast<int>(split));
        Streamed streamed = Reassemble(RunStream(sse, options, split), options);
        REQUIRE(streamed.choices.size() == 1);
        CheckSameAsMessage(streamed.choices[0], chat_choice);
        CHECK(streamed.usage == json{{"prompt_tokens", 5}, {"completion_tokens", 3}, {"total_tokens", 8}});
        CHECK(streamed.done);
      }
    }
  }
}

TEST_CASE("chat response: random marker soup streams like the body") {
  // Texts built from markers, their prefixes, JSON bits and multi-byte
  // characters: whatever the splitter makes of them, a stream must agree.
  const std::vector<std::string> kAtoms = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<tool", "</thi", "<", "\n", " ", "x", "é", "😀",
      R"({"name": "f", "arguments": {"a": 1}})", R"({"name": "g", "parameters": {}})", ";", "{", "}",
      kDsCallsBegin, kDsCallsEnd, kDsCallBegin + "function" + kDsSep + "h\n```json\n{}\n```" + kDsCallEnd,
      kDsCallBegin, "<｜tool"};
  std::mt19937 rng(2024);
  std::uniform_int_distribution<size_t> atom(0, kAtoms.size() - 1);
  std::uniform_int_distribution<int> length(0, 12);
  for (int round = 0; round < 80; ++round) {
    std::string text;
    for (int n = length(rng); n > 0; --n) text += kAtoms[atom(rng)];
    for (ToolCallFormat tools : {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
                                 ToolCallFormat::kDeepSeekV3}) {
      for (bool reasoning : {false, true}) {
        auto options = Options(tools, reasoning);
        const char* finish = round % 3 == 0 ? "length" : "stop";
        json chat_choice = ChatChoice(text, options, finish);
        std::string sse = EngineStream(TokenPieces(text, rng, 3), finish);
        INFO(text, " tools ", static_cast<int>(tools), " reasoning ", reasoning);
        Streamed streamed = Reassemble(RunStream(sse, options, Split::kRandom, round), options);
        CheckSameAsMessage(streamed.choices[0], chat_choice);
      }
    }
  }
}

TEST_CASE("chat response: stream with two interleaved choices") {
  auto options = Options(ToolCallFormat::kHermes);
  std::string texts[2] = {"First <tool_call>{\"name\":\"a\",\"arguments\":{}}</tool_call>", "Second answer"};
  std::mt19937 rng(3);
  std::vector<std::string> pieces[2] = {TokenPieces(texts[0], rng, 3), TokenPieces(texts[1], rng, 3)};
  std::string sse;
  for (size_t i = 0; i < std::max(pieces[0].size(), pieces[1].size()); ++i) {
    json choices = json::array();
    for (int c = 0; c < 2; ++c) {
      if (i < pieces[c].size()) choices.push_back(EngineChoice(pieces[c][i], nullptr, c));
    }
    sse += Event(EngineChunk(choices));
  }
  sse += Event(EngineChunk(json::array({EngineChoice("", "stop", 1), EngineChoice("", "stop", 0)})));
  sse += "data: [DONE]\n\n";
  json chat = Translate(CompletionJson(json::array({EngineChoice(texts[0], "stop", 0), EngineChoice(texts[1], "stop", 1)})),
                        options);
  for (Split split : {Split::kWhole, Split::kByteByByte, Split::kRandom}) {
    Streamed streamed = Reassemble(RunStream(sse, options, split), options);
    REQUIRE(streamed.choices.size() == 2);
    CheckSameAsMessage(streamed.choices[0], chat["choices"][0]);
    CheckSameAsMessage(streamed.choices[1], chat["choices"][1]);
    CHECK(streamed.choices[0].finish_reason == "tool_calls");
    CHECK(streamed.choices[1].finish_reason == "stop");
    CHECK(streamed.done);
  }
}

TEST_CASE("chat response: stream framing, exact events") {
  auto options = Options();
  std::string sse = ": keep-alive\n\nevent: x\ndata: " +
                    EngineChunk(json::array({EngineChoice("Hi", nullptr)})).dump() + "\n\n" +
                    EngineStream({}, "stop", /*usage=*/true);
  std::string out = RunStream(sse, options, Split::kWhole);
  std::string envelope = R"({"id":"chatcmpl-t1","object":"chat.completion.chunk","created":42,"model":"client-model",)";
  CHECK(out == "data: " + envelope +
                   R"("choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})"
                   "\n\ndata: " + envelope +
                   R"("choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]})"
                   "\n\ndata: " + envelope +
                   R"("choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]})"
                   "\n\ndata: " + envelope +
                   R"("choices":[],"usage":{"completion_tokens":3,"prompt_tokens":5,"total_tokens":8}})"
                   "\n\ndata: [DONE]\n\n");
}

TEST_CASE("chat response: stream with \\r\\n line endings") {
  auto options = Options(ToolCallFormat::kNone, true);
  std::string text = "<think>why</think>\n\nbecause";
  std::mt19937 rng(5);
  std::string sse = EngineStream(TokenPieces(text, rng, 2), "stop");
  std::string crlf;
  for (char c : sse) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  for (Split split : {Split::kWhole, Split::kByteByByte, Split::kRandom}) {
    Streamed streamed = Reassemble(RunStream(crlf, options, split), options);
    CheckSameAsMessage(streamed.choices[0], ChatChoice(text, options));
    CHECK(streamed.done);
  }
}

TEST_CASE("chat response: malformed streams return false") {
  std::string out;
  {
    ChatStreamTranslator translator(Options());
    CHECK(translator.Feed(Event(EngineChunk(json::array({EngineChoice("ok", nullptr)}))), &out));
    CHECK(!translator.Feed("data: {\"choices\": [\n\n", &out));
    CHECK(!translator.error().empty());
    CHECK(!translator.Feed("data: [DONE]\n\n", &out));  // stays failed
    CHECK(!translator.Finish(&out));
  }
  for (const char* bad : {"data: [1]\n\n", "data: {\"choices\": 3}\n\n", "data: {\"choices\": [{\"text\": 1}]}\n\n"}) {
    ChatStreamTranslator translator(Options());
    CHECK(!translator.Feed(bad, &out));
  }
  {
    // A data line over 16 MiB without a newline.
    ChatStreamTranslator translator(Options());
    std::string chunk(1 << 20, 'x');
    bool ok = translator.Feed("data: {\"choices\":[{\"text\":\"", &out);
    for (int i = 0; ok && i < 17; ++i) ok = translator.Feed(chunk, &out);
    CHECK(!ok);
  }
  {
    // A truncated last event at the end of the stream is malformed too.
    ChatStreamTranslator translator(Options());
    CHECK(translator.Feed("data: {\"choices\":[{\"te", &out));
    CHECK(!translator.Finish(&out));
  }
}

TEST_CASE("chat response: a marker split across engine pieces") {
  auto options = Options(ToolCallFormat::kHermes);
  std::vector<std::string> pieces = {"Sure <too", "l_call>{\"name\": \"a\", ", "\"arguments\": {}}</tool", "_call>"};
  std::string sse = EngineStream(pieces, "stop");
  ChatStreamTranslator translator(options);
  std::string out;
  // "Sure" goes out at once; " <too" waits.
  size_t first_event_end = sse.find("\n\n") + 2;
  REQUIRE(translator.Feed(sse.substr(0, first_event_end), &out));
  Streamed early = Reassemble(out, options);
  CHECK(early.choices[0].content == "Sure");
  REQUIRE(translator.Feed(sse.substr(first_event_end), &out));
  REQUIRE(translator.Finish(&out));
  Streamed streamed = Reassemble(out, options);
  CHECK(streamed.choices[0].content == "Sure");
  CHECK(streamed.choices[0].tool_calls == json::array({Call("call_t1_0", "a", "{}")}));
  CHECK(streamed.choices[0].finish_reason == "tool_calls");
}

TEST_CASE("chat response: a held prefix that is no marker is content") {
  auto options = Options(ToolCallFormat::kHermes);
  std::string sse = EngineStream({"a <tool", "box> b"}, nullptr, false, false);
  ChatStreamTranslator translator(options);
  std::string out;
  size_t first_event_end = sse.find("\n\n") + 2;
  REQUIRE(translator.Feed(sse.substr(0, first_event_end), &out));
  CHECK(Reassemble(out, options).choices[0].content == "a");
  REQUIRE(translator.Feed(sse.substr(first_event_end), &out));
  CHECK(Reassemble(out, options).choices[0].content == "a <toolbox> b");
  // The engine ended with no finish_reason and no [DONE]: text flushed, no finish event, no [DONE].
  REQUIRE(translator.Finish(&out));
  Streamed streamed = Reassemble(out, options);
  CHECK(streamed.choices[0].content == "a <toolbox> b");
  CHECK(streamed.choices[0].finish_reason.is_null());
  CHECK(!streamed.done);
  CHECK(!translator.saw_done());
}

TEST_CASE("chat response: [DONE] without finish_reason flushes held text before it") {
  auto options = Options(ToolCallFormat::kHermes);
  std::string out = RunStream(EngineStream({"a <tool"}, nullptr, false, true), options, Split::kByteByByte);
  Streamed streamed = Reassemble(out, options);  // fails on an event after [DONE]
  CHECK(streamed.choices[0].content == "a <tool");
  CHECK(streamed.choices[0].finish_reason.is_null());
  CHECK(streamed.done);
}

TEST_CASE("chat response: text after a choice's finish_reason is dropped") {
  auto options = Options();
  std::string sse = Event(EngineChunk(json::array({EngineChoice("done", "stop")}))) +
                    Event(EngineChunk(json::array({EngineChoice(" more", nullptr)}))) + "data: [DONE]\n\n";
  Streamed streamed = Reassemble(RunStream(sse, options, Split::kWhole), options);
  CHECK(streamed.choices[0].content == "done");
  CHECK(streamed.choices[0].finish_reason == "stop");
  CHECK(streamed.choices[0].events == 3);
}

TEST_CASE("chat response: non-ASCII split mid-character in the SSE bytes") {
  auto options = Options(ToolCallFormat::kHermes, true);
  std::string text = "<think>Überlegung: 東京 🌸</think>Antwort: 晴れ ☀️ <tool_cal";
  std::vector<std::string> pieces = {"<think>Ü", "berlegung: 東", "京 🌸</th", "ink>Antwort: 晴", "れ ☀️ <tool_cal"};
  std::string sse = EngineStream(pieces, "stop");
  json chat_choice = ChatChoice(text, options);
  CHECK(chat_choice["message"]["reasoning_content"] == "Überlegung: 東京 🌸");
  CHECK(chat_choice["message"]["content"] == "Antwort: 晴れ ☀️ <tool_cal");
  // Raw UTF-8 in the engine's JSON (not \u escapes), so byte feeding cuts characters.
  CHECK(sse.find("東") != std::string::npos);
  for (Split split : {Split::kByteByByte, Split::kRandom}) {
    for (unsigned seed : {1u, 2u, 3u}) {
      std::string out = RunStream(sse, options, split, seed);
      Streamed streamed = Reassemble(out, options);
      CheckSameAsMessage(streamed.choices[0], chat_choice);
    }
  }
}

TEST_CASE("chat response: reasoning streams before the answer arrives") {
  auto options = Options(ToolCallFormat::kNone, true);
  ChatStreamTranslator translator(options);
  std::string out;
  REQUIRE(translator.Feed(EngineStream({"<think>step one", " and two"}, nullptr, false, false), &out));
  CHECK(Reassemble(out, options).choices[0].reasoning == "step one and two");
  // Without <think> at the start the text may still be reasoning: held until </think> or the end.
  ChatStreamTranslator undecided(options);
  std::string held;
  REQUIRE(undecided.Feed(EngineStream({"maybe reasoning"}, nullptr, false, false), &held));
  CHECK(Reassemble(held, options).choices[0].content.empty());
  REQUIRE(undecided.Feed(EngineStream({"</think>answer"}, "stop"), &held));
  Streamed streamed = Reassemble(held, options);
  CHECK(streamed.choices[0].reasoning == "maybe reasoning");
  CHECK(streamed.choices[0].content == "answer");
}

TEST_CASE("chat response: engine error events and usage on a choices chunk") {
  auto options = Options();
  json with_usage = EngineChunk(json::array({EngineChoice("x", "length")}));
  with_usage["usage"] = {{"total_tokens", 2}};
  std::string sse = Event(with_usage) + Event(json{{"error", {{"message", "boom"}}}}) + "data: [DONE]\n\n";
  std::string out = RunStream(sse, options, Split::kWhole);
  CHECK(out.find(R"("choices":[],"usage":{"total_tokens":2}})") != std::string::npos);
  CHECK(out.find("data: {\"error\":{\"message\":\"boom\"}}\n\n") != std::string::npos);
  CHECK(out.ends_with("data: [DONE]\n\n"));
}

}  // namespace toktier::test
