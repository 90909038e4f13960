// The generic pre-tokenizer path (core/regex_split.cpp): unit cases, and a
// differential test against the HF tokenizers Node binding
// (tools/ref_pretokenize.js) over tricky strings for real tokenizer files and
// synthetic pre-tokenizer configurations.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "core/regex_split.h"
#include "test_support.h"

namespace core = toktier::core;
using core::Span;
using core::SplitBehavior;
using Json = nlohmann::json;

namespace {

std::vector<Span> SplitWith(const std::vector<core::PreTokenizerStep>& steps, std::string_view text,
                            core::unicode::Tables t = core::unicode::Tables::kHuggingFace) {
  std::string err;
  auto sp = core::MakeGenericSplitter(steps, t, &err);
  REQUIRE_MESSAGE(sp, err);
  std::vector<Span> out;
  sp->Split(text, out);
  return out;
}

core::PreTokenizerStep SplitStep(std::string pat, SplitBehavior b, bool invert = false,
                                 bool regex = true) {
  core::PreTokenizerStep s;
  s.kind = core::PreTokenizerStep::Kind::kSplit;
  s.pattern = std::move(pat);
  s.behavior = b;
  s.invert = invert;
  s.pattern_is_regex = regex;
  return s;
}

std::vector<Span> S(std::initializer_list<std::pair<uint32_t, uint32_t>> l) {
  std::vector<Span> v;
  for (auto [b, e] : l) v.push_back({b, e});
  return v;
}

std::string SpansStr(const std::vector<Span>& v) {
  std::ostringstream o;
  for (auto s : v) o << "[" << s.begin << "," << s.end << ")";
  return o.str();
}

// Runs tools/ref_pretokenize.js over the requests; empty on failure.
std::vector<Json> RunReference(const std::vector<Json>& requests) {
  std::string input;
  for (const auto& r : requests) input += r.dump(-1, ' ', false, Json::error_handler_t::strict) + "\n";
  auto lines = toktier::test::RunNodeTool("ref_pretokenize.js", input);
  std::vector<Json> out;
  if (!lines) return out;
  for (const auto& line : *lines) out.push_back(Json::parse(line));
  return out;
}

// Tricky strings: fixed cases plus deterministic random mixes.
std::vector<std::string> Corpus() {
  std::vector<std::string> v = {
      "",
      " ",
      "a",
      "Hello world",
      "Hello  world   ",
      "  leading and trailing  ",
      "a\u0085b \u0085 c\u0085",
      "line\u2028sep\u2029para \u2028 x",
      "nbsp\u00A0here \u00A0 \u00A0\u00A0x",
      "ideo\u3000space\u3000\u3000",
      "\r\n\r\nx\r\n \r\n\n\n  \n\ty",
      "a\r\n",
      " \r\n",
      "tabs\t\t\tthen\t",
      std::string(40, ' ') + "x" + std::string(33, ' '),
      "\n\n\n\n\n\n\n\n",
      "   \n   \n   ",
      "I'm you're he's they'll we've I'd 'S 'LL 'RE 'VE 'M 'D 'T",
      "DON'T WON'T she'S It'Ll 'll'll''s",
      "'ſ 'K 'ſtrange",
      "1234567890 12 1 123456",
      "\u0663\u0664\u0665\u0666 \u00B2\u00B3 \u00BD 1\u00BD",
      "\U00011DE0\U00011DE1 x\U00016FF4",
      "e\u0301e\u0301 \u0301\u0301 a\u0308bc\u20DD",
      "\U0001F469\u200D\U0001F469\u200D\U0001F467 \U0001F44D\U0001F3FD!",
      "\u4E2D\u6587\u6D4B\u8BD5 \u4E2D\u6587abc123",
      "\u3072\u3089\u304C\u306A \u30AB\u30BF\u30AB\u30CA\u30FC\u30FC \u30FCx",
      "\uD55C\uAD6D\uC5B4 \u0E44\u0E17\u0E22 \u0627\u0644\u0639\u0631\u0628\u064A\u0629",
      "\U00016100\U00016101 \U00016100a",
      "\u01C5ungla \u01C5\u01C6 DZ\u01C5",
      "CamelCaseWord HTTPServer getHTTPResponse iPhone",
      "snake_case_name __init__ a_1",
      "x = f(y) + 3; // comment\n\tif (a<=b) { return \"s\"; }",
      "<|endoftext|> <tag attr=\"v\">text</tag>",
      "https://example.com/a/b?c=d&e=f#g",
      "$100 + 50% = ?! ... --- ___ *** ///",
      "!!! ??? ... \u2026\u2026 \u00BF\u00A1 \u00AB\u00BB \u3001\u3002",
      "\u200B\u200C\u200D\uFEFF\u180E zero width",
      "\x0B\x0C vt ff \x1C\x1D\x1E\x1F",
      "emoji\U0001F600\U0001F600 \U0001F600 x\U0001F600y",
      "mixed\u00A0\u0085\u2028 \t\r\n end",
      "a.b.c/d/e\\f",
      "\u0130stanbul \u0131 \u00DF\u1E9E",
  };
  const std::vector<std::string> alphabet = {
      "a", "b", "Z", "\u00C9", "\u00E9", "\u0301", "s", "S", "t", "l", "L", "'", "\u2019", "1", "2",
      "\u0663", "\u00B2", "\u00BD", " ", " ", " ", "\t", "\n", "\r", "\r\n", "\u0085", "\u2028",
      "\u00A0", "\u3000", "\u200B", "\u200D", ".", "!", "?", "/", "-", "_", "$", "+", "(", "\"",
      "\U0001F600", "\U0001F469", "\u4E2D", "\u3042", "\u30AB", "\u30FC", "\uD55C", "\u0627",
      "\u01C5", "\u017F", "\u212A", "\U00016100", "\U00011DE0", "\x0B", "\u180E", "\\", "{",
  };
  std::mt19937 rng(12345);
  for (int i = 0; i < 260; ++i) {
    int len = 1 + static_cast<int>(rng() % 24);
    std::string s;
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    v.push_back(std::move(s));
  }
  return v;
}

struct Config {
  std::string label;
  Json request_base;  // {"tokenizer": path} or {"pre_tokenizer": obj}
  Json pre_tokenizer;
};

}  // namespace

TEST_CASE("regex_split: HF behaviors with empty matches (values from the reference)") {
  // a* on "baab" matches (0,0) (1,3) (4,4), as the onig crate iterates.
  CHECK(SplitWith({SplitStep("a*", SplitBehavior::kRemoved)}, "baab") == S({{0, 1}, {3, 4}}));
  CHECK(SplitWith({SplitStep("a*", SplitBehavior::kRemoved, true)}, "baab") == S({{1, 3}}));
  CHECK(SplitWith({SplitStep("a*", SplitBehavior::kMergedWithPrevious)}, "baab") == S({{0, 3}, {3, 4}}));
  CHECK(SplitWith({SplitStep("a*", SplitBehavior::kMergedWithNext)}, "baab") == S({{0, 1}, {1, 4}}));
  CHECK(SplitWith({SplitStep("a*", SplitBehavior::kContiguous)}, "baab") == S({{0, 1}, {1, 3}, {3, 4}}));
  CHECK(SplitWith({SplitStep("(?=a)", SplitBehavior::kRemoved)}, "bab") == S({{0, 1}, {1, 3}}));
  CHECK(SplitWith({SplitStep("", SplitBehavior::kIsolated, false, false)}, "ab") == S({{0, 1}, {1, 2}}));
  // Oniguruma ^ / $ are line anchors (LF only); {,n} is {0,n}; \v is VT.
  CHECK(SplitWith({SplitStep("^a", SplitBehavior::kRemoved)}, "a\na\ra") == S({{1, 2}, {3, 5}}));
  CHECK(SplitWith({SplitStep("a$", SplitBehavior::kRemoved)}, "a\na\ra\r\na") == S({{1, 7}}));
  CHECK(SplitWith({SplitStep("a{,2}", SplitBehavior::kRemoved)}, "aaaa{,2}") ==
        S({{4, 5}, {5, 6}, {6, 7}, {7, 8}}));
  CHECK(SplitWith({SplitStep("\\v", SplitBehavior::kRemoved)}, "a\x0B" "b\nc") == S({{0, 1}, {2, 5}}));
  // Empty input: no pieces, whatever the steps.
  CHECK(SplitWith({}, "").empty());
  CHECK(SplitWith({SplitStep("\\s+", SplitBehavior::kIsolated)}, "").empty());
  CHECK(SplitWith({}, "abc") == S({{0, 3}}));
}

TEST_CASE("regex_split: GPT-2 pattern basics and Sequence semantics") {
  core::PreTokenizerStep bl;
  bl.kind = core::PreTokenizerStep::Kind::kByteLevel;
  bl.use_regex = true;
  // \s+(?!\S) leaves the last space to the next word.
  CHECK(SplitWith({bl}, "a   b") == S({{0, 1}, {1, 3}, {3, 5}}));
  CHECK(SplitWith({bl}, "I'LL go") == S({{0, 1}, {1, 2}, {2, 4}, {4, 7}}));  // case-sensitive 'll
  bl.use_regex = false;
  CHECK(SplitWith({bl}, "a   b") == S({{0, 5}}));
  // A later step never crosses earlier boundaries, and lookahead stops at a
  // piece end: "\s+(?!\S)" sees "  " alone as the whole piece.
  auto steps = {SplitStep("x", SplitBehavior::kIsolated), SplitStep("\\s+(?!\\S)|\\s+", SplitBehavior::kIsolated)};
  CHECK(SplitWith(steps, "  x  y") == S({{0, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}));
}

TEST_CASE("regex_split: untranslatable constructs are errors naming them") {
  std::string out, err;
  for (const char* bad : {"\\bx", "\\pL", "[[:alpha:]]", "[a-z&&[^b]]", "(?m:a.b)", "(?s:a.b)", "\\h",
                          "\\R", "(?i:[a-z])", "\\p{Han}", "a{", "\\1", "(?x)a", "[]a]"}) {
    CAPTURE(bad);
    err.clear();
    CHECK_FALSE(core::TranslatePattern(bad, core::unicode::Tables::kHuggingFace, &out, &err));
    CHECK(err.find(bad) != std::string::npos);  // the message names the pattern
  }
  CHECK(core::TranslatePattern("\\p{^L}", core::unicode::Tables::kHuggingFace, &out, &err));
  CHECK_FALSE(core::TranslatePattern("\\p{^L}", core::unicode::Tables::kTiktoken, &out, &err));
  // Compile errors surface from MakeGenericSplitter.
  std::string e2;
  CHECK(core::MakeGenericSplitter({SplitStep("(a", SplitBehavior::kIsolated)}, &e2) == nullptr);
  CHECK(!e2.empty());
}

TEST_CASE("regex_split: ParsePreTokenizerSteps") {
  std::vector<core::PreTokenizerStep> steps;
  std::string err;
  CHECK(core::ParsePreTokenizerSteps(Json(nullptr), &steps, &err));
  CHECK(steps.empty());
  auto j = Json::parse(R"({"type":"Sequence","pretokenizers":[
      {"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},
      {"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true}]},
      {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]})");
  REQUIRE(core::ParsePreTokenizerSteps(j, &steps, &err));
  REQUIRE(steps.size() == 3);
  CHECK(steps[0].kind == core::PreTokenizerStep::Kind::kSplit);
  CHECK(steps[0].pattern == "\\p{N}{1,3}");
  CHECK(steps[1].individual_digits);
  CHECK_FALSE(steps[2].use_regex);
  for (const char* bad : {R"({"type":"Metaspace","replacement":"_"})", R"({"type":"UnicodeScripts"})",
                          R"({"type":"ByteLevel"})",
                          R"({"type":"Split","pattern":{"Regex":"a"},"behavior":"Sideways"})"}) {
    steps.clear();
    err.clear();
    CAPTURE(bad);
    CHECK_FALSE(core::ParsePreTokenizerSteps(Json::parse(bad), &steps, &err));
    CHECK(!err.empty());
  }
  err.clear();
  core::ParsePreTokenizerSteps(Json::parse(R"({"type":"Metaspace"})"), &steps, &err);
  CHECK(err.find("Metaspace") != std::string::npos);
}

TEST_CASE("regex_split: differential against the HF tokenizers reference") {
  toktier::test::RequireNode();
  std::vector<Config> configs;
  for (const char* name : {"llama3", "qwen3", "deepseek_v3", "gptoss", "gpt4o", "gpt35turbo"}) {
    std::string path = toktier::test::TokenizerPath(name);
    auto bytes = toktier::test::ReadFile(path);
    REQUIRE_MESSAGE(bytes.has_value(), "tokenizer files missing: run tools/dev.sh setup (no " << path << ")");
    Json j = Json::parse(*bytes);
    configs.push_back({name, Json{{"tokenizer", path}}, j["pre_tokenizer"]});
  }
  const char* synthetic[] = {
      R"({"type":"Whitespace"})",
      R"({"type":"WhitespaceSplit"})",
      R"({"type":"Digits","individual_digits":false})",
      R"({"type":"Digits","individual_digits":true})",
      R"({"type":"Punctuation","behavior":"Isolated"})",
      R"({"type":"Punctuation","behavior":"Removed"})",
      R"({"type":"Punctuation","behavior":"MergedWithPrevious"})",
      R"({"type":"Punctuation","behavior":"MergedWithNext"})",
      R"({"type":"Punctuation","behavior":"Contiguous"})",
      R"({"type":"BertPreTokenizer"})",
      R"({"type":"CharDelimiterSplit","delimiter":"-"})",
      R"({"type":"ByteLevel","add_prefix_space":false,"trim_offsets":false,"use_regex":true})",
      R"({"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false})",
      R"({"type":"Split","pattern":{"String":"ll"},"behavior":"Contiguous","invert":true})",
      R"({"type":"Split","pattern":{"Regex":"\\s*"},"behavior":"MergedWithNext","invert":false})",
      R"({"type":"Split","pattern":{"Regex":"\\s*"},"behavior":"Contiguous","invert":true})",
      R"({"type":"Split","pattern":{"Regex":"a*|\\p{Lu}?"},"behavior":"MergedWithPrevious","invert":false})",
      R"({"type":"Split","pattern":{"Regex":"^\\p{L}+|\\d$|\\w+"},"behavior":"Isolated","invert":false})",
      R"({"type":"Split","pattern":{"Regex":"[\\w\\-]+|[^\\w\\s]"},"behavior":"Removed","invert":true})",
      R"({"type":"Split","pattern":{"Regex":"(?i)ll|\\p{Lu}|\\S"},"behavior":"Removed","invert":false})",
      R"({"type":"Split","pattern":{"Regex":"\\P{L}+|\\p{^N}\\p{M}|[\\x{3000}-\\u30FF]+|.\\z"},"behavior":"Isolated","invert":false})",
      R"({"type":"Sequence","pretokenizers":[{"type":"WhitespaceSplit"},{"type":"Digits","individual_digits":true},{"type":"Split","pattern":{"Regex":"\\s+(?!\\S)|\\S+"},"behavior":"Isolated","invert":false}]})",
  };
  for (const char* s : synthetic) {
    Json pt = Json::parse(s);
    configs.push_back({s, Json{{"pre_tokenizer", pt}}, pt});
  }
  const auto corpus = Corpus();
  std::vector<Json> requests;
  for (const auto& c : configs) {
    for (const auto& text : corpus) {
      Json r = c.request_base;
      r["text"] = text;
      requests.push_back(std::move(r));
    }
  }
  auto responses = RunReference(requests);
  REQUIRE_MESSAGE(responses.size() == requests.size(),
                  "reference run failed (" << responses.size() << " of " << requests.size() << " answers)");
  size_t idx = 0, compared = 0, mismatches = 0;
  for (const auto& c : configs) {
    std::vector<core::PreTokenizerStep> steps;
    std::string err;
    bool parsed = core::ParsePreTokenizerSteps(c.pre_tokenizer, &steps, &err);
    CHECK_MESSAGE(parsed, c.label << ": " << err);
    std::unique_ptr<core::Splitter> splitter;
    if (parsed) {
      splitter = core::MakeGenericSplitter(steps, &err);
      CHECK_MESSAGE(splitter, c.label << ": " << err);
    }
    for (const auto& text : corpus) {
      const Json& resp = responses[idx++];
      if (!splitter) continue;
      REQUIRE_MESSAGE(resp.contains("spans"), c.label << ": reference error " << resp.dump());
      std::vector<Span> want;
      for (const auto& s : resp["spans"]) {
        Span sp{s[0].get<uint32_t>(), s[1].get<uint32_t>()};
        if (sp.end > sp.begin) want.push_back(sp);  // the reference never yields empty pieces
      }
      std::vector<Span> got;
      splitter->Split(text, got);
      ++compared;
      if (got != want) {
        ++mismatches;
        if (mismatches <= 20) {
          FAIL_CHECK(c.label << "\n  text: " << Json(text).dump() << "\n  want: " << SpansStr(want)
                             << "\n  got:  " << SpansStr(got));
        }
      }
    }
  }
  MESSAGE("compared " << compared << " pre-tokenizations over " << configs.size() << " configurations");
  CHECK(mismatches == 0);
}
