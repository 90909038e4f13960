// The fast body parser (api/json_tree.h) builds exactly nlohmann's tree, or
// declines and leaves the body to nlohmann: checked on the JSON corners
// where the two parsers' rules differ and on random documents.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "api/api.h"
#include "api/json_tree.h"

using namespace toktier;
using ojson = nlohmann::ordered_json;

namespace {

// The fast tree equals nlohmann's (values, key order, number kinds) when it
// vouches; a body nlohmann refuses is never vouched for. Returns whether
// the fast walk vouched.
bool AgreesWithNlohmann(const std::string& text) {
  const ojson reference = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  ojson fast;
  const bool vouched = api::ParseJsonTreeFast(text, api::kMaxJsonMaxDepth, &fast) == api::FastTree::kBuilt;
  INFO("text: " << text.substr(0, 200));
  if (reference.is_discarded()) {
    CHECK_FALSE(vouched);
    return vouched;
  }
  if (vouched) {
    CHECK(fast == reference);
    CHECK(fast.dump() == reference.dump());
    // Number kinds: nlohmann keeps unsigned, signed and float apart.
    CHECK(fast.dump(-1, ' ', false, nlohmann::detail::error_handler_t::strict) ==
          reference.dump(-1, ' ', false, nlohmann::detail::error_handler_t::strict));
  }
  return vouched;
}

// Numbers of every kind nlohmann distinguishes, as a flat list of (value,
// type name) so that kinds are compared, not only values.
std::string Kinds(const ojson& j) {
  std::string out;
  if (j.is_structured()) {
    for (const auto& x : j) out += Kinds(x);
  } else {
    out += j.type_name();
    out += j.is_number_unsigned() ? "u" : j.is_number_integer() ? "i" : "";
    out += ' ';
  }
  return out;
}

std::string RandomString(std::mt19937& rng) {
  static const std::vector<std::string> atoms = {
      "a", "Z", " ", "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\u00e9", "\\u0000", "\\ud83d\\ude00", "\\uDC00",
      "\\ud800", "é", "日本", "😀", "\xED\x9F\xBF", "\\b", "\\f", "\\r", "{", "]", ",", ":", "\\x", "\x01"};
  std::string s = "\"";
  const int n = static_cast<int>(rng() % 8);
  for (int i = 0; i < n; ++i) s += atoms[rng() % atoms.size()];
  return s + "\"";
}

std::string RandomNumber(std::mt19937& rng) {
  static const std::vector<std::string> numbers = {
      "0", "-0", "1", "-1", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
      "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1.5", "-0.0", "1e2", "1E-2",
      "1e400", "-1e400", "0.1", "01", "1.", ".5", "2.2250738585072014e-308", "4.9e-324", "123456789012345678901234567890"};
  return numbers[rng() % numbers.size()];
}

std::string RandomValue(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 4 ? 4 : 6)) {
    case 0: return RandomString(rng);
    case 1: return RandomNumber(rng);
    case 2: return std::vector<std::string>{"true", "false", "null", "nul"}[rng() % 4];
    case 3: return RandomString(rng);
    case 4: {
      std::string s = "[";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i ? "," : "") + RandomValue(rng, depth + 1);
      return s + (rng() % 50 ? "]" : "");
    }
    default: {
      std::string s = "{";
      const int n = static_cast<int>(rng() % 4);
      static const std::vector<std::string> keys = {"\"a\"", "\"b\"", "\"a\"", "\"\\u0061\"", "\"k\\n\"", "\"é\""};
      for (int i = 0; i < n; ++i) s += (i ? "," : "") + keys[rng() % keys.size()] + " : " + RandomValue(rng, depth + 1);
      return s + (rng() % 50 ? " }" : "");
    }
  }
}

}  // namespace

TEST_CASE("fast body parse: the corners where simdjson and nlohmann differ end in nlohmann's tree or in a decline") {
  using namespace std::string_literals;  // bodies with NUL bytes
  const std::vector<std::string> corners = {
      R"({"a":1,"a":2,"b":3})",                 // duplicate keys: first position, last value
      R"({"x":-0,"y":-0.0,"z":0})",             // nlohmann's -0 is an integer
      R"({"big":18446744073709551616,"u":18446744073709551615,"i":-9223372036854775809})",
      R"({"inf":1e400})",                       // nlohmann keeps infinity (dumped as null)
      R"({"s":"\uDC00"})",                      // lone low surrogate: nlohmann refuses
      R"({"s":"\ud800"})",                      // lone high surrogate
      R"({"s":"\ud800\u0041"})",
      R"({"s":"\u0000 and \ud83d\ude00"})",
      "\xEF\xBB\xBF{\"bom\":true}",              // nlohmann skips a byte-order mark
      R"({"a":1} )", R"({"a":1} x)", R"({"a":1}{})", R"([1,2,3])", R"(  [ ]  )", R"({})",
      R"({"a":01})", R"({"a":1.})", R"({"a":.5})", R"({"a":tru})", R"({"a":nul})", "{\"a\":\"\x01\"}",
      "{\"a\":\"\xC3\x28\"}", "{\"a\":\"\xED\xA0\x80\"}", "{\"\xED\x9F\xBF\":\"\xED\x9F\xBF\"}",
      R"("top-level string")", R"(42)", R"(null)", "", "{", R"({"a":[1,{"b":[true,false,null]}]})",
      // Bytes after a number up to the next structural character: nlohmann
      // reads a NUL as the end of input (fuzz_chat_request found the walk
      // vouching for such a body).
      "{\"a\":{\"b\":0\0\x0f}}"s, "{\"a\":[1\0]}"s, "{\"a\":1\x0f}", "{\"a\":true\x0f}", "{\"a\":null\0}"s};
  for (const auto& text : corners) AgreesWithNlohmann(text);
  // The kinds of numbers, not only their values.
  const std::string numbers = R"([0,-0,1,-1,18446744073709551615,9223372036854775808,-9223372036854775808,1.0,1e2,-0.0])";
  ojson fast;
  REQUIRE(api::ParseJsonTreeFast(numbers, api::kMaxJsonMaxDepth, &fast) == api::FastTree::kBuilt);
  CHECK(Kinds(fast) == Kinds(ojson::parse(numbers)));
}

TEST_CASE("fast body parse: random documents give nlohmann's tree whenever the fast walk vouches") {
  std::mt19937 rng(37);
  int vouched = 0, valid = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string text = (rng() % 2 ? "{\"k\":" : "[") + RandomValue(rng, 0) + (rng() % 2 ? "}" : "]");
    if (!ojson::accept(text)) {
      AgreesWithNlohmann(text);
      continue;
    }
    ++valid;
    vouched += AgreesWithNlohmann(text);
  }
  // The walk must carry ordinary documents, or the fast path is dead code.
  CHECK(valid > 2000);
  CHECK(vouched > valid / 2);
}

TEST_CASE("fast body parse: a chat body is read by the fast walk and ParseBoundedJson gives nlohmann's tree") {
  std::string content;
  for (int i = 0; i < 2000; ++i) content += "line " + std::to_string(i) + ": \\\"quoted\\\" \\u00e9 tab\\t end\\n";
  const std::string body = R"({"model":"qwen3","messages":[{"role":"system","content":"You are terse."},)"
                           R"({"role":"user","content":")" + content + R"("},{"role":"assistant","content":null,)"
                           R"("tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]}],)"
                           R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",)"
                           R"("properties":{"x":{"type":"integer","minimum":-5,"maximum":1e3}}}}}],"temperature":0.7,"max_tokens":64})";
  ojson fast;
  REQUIRE(api::ParseJsonTreeFast(body, api::kDefaultJsonMaxDepth, &fast) == api::FastTree::kBuilt);
  CHECK(fast == ojson::parse(body));
  ojson bounded;
  REQUIRE(api::ParseBoundedJson(body, api::kDefaultJsonMaxDepth, &bounded) == api::JsonParseOutcome::kOk);
  CHECK(bounded.dump() == ojson::parse(body).dump());
  // Too deep stays refused before either parser runs.
  CHECK(api::ParseBoundedJson(std::string(200, '[') + std::string(200, ']'), 128, &bounded) ==
        api::JsonParseOutcome::kTooDeep);
}

// The walk checks the nesting bound itself (the separate scan runs only where
// it declines): its verdict must be the scan's, at the bound, one past it,
// and when the too-deep value is followed by malformed bytes.
TEST_CASE("fast body parse: the depth bound checked on the walk agrees with the bracket scan") {
  std::mt19937 rng(3434);
  for (int i = 0; i < 4000; ++i) {
    const size_t depth = 1 + rng() % 40, max_depth = 1 + rng() % 40;
    std::string text;
    for (size_t d = 0; d < depth; ++d) text += rng() % 2 ? "[" : "{\"k\":";
    text += rng() % 3 ? "\"x[{\\\"\"" : "1";
    for (size_t d = depth; d-- > 0;) {
      // Which bracket closes level d depends on what opened it: rebuild
      // the closing side from the opening side.
      const size_t pos = [&] {
        size_t p = 0;
        for (size_t k = 0; k < d; ++k) p += text[p] == '[' ? 1 : 5;
        return p;
      }();
      text += text[pos] == '[' ? "]" : "}";
    }
    if (rng() % 4 == 0) text += rng() % 2 ? "]" : "x";  // trailing bytes: malformed
    INFO("text: " << text << " max_depth " << max_depth);
    ojson fast;
    const api::FastTree r = api::ParseJsonTreeFast(text, max_depth, &fast);
    const bool scan_too_deep = api::JsonNestingExceeds(text, max_depth);
    if (r == api::FastTree::kTooDeep) CHECK(scan_too_deep);
    if (r == api::FastTree::kBuilt) {
      CHECK_FALSE(scan_too_deep);
      CHECK(fast == ojson::parse(text));
    }
    // What ParseBoundedJson answers is what the scan and nlohmann answer.
    ojson bounded;
    const api::JsonParseOutcome o = api::ParseBoundedJson(text, max_depth, &bounded);
    if (scan_too_deep) {
      CHECK(o == api::JsonParseOutcome::kTooDeep);
    } else {
      CHECK(o == (ojson::accept(text) ? api::JsonParseOutcome::kOk : api::JsonParseOutcome::kMalformed));
    }
  }
}

TEST_CASE("fast dump: byte for byte nlohmann's compact dump, and the skipped top-level key is left out") {
  std::mt19937 rng(3737);
  int dumped = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string text = "{\"k\":" + RandomValue(rng, 0) + ",\"input_ids\":[1,2],\"z\":\"\\u001f\\u007f\"}";
    const ojson tree = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
    if (tree.is_discarded()) continue;
    ++dumped;
    REQUIRE(api::DumpJsonTree(tree) == tree.dump());
    ojson without = tree;
    without.erase("input_ids");
    REQUIRE(api::DumpJsonTree(tree, "input_ids") == without.dump());
  }
  CHECK(dumped > 2000);
  CHECK(api::DumpJsonTree(ojson::array()) == "[]");
  CHECK(api::DumpJsonTree(ojson::object(), "x") == "{}");
}
