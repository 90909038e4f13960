// Unit tests of tokenizer loading and encoding (golden values from the
// reference; the bulk differential tests live in tests/differential/).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "test_support.h"

using toktier::core::Status;
using toktier::core::Tokenizer;
using toktier::test::LoadTokenizer;

namespace {

std::vector<uint32_t> Enc(const Tokenizer& t, std::string_view s, bool special = false) {
  std::vector<uint32_t> ids;
  t.Encode(s, special, ids);
  return ids;
}

}  // namespace

TEST_CASE("tokenizer: llama3 golden ids from the design brief") {
  auto t = LoadTokenizer("llama3");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  CHECK(Enc(*t, " pipeline") == std::vector<uint32_t>{15660});
  CHECK(Enc(*t, " pipe") == std::vector<uint32_t>{13961});
  CHECK(Enc(*t, "line") == std::vector<uint32_t>{1074});
  // llama3's post-processor is ByteLevel only: no BOS even with specials.
  CHECK(Enc(*t, "hi", true) == Enc(*t, "hi", false));
  // Special tokens in text are recognized.
  auto ids = Enc(*t, "<|eot_id|>");
  REQUIRE(ids.size() == 1);
  CHECK(ids[0] == 128009);
}

TEST_CASE("tokenizer: llama3_1 adds BOS through TemplateProcessing") {
  auto t = LoadTokenizer("llama3_1");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  auto with = Enc(*t, "Hello world", true);
  auto without = Enc(*t, "Hello world", false);
  REQUIRE(with.size() == without.size() + 1);
  CHECK(with[0] == 128000);
  CHECK(std::equal(without.begin(), without.end(), with.begin() + 1));
  CHECK(Enc(*t, "", true) == std::vector<uint32_t>{128000});
  CHECK(Enc(*t, "", false).empty());
}

TEST_CASE("tokenizer: ends are source offsets and end at the text end") {
  for (const char* name : {"llama3", "qwen3", "llama2", "tiktoken:cl100k_base"}) {
    auto t = LoadTokenizer(name);
    REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
    std::string text = "Caf\xC3\xA9 na\xC3\xAFve e\xCC\x81t\xC3\xA9 <|im_start|>user\n  x = 12345;\n";
    std::vector<uint32_t> ids, ends;
    t->EncodeWithEnds(text, true, ids, ends);
    REQUIRE(ids.size() == ends.size());
    CHECK(std::is_sorted(ends.begin(), ends.end()));
    CHECK(ends.back() == text.size());
    std::vector<uint32_t> plain;
    t->Encode(text, true, plain);
    CHECK(plain == ids);
  }
}

TEST_CASE("tokenizer: tiktoken specials only with add_special_tokens") {
  auto t = LoadTokenizer("tiktoken:cl100k_base");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  auto special = Enc(*t, "<|endoftext|>", true);
  REQUIRE(special.size() == 1);
  CHECK(special[0] == 100257);
  CHECK(Enc(*t, "<|endoftext|>", false).size() > 1);
  CHECK(Enc(*t, "hello world") == std::vector<uint32_t>{15339, 1917});
}

TEST_CASE("tokenizer: raw .tiktoken rank file equals the npm JSON encoding") {
  auto bytes = toktier::test::ReadFile(toktier::test::TokenizerPath("tiktoken:cl100k_base"));
  REQUIRE_MESSAGE(bytes.has_value(), "tokenizer files missing: run tools/dev.sh setup");
  auto j = nlohmann::json::parse(*bytes);
  // Re-express the compressed "! offset tok tok ..." line as plain lines.
  std::string ranks_in = j["bpe_ranks"].get<std::string>();
  std::string plain;
  size_t rank = 0;
  size_t pos = 0;
  int field = 0;
  while (pos <= ranks_in.size()) {
    size_t sp = ranks_in.find_first_of(" \n", pos);
    if (sp == std::string::npos) sp = ranks_in.size();
    std::string tokstr = ranks_in.substr(pos, sp - pos);
    if (field == 1) rank = std::stoul(tokstr);
    if (field >= 2 && !tokstr.empty()) plain += tokstr + " " + std::to_string(rank++) + "\n";
    ++field;
    if (sp < ranks_in.size() && ranks_in[sp] == '\n') field = 0;
    pos = sp + 1;
  }
  Status st;
  auto raw = Tokenizer::FromTiktokenRanks(plain, "cl100k_base", &st);
  REQUIRE_MESSAGE(st.ok(), st.message());
  auto ref = LoadTokenizer("tiktoken:cl100k_base");
  std::string text = "Hello, world! It's 2026; naïve café — 日本語 <|endoftext|> done\n\n  x";
  CHECK(Enc(*raw, text, true) == Enc(*ref, text, true));
  CHECK(Enc(*raw, text, false) == Enc(*ref, text, false));
  CHECK(raw->version_hash() != ref->version_hash());
  Status bad;
  CHECK(Tokenizer::FromTiktokenRanks(plain, "no_such_encoding", &bad) == nullptr);
  CHECK(bad.message().find("unknown encoding") != std::string::npos);
}

TEST_CASE("tokenizer: unsupported components are load errors that name them") {
  auto minimal = [](const std::string& extra) {
    return std::string(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]})") + extra + "}";
  };
  Status st;
  CHECK(Tokenizer::FromHuggingFaceJson(minimal(""), &st) != nullptr);
  CHECK(st.ok());
  auto t = Tokenizer::FromHuggingFaceJson(minimal(""), &st);
  CHECK(Enc(*t, "abab") == std::vector<uint32_t>{2, 2});

  CHECK(Tokenizer::FromHuggingFaceJson(minimal(R"(,"normalizer":{"type":"BertNormalizer"})"), &st) == nullptr);
  CHECK(st.message().find("BertNormalizer") != std::string::npos);
  CHECK(Tokenizer::FromHuggingFaceJson(minimal(R"(,"pre_tokenizer":{"type":"UnicodeScripts"})"), &st) == nullptr);
  CHECK(st.message().find("UnicodeScripts") != std::string::npos);
  CHECK(Tokenizer::FromHuggingFaceJson(minimal(R"(,"post_processor":{"type":"Weird"})"), &st) == nullptr);
  CHECK(st.message().find("Weird") != std::string::npos);
  CHECK(Tokenizer::FromHuggingFaceJson(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", &st) == nullptr);
  CHECK(st.message().find("WordPiece") != std::string::npos);
  CHECK(Tokenizer::FromHuggingFaceJson(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":["a z"]}})", &st) == nullptr);
  CHECK(st.message().find("merge") != std::string::npos);
  CHECK(Tokenizer::FromHuggingFaceJson("{not json", &st) == nullptr);
  CHECK(!st.ok());
  CHECK(Tokenizer::FromHuggingFaceJson(R"({"model":{"type":"BPE","vocab":{"a":"zero"}}})", &st) == nullptr);
  CHECK(!st.ok());
  CHECK(Tokenizer::FromBytes("a b c", "", &st) == nullptr);
  CHECK(st.message().find("--encoding") != std::string::npos);
}

TEST_CASE("tokenizer: BPE semantics on a tiny model") {
  // Lowest rank first, leftmost on ties; byte fallback all-or-nothing per char.
  Status st;
  auto t = Tokenizer::FromHuggingFaceJson(
      R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"ba":3,"aba":4,"<unk>":5,"<0xC3>":6,"<0xA9>":7},
          "merges":["b a","a b","ab a"],"unk_token":"<unk>","byte_fallback":true,"fuse_unk":true}})",
      &st);
  REQUIRE_MESSAGE(st.ok(), st.message());
  // "aba": "b a" has rank 0 -> a|ba; "ab a" not applicable -> [a, ba].
  CHECK(Enc(*t, "aba") == std::vector<uint32_t>{0, 3});
  // "abab": b a at pos 1 first -> a ba b.
  CHECK(Enc(*t, "abab") == std::vector<uint32_t>{0, 3, 1});
  // é has both fallback bytes; "ü" lacks them -> unk, fused with the next unknown.
  CHECK(Enc(*t, "\xC3\xA9") == std::vector<uint32_t>{6, 7});
  CHECK(Enc(*t, "\xC3\xBC\xC3\xBC" "a") == std::vector<uint32_t>{5, 0});
}

TEST_CASE("tokenizer: invalid UTF-8 is found") {
  using toktier::core::FindInvalidUtf8;
  CHECK(FindInvalidUtf8("plain ascii text that is long enough") == std::string::npos);
  CHECK(FindInvalidUtf8("caf\xC3\xA9") == std::string::npos);
  CHECK(FindInvalidUtf8("ab\xC3") == 2);
  CHECK(FindInvalidUtf8("ab\x80" "cd") == 2);
  CHECK(FindInvalidUtf8("\xED\xA0\x80") == 0);      // surrogate
  CHECK(FindInvalidUtf8("\xC0\xAF") == 0);          // overlong
  CHECK(FindInvalidUtf8("\xF4\x90\x80\x80") == 0);  // > U+10FFFF
  CHECK(FindInvalidUtf8("12345678\xE0\x80\x80") == 8);
}

TEST_CASE("tokenizer: version hash is stable and content-sensitive") {
  auto a = LoadTokenizer("llama3");
  auto b = LoadTokenizer("llama3_1");
  REQUIRE_MESSAGE((a && b), "tokenizer files missing: run tools/dev.sh setup");
  CHECK(a->version_hash().size() == 16);
  CHECK(a->version_hash() != b->version_hash());
  Status st;
  auto bytes = toktier::test::ReadFile(toktier::test::TokenizerPath("llama3"));
  auto again = Tokenizer::FromHuggingFaceJson(*bytes, &st);
  CHECK(again->version_hash() == a->version_hash());
}
