// Unit tests of the chat-template renderer, feature by feature. Expected
// strings are what @huggingface/jinja 0.5.11 renders (checked with
// tools/ref_render.js).
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "chat/chat_template.h"

using toktier::chat::ChatTemplate;
using toktier::chat::RenderOptions;
using toktier::chat::Status;
using toktier::chat::StatusCode;
using toktier::chat::TemplateOptions;
using Json = nlohmann::ordered_json;

namespace {

Status RenderWith(const std::string& source, const Json& inputs, std::string* out, RenderOptions options = {}) {
  std::unique_ptr<ChatTemplate> t;
  Status s = ChatTemplate::Compile(source, TemplateOptions{}, &t);
  if (!s.ok()) return s;
  return t->Render(inputs, options, out);
}

std::string R(const std::string& source, const Json& inputs = Json::object()) {
  std::string out;
  Status s = RenderWith(source, inputs, &out);
  INFO(source);
  REQUIRE_MESSAGE(s.ok(), s.ToString());
  return out;
}

StatusCode ErrorCode(const std::string& source, const Json& inputs = Json::object(), RenderOptions options = {}) {
  std::string out;
  return RenderWith(source, inputs, &out, options).code();
}

}  // namespace

TEST_CASE("chat: statements") {
  CHECK(R("{% if x %}a{% elif y %}b{% else %}c{% endif %}", {{"x", false}, {"y", 1}}) == "b");
  CHECK(R("{% for i in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{% if loop.first %}F{% endif %}"
          "{% if loop.last %}L{% endif %}{{ loop.length }}|{% endfor %}") == "103F3|2123|321L3|");
  CHECK(R("{% for i in [] %}x{% else %}empty{% endfor %}") == "empty");
  CHECK(R("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 4 %}{% break %}{% endif %}{{ i }}{% endfor %}") == "013");
  CHECK(R("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}") == "3");
  CHECK(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}") == "21");
  CHECK(R("{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]") == "[block 2]");
  CHECK(R("{% macro m(a, b='d') %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, b=2) }}") == "1-d 1-2");
  CHECK(R("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}") == "<in>");
  CHECK(R("{% filter upper %}abc{% endfilter %}") == "ABC");
  CHECK(R("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}") == "a=1;b=2;");
  CHECK(R("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}{% endfor %}") == "24");
}

TEST_CASE("chat: whitespace control, trim_blocks and lstrip_blocks") {
  CHECK(R("a  {%- if true -%}  b  {%- endif -%}  c") == "abc");
  CHECK(R("{% if true %}\nx\n{% endif %}\n") == "x\n");
  CHECK(R("  {% if true %}x{% endif %}") == "x");
  CHECK(R("{{ 'a' }}\n{{- 'b' }}") == "ab");
  CHECK(R("{# c #}\nx") == "x");
  CHECK(R("a\n  {#- c -#}\n  b") == "ab");
}

TEST_CASE("chat: expressions") {
  CHECK(R("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 3 }} {{ 7 / 2 }} {{ 1.0 }} {{ -3 }}") == "7 3 1 8 3.5 1.0 -3");
  CHECK(R("{{ 'a' ~ 1 ~ true }} {{ 'a' + 'b' }}") == "a1true ab");
  CHECK(R("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }}") == "true false true");
  CHECK(R("{{ 'x' if false else 'y' }}{{ 'z' if false }}") == "y");
  CHECK(R("{{ 'hello'[1:3] }}{{ [1,2,3,4][::-1] }}{{ 'abc'[-1] }}") == "el[4, 3, 2, 1]c");
  CHECK(R("{{ [1, 'a', none, true] }} {{ {'a': [1, {'b': 2.5}]} }}") == "[1, \"a\", null, true] {\"a\": [1, {\"b\": 2.5}]}");
  CHECK(R("{{ none }}{{ undefined_var }}|{{ undefined_var.attr }}|{{ x.y.z }}") == "||");
  CHECK(R("{{ 1 == 1.0 }} {{ '1' == 1 }} {{ none == undefined_var }}") == "true true true");
}

TEST_CASE("chat: tests") {
  Json in = {{"s", "x"}, {"n", nullptr}, {"i", 3}, {"f", 1.5}, {"l", Json::array()}, {"d", Json::object()}, {"b", true}};
  CHECK(R("{{ s is string }}{{ n is none }}{{ i is integer }}{{ f is number }}{{ l is iterable }}{{ d is mapping }}"
          "{{ b is boolean }}{{ b is true }}{{ q is defined }}{{ q is undefined }}{{ i is odd }}{{ s is not none }}", in) ==
        "truetruetruetruetruetruetruetruefalsetruetruetrue");
}

TEST_CASE("chat: filters") {
  Json msgs = Json::parse(R"([{"role":"user","content":"hi","n":2},{"role":"tool","content":"r","n":1}])");
  Json in = {{"m", msgs}};
  CHECK(R("{{ '  x  ' | trim }}|{{ 'abc' | length }}|{{ [1,2] | length }}|{{ m | first | tojson }}", in) ==
        "x|3|2|{\"role\": \"user\", \"content\": \"hi\", \"n\": 2}");
  CHECK(R("{{ m | selectattr('role', 'equalto', 'tool') | map(attribute='content') | list }}", in) == "[\"r\"]");
  CHECK(R("{{ m | rejectattr('role', 'equalto', 'tool') | length }}", in) == "1");
  CHECK(R("{{ ['a','b'] | join(', ') }}|{{ 'a-b' | replace('-', '+') }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}", in) == "a, b|a+b|HIhi");
  CHECK(R("{{ x | default('d') }}|{{ '' | default('d', true) }}|{{ [3,1,2] | sort | reverse | list }}", in) == "d|d|[3, 2, 1]");
  CHECK(R("{{ m | sort(attribute='n') | map(attribute='role') | join(',') }}", in) == "tool,user");
  CHECK(R("{{ 'a\nb' | indent(2) }}|{{ '42' | int + 1 }}|{{ '2.5' | float }}|{{ -3 | abs }}", in) == "a\n  b|43|2.5|3");
  CHECK(R("{{ {'b': 1, 'a': [1, 2]} | tojson(indent=2) }}") == "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ]\n}");
  CHECK(R("{{ 'é\"\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}") == "\"é\\\"\\n\"|\"\\u00e9\"");
  CHECK(R("{{ {'b': 1, 'a': 2} | dictsort }}") == "[[\"a\", 2], [\"b\", 1]]");
  CHECK(R("{{ [1, 1, 2] | unique | list }}|{{ {'a': 1} | items | list }}") == "[1, 2]|[[\"a\", 1]]");
}

TEST_CASE("chat: methods") {
  CHECK(R("{{ 'a,b,c'.split(',') }}{{ 'a b  c'.split() }}{{ 'a,b,c'.split(',', 1) }}") ==
        "[\"a\", \"b\", \"c\"][\"a\", \"b\", \"c\"][\"a\", \"b,c\"]");
  CHECK(R("{{ '  x '.strip() }}|{{ '\nx'.lstrip() }}|{{ 'x\n'.rstrip() }}|{{ 'ab'.startswith('a') }}{{ 'ab'.endswith(('x', 'b')) }}") ==
        "x|x|x|truetrue");
  CHECK(R("{{ 'hello world'.title() }} {{ 'abc'.capitalize() }} {{ 'aaa'.replace('a', 'b', 2) }}") == "Hello World Abc bba");
  CHECK(R("{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b', 'z') }}{{ {'a': 1}.keys() }}{{ {'a': 1}.values() }}") == "1z[\"a\"][1]");
}

TEST_CASE("chat: errors name their cause") {
  std::string out;
  Status s = RenderWith("{{ raise_exception('bad role') }}", Json::object(), &out);
  CHECK(s.code() == StatusCode::kRaised);
  CHECK(s.message() == "bad role");
  CHECK(ErrorCode("{% include 'x' %}") == StatusCode::kUnsupported);
  CHECK(ErrorCode("{% if x %}") == StatusCode::kSyntaxError);
  CHECK(ErrorCode("{{ x | nosuchfilter }}", {{"x", "s"}}) == StatusCode::kRenderError);
  CHECK(ErrorCode("{{ x is nosuchtest }}") == StatusCode::kRenderError);
  CHECK(ErrorCode("{{ 'a' ~ undefined_var }}") == StatusCode::kRenderError);
  CHECK(ErrorCode("{{ strftime_now('%Y') }}") == StatusCode::kUnsupported);
  CHECK(ErrorCode("{{ 'É' | lower }}") == StatusCode::kUnsupported);
  RenderOptions now;
  now.now_unix_seconds = 1764581400;  // 2025-12-01 09:30 UTC
  std::string date;
  REQUIRE(RenderWith("{{ strftime_now('%d %b %Y %H:%M %B %%') }}", Json::object(), &date, now).ok());
  CHECK(date == "01 Dec 2025 09:30 December %");
}

TEST_CASE("chat: hostile templates hit limits, not crashes") {
  RenderOptions tight;
  tight.max_loop_iterations = 10000;
  CHECK(ErrorCode("{% for i in range(100000) %}{% endfor %}", Json::object(), tight) == StatusCode::kLimitExceeded);
  CHECK(ErrorCode("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}") == StatusCode::kLimitExceeded);
  tight.max_output_bytes = 1000;
  CHECK(ErrorCode("{% set ns = namespace(s='xx') %}{% for i in range(50) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                  Json::object(), tight) == StatusCode::kLimitExceeded);
  std::string deep(5000, '(');
  CHECK(ErrorCode("{{ " + deep + "1 }}") == StatusCode::kLimitExceeded);
  std::string nested;
  for (int i = 0; i < 400; ++i) nested += "{% if true %}";
  CHECK(ErrorCode(nested) == StatusCode::kLimitExceeded);
}

TEST_CASE("chat: request to template inputs") {
  Json config = Json::parse(R"({"bos_token": {"__type": "AddedToken", "content": "<B>"}, "eos_token": "<E>", "pad_token": null})");
  Json request = Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                 "chat_template_kwargs": {"enable_thinking": false}})");
  Json inputs;
  REQUIRE(toktier::chat::BuildChatInputs(request, config, &inputs).ok());
  CHECK(inputs["bos_token"] == "<B>");
  CHECK(inputs["eos_token"] == "<E>");
  CHECK_FALSE(inputs.contains("pad_token"));
  CHECK(inputs["add_generation_prompt"] == true);  // servers' default for chat requests
  CHECK(inputs["tools"].is_null());                // transformers passes tools=None
  CHECK(inputs["enable_thinking"] == false);
  CHECK_FALSE(inputs.contains("model"));
  CHECK(R("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}{{ add_generation_prompt }}", inputs) == "<B>hi<E>true");
  request["add_generation_prompt"] = "yes";
  CHECK(toktier::chat::BuildChatInputs(request, config, &inputs).code() == StatusCode::kInvalidArgument);
  CHECK(toktier::chat::BuildChatInputs(Json::parse(R"({"prompt": "x"})"), config, &inputs).code() ==
        StatusCode::kInvalidArgument);
  // A kwarg named like a global fails as in the reference ("already declared").
  std::string out;
  CHECK(RenderWith("x", Json{{"range", 1}}, &out).code() == StatusCode::kRenderError);
}

TEST_CASE("chat: a compiled template renders on many threads at once") {
  std::unique_ptr<ChatTemplate> t;
  REQUIRE(ChatTemplate::Compile("{% for m in messages %}{{ m.content | upper }}{% endfor %}", TemplateOptions{}, &t).ok());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      Json in = {{"messages", Json::array({{{"role", "user"}, {"content", "t" + std::to_string(i)}}})}};
      for (int k = 0; k < 500; ++k) {
        std::string out;
        if (!t->Render(in, RenderOptions{}, &out).ok() || out != "T" + std::to_string(i)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(wrong == 0);
}

TEST_CASE("chat: values built in a loop cannot nest without bound") {
  // Freeing or printing a million-deep list would recurse a million frames.
  CHECK(ErrorCode("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}") ==
        StatusCode::kLimitExceeded);
  CHECK(ErrorCode("{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}") ==
        StatusCode::kLimitExceeded);
  // A namespace inside a namespace attribute could form a cycle: refused.
  CHECK(ErrorCode("{% set ns = namespace() %}{% set ns.me = ns %}") == StatusCode::kUnsupported);
  CHECK(R("{% set ns = namespace(x=[]) %}{% for i in range(3) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}") == "[[[[]]]]");
}

TEST_CASE("chat: a render that keeps its values hands them over and writes the same prompt") {
  // The proxy frees a long conversation's values after the prompt has moved
  // on (RenderOptions::keep_values); the prompt must not depend on it.
  const std::string source = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}";
  Json inputs = {{"messages", Json::array()}};
  for (int i = 0; i < 50; ++i) inputs["messages"].push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", std::string(i, 'x')}});
  std::unique_ptr<ChatTemplate> t;
  REQUIRE(ChatTemplate::Compile(source, TemplateOptions{}, &t).ok());
  std::string plain, kept;
  REQUIRE(t->Render(inputs, RenderOptions{}, &plain).ok());
  std::shared_ptr<void> values;
  RenderOptions keep;
  keep.keep_values = &values;
  Json moved = inputs;
  REQUIRE(t->Render(std::move(moved), keep, &kept).ok());
  CHECK(kept == plain);
  CHECK(values != nullptr);
  values.reset();  // freed here, after the prompt was taken
  CHECK(kept == plain);
}
