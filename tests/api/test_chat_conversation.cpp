// What a chat template sees for a chat request: vLLM's conversation rules
// (api/chat_conversation.h) and its content-format detection
// (chat::ChatTemplate::content_format).
#include <doctest/doctest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "api/api.h"
#include "test_support.h"

using namespace toktier;
using namespace toktier::test;
using ojson = nlohmann::ordered_json;

namespace {

chat::ContentFormat FormatOf(const std::string& source) {
  std::unique_ptr<chat::ChatTemplate> t;
  REQUIRE(chat::ChatTemplate::Compile(source, {}, &t).ok());
  return t->content_format();
}

ojson Conversation(const ojson& messages, chat::ContentFormat format) {
  ojson conv;
  api::RequestError err;
  REQUIRE_MESSAGE(api::BuildConversation(messages, format, &conv, &err), err.message);
  return conv;
}

}  // namespace

TEST_CASE("content format: a template that loops over message content parts is openai, others string") {
  using chat::ContentFormat;
  CHECK(FormatOf("{% for m in messages %}{{ m['content'] }}{% endfor %}") == ContentFormat::kString);
  CHECK(FormatOf("{% for m in messages %}{% for c in m['content'] %}{{ c.text }}{% endfor %}{% endfor %}") ==
        ContentFormat::kOpenAI);
  CHECK(FormatOf("{% for m in messages %}{% for c in m.content | selectattr('type') %}x{% endfor %}{% endfor %}") ==
        ContentFormat::kOpenAI);
  // Through a variable bound to the messages, and a slice of them.
  CHECK(FormatOf("{% set loop_messages = messages[1:] %}{% for message in loop_messages %}"
                 "{% for part in message.content %}{{ part.text }}{% endfor %}{% endfor %}") == ContentFormat::kOpenAI);
  // A loop over something else's content is not a message's.
  CHECK(FormatOf("{% for m in messages %}{% for c in tools[0].content %}x{% endfor %}{% endfor %}") ==
        ContentFormat::kString);
  for (const char* name : {"qwen3", "llama3_1", "deepseek_v3"}) {
    auto path = std::filesystem::path(TokenizerPath(name)).parent_path() / "tokenizer_config.json";
    auto text = ReadFile(path.string());
    REQUIRE_MESSAGE(text, "tokenizer files missing: run tools/dev.sh setup");
    api::ChatModel m;
    REQUIRE(api::CompileChatTemplate(*text, name, &m).ok());
    INFO(name);
    CHECK(m.tmpl->content_format() == ContentFormat::kString);
  }
}

TEST_CASE("conversation: text parts joined by a newline for string templates, kept as parts for openai ones") {
  ojson messages = ojson::parse(R"([
    {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "user", "content": "plain", "extra": 1},
    {"role": "assistant", "content": null}])");
  ojson s = Conversation(messages, chat::ContentFormat::kString);
  CHECK(s == ojson::parse(R"([{"role": "system", "content": "a\nb"}, {"role": "user", "content": "plain"},
                               {"role": "assistant", "content": ""}])"));
  ojson o = Conversation(messages, chat::ContentFormat::kOpenAI);
  CHECK(o[0]["content"] == ojson::parse(R"([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])"));
  CHECK(o[1]["content"] == ojson::parse(R"([{"type": "text", "text": "plain"}])"));
  CHECK(o[2]["content"] == ojson::array());
}

TEST_CASE("conversation: tool-call arguments become values, reasoning is copied, tool messages keep their id") {
  ojson messages = ojson::parse(R"([
    {"role": "assistant", "content": "x", "reasoning": "r", "reasoning_content": "ignored",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"b\":1,\"a\":[2]}"}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "o1"}, {"type": "text", "text": "o2"}]},
    {"role": "assistant", "content": "y", "tool_calls": []},
    {"role": "developer", "content": "d", "name": "dev"}])");
  for (auto format : {chat::ContentFormat::kString, chat::ContentFormat::kOpenAI}) {
    ojson c = Conversation(messages, format);
    CHECK(c[0]["tool_calls"][0]["function"]["arguments"] == ojson::parse(R"({"b": 1, "a": [2]})"));
    CHECK(c[0]["tool_calls"][0]["function"]["arguments"].begin().key() == "b");  // order kept
    CHECK(c[0]["tool_calls"][1]["function"]["arguments"] == ojson::object());
    CHECK(c[0]["reasoning"] == "r");
    CHECK(c[0]["reasoning_content"] == "r");
    CHECK(c[1]["tool_call_id"] == "c1");
    CHECK(c[1]["content"] == "o1\no2");  // joined for either format
    CHECK_FALSE(c[2].contains("tool_calls"));
    CHECK(c[3]["name"] == "dev");
    CHECK(c[3].contains("tools"));
    CHECK(c[3]["tools"].is_null());
  }
}

TEST_CASE("conversation: non-text parts and malformed messages are errors, never dropped content") {
  api::RequestError err;
  ojson conv;
  CHECK_FALSE(api::BuildConversation(ojson::parse(R"([{"role": "user", "content": [{"type": "image_url",
      "image_url": {"url": "data:x"}}]}])"), chat::ContentFormat::kString, &conv, &err));
  CHECK(err.message.find("image_url") != std::string::npos);
  CHECK_FALSE(api::BuildConversation(ojson::parse(R"([{"role": "user", "content": 5}])"), chat::ContentFormat::kString,
                                     &conv, &err));
  CHECK_FALSE(api::BuildConversation(ojson::parse(R"([{"content": "x"}])"), chat::ContentFormat::kString, &conv, &err));
  CHECK_FALSE(api::BuildConversation(ojson::parse(R"([{"role": "assistant", "tool_calls": [{"id": "x"}]}])"),
                                     chat::ContentFormat::kString, &conv, &err));
}

TEST_CASE("tool dicts: vLLM's model_dump() order with null description and parameters") {
  ojson dicts;
  api::RequestError err;
  REQUIRE(api::BuildToolDicts(ojson::parse(R"([{"function": {"parameters": {"type": "object"}, "name": "f",
      "strict": true}, "type": "function"}, {"type": "function", "function": {"name": "g"}}])"), &dicts, &err));
  CHECK(dicts.dump() == R"([{"type":"function","function":{"name":"f","description":null,"parameters":{"type":"object"},)"
                        R"("strict":true}},{"type":"function","function":{"name":"g","description":null,"parameters":null}}])");
  CHECK_FALSE(api::BuildToolDicts(ojson::parse(R"([{"type": "web_search"}])"), &dicts, &err));
}
