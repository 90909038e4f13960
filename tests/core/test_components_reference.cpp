// Tokenizer components that no shipped file exercises fully, checked against
// the Node reference on synthetic tokenizer.json files: Metaspace (every
// prepend_scheme, split on/off; on Llama 2's vocabulary), ByteLevel
// add_prefix_space, and BPE continuing_subword_prefix / end_of_word_suffix /
// fuse_unk.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "test_support.h"

namespace {

std::string RunReference(const std::string& tokenizer_path, const std::vector<std::string>& texts, bool special) {
  std::string input;
  for (const auto& t : texts) input += nlohmann::json{{"text", t}, {"add_special_tokens", special}}.dump() + "\n";
  auto lines = toktier::test::RunNodeTool("ref_encode.js --tokenizer '" + tokenizer_path + "'", input);
  std::string out;
  if (!lines) return out;
  for (const auto& line : *lines) out += line + "\n";
  return out;
}

// A synthetic tokenizer.json, written to a temp file for the reference and
// loaded by toktier; the file goes away with the object.
struct Synthetic {
  Synthetic(const nlohmann::json& j, const std::string& name)
      : path((std::filesystem::temp_directory_path() / ("toktier_" + name + ".json")).string()) {
    std::ofstream(path) << j.dump();
    toktier::core::Status st;
    tok = toktier::core::Tokenizer::FromHuggingFaceJson(j.dump(), &st);
    REQUIRE_MESSAGE(st.ok(), st.message());
  }
  ~Synthetic() { std::filesystem::remove(path); }
  std::string path;
  std::shared_ptr<const toktier::core::Tokenizer> tok;
};

// Checks toktier's IDs for every text against the reference's.
void CheckAgainstReference(const Synthetic& s, const std::vector<std::string>& texts, bool special) {
  std::string ref = RunReference(s.path, texts, special);
  REQUIRE_MESSAGE(!ref.empty(), "reference encoder failed");
  std::string ours;
  for (const auto& t : texts) {
    std::vector<uint32_t> ids;
    s.tok->Encode(t, special, ids);
    ours += nlohmann::json(ids).dump() + "\n";
  }
  CHECK(ours == ref);
}

}  // namespace

TEST_CASE("metaspace: prepend schemes and split match the reference") {
  auto base = toktier::test::ReadFile(toktier::test::TokenizerPath("llama2"));
  REQUIRE_MESSAGE(base.has_value(), "tokenizer files missing: run tools/dev.sh setup");
  toktier::test::RequireNode();
  const std::vector<std::string> texts = {
      "Hello world", " leading space", "two  spaces and\ttab", "<s>after special</s> more", "",
      "x", "\xE2\x96\x81" "already marked", "multi\nline\n text", "  ", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"};
  for (const char* scheme : {"always", "first", "never"}) {
    for (bool split : {true, false}) {
      auto j = nlohmann::json::parse(*base);
      j["normalizer"] = nullptr;
      j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"},
                            {"prepend_scheme", scheme}, {"split", split}};
      Synthetic syn(j, std::string("metaspace_") + scheme + (split ? "_s" : "_n"));
      const auto& tok = syn.tok;
      for (bool special : {false, true}) {
        INFO("scheme=" << scheme << " split=" << split << " special=" << special);
        CheckAgainstReference(syn, texts, special);
        // Repair stays exact on top of it.
        toktier::core::TokenState state;
        std::string acc;
        for (const auto& t : texts) {
          acc += t;
          toktier::core::Repairer::Update(*tok, state, acc, special);
          std::vector<uint32_t> want;
          tok->Encode(acc, special, want);
          CHECK(state.ids() == want);
        }
      }
    }
  }
}

TEST_CASE("byte-level add_prefix_space matches the reference") {
  auto base = toktier::test::ReadFile(toktier::test::TokenizerPath("llama3"));
  REQUIRE_MESSAGE(base.has_value(), "tokenizer files missing: run tools/dev.sh setup");
  toktier::test::RequireNode();
  const std::vector<std::string> texts = {"Hello world", " already spaced", "<|eot_id|>after", "", "x",
                                          "a<|eot_id|> b", "\n\nnewlines", "12345 numbers"};
  auto j = nlohmann::json::parse(*base);
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}, {"trim_offsets", true}};
  CheckAgainstReference(Synthetic(j, "bl_prefix"), texts, false);
}

TEST_CASE("BPE continuing_subword_prefix and end_of_word_suffix match the reference") {
  toktier::test::RequireNode();
  // A small WordPiece-like BPE: "##" marks continuations, "</w>" word ends.
  nlohmann::json vocab = nlohmann::json::object();
  uint32_t next = 0;
  for (std::string c : {"a", "b", "c"}) {
    for (std::string form : {c, "##" + c, c + "</w>", "##" + c + "</w>"}) vocab[form] = next++;
  }
  for (std::string t : {"ab", "abc</w>", "##bc</w>", "ca", "cab", "[UNK]"}) vocab[t] = next++;
  nlohmann::json j = {
      {"model",
       {{"type", "BPE"}, {"vocab", vocab},
        {"merges", {"a ##b", "ab ##c</w>", "##b ##c</w>", "c ##a", "ca ##b"}},
        {"continuing_subword_prefix", "##"}, {"end_of_word_suffix", "</w>"}, {"unk_token", "[UNK]"},
        {"fuse_unk", true}}},
      {"pre_tokenizer", {{"type", "Whitespace"}}},
      {"added_tokens", nlohmann::json::array()}};
  const std::vector<std::string> texts = {"abc", "a b c", "cab abc cabc", "bc", "abcabc", "xyz", "axxb",
                                          "c a b", "aaa bbb ccc"};
  CheckAgainstReference(Synthetic(j, "prefix_suffix"), texts, false);
}
