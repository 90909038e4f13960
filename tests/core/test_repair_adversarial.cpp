// Issue 15: repair must equal full tokenization under adversarial edits.
//
// Regression tests for the two counterexamples of the issue, then a standing
// campaign: edit sessions aimed at seams (whitespace of every kind, CR/LF,
// digits, contractions, punctuation runs, combining marks, characters NFKC
// rewrites, literal U+2581, special-token strings whole and split, emoji ZWJ
// sequences, CJK, Hangul jamo) over every shipped tokenizer and synthetic
// tokenizers that put each normalizer in front of each pre-tokenizer. Every
// step is checked twice: the repaired state (IDs and token ends) against
// toktier's full tokenization in process, and the repaired IDs against the
// Node reference's full tokenization of the same text (batched per
// tokenizer). CI runs about 6.5e4 repairs; TOKTIER_LONG_CAMPAIGN=1 runs 200x
// as many (the campaign of docs/repair.md) (TOKTIER_CAMPAIGN_STEPS overrides the steps per tokenizer,
// TOKTIER_CAMPAIGN_REFERENCE_EVERY=N sends every N-th step to the reference).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "test_support.h"

using toktier::core::RepairOutcome;
using toktier::core::RepairPath;
using toktier::core::Repairer;
using toktier::core::Tokenizer;
using toktier::core::TokenState;

namespace {

// A tokenizer under test: its file (for the reference) and the loaded model.
struct Subject {
  std::string name;
  std::string path;      // what ref_encode.js loads
  std::string encoding;  // --encoding for raw rank files (unused here)
  std::shared_ptr<const Tokenizer> tok;
  std::vector<std::string> specials;  // added-token strings to aim at seams
  bool temp_file = false;
};

void RemoveTemp(const Subject& s) {
  if (s.temp_file) std::filesystem::remove(s.path);
}

// Added-token strings of a tokenizer.json or tiktoken JSON, shortest first
// (those are the ones a text plausibly contains), at most `limit`.
std::vector<std::string> SpecialStrings(const nlohmann::json& j, size_t limit) {
  std::vector<std::string> out;
  if (j.contains("added_tokens")) {
    for (const auto& a : j["added_tokens"]) out.push_back(a.value("content", std::string()));
  } else if (j.contains("special_tokens")) {
    for (const auto& [k, v] : j["special_tokens"].items()) out.push_back(k);
  }
  std::erase_if(out, [](const std::string& s) { return s.empty() || s.size() > 24; });
  std::stable_sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::optional<Subject> Shipped(const std::string& name) {
  Subject s;
  s.name = name;
  s.path = toktier::test::TokenizerPath(name);
  auto bytes = toktier::test::ReadFile(s.path);
  REQUIRE_MESSAGE(bytes.has_value(), "tokenizer files missing: run tools/dev.sh setup (no " << s.path << ")");
  s.tok = toktier::test::LoadTokenizer(name);
  REQUIRE(s.tok);
  s.specials = SpecialStrings(nlohmann::json::parse(*bytes), 10);
  return s;
}

std::optional<Subject> Synthetic(const nlohmann::json& j, const std::string& name) {
  Subject s;
  s.name = name;
  s.path = (std::filesystem::temp_directory_path() / ("toktier_repair_adversarial_" + name + ".json")).string();
  s.temp_file = true;
  std::string text = j.dump();
  std::ofstream(s.path) << text;
  toktier::core::Status st;
  s.tok = Tokenizer::FromHuggingFaceJson(text, &st);
  if (!st.ok()) {
    FAIL_CHECK("synthetic tokenizer " << name << " does not load: " << st.message());
    RemoveTemp(s);
    return std::nullopt;
  }
  s.specials = SpecialStrings(j, 6);
  return s;
}

// ---- the edit generator ----------------------------------------------------

const std::vector<std::string>& SeamFragments() {
  static const std::vector<std::string> f = {
      // whitespace of every kind, line ends
      " ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\r", " \n", "\xC2\xA0", "\xC2\x85", "\xE2\x80\xA8",
      "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83", "\xE2\x80\x84", "\xE2\x80\x85",
      "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A", "\xE3\x80\x80",
      "\xE2\x80\x8B", "\xE2\x80\x8D", "\xEF\xBB\xBF",
      // letters, words, case
      "a", "e", "s", "t", "x", "Z", "Hello", "world", "ABC", "xY", "foo", "The", "\xC3\xA9", "\xC7\x85",
      "\xC5\xBF", "\xE2\x84\xAA", "\xC3\x9F",
      // digits
      "1", "12", "123", "4567", "0", "\xD9\xA3", "\xE2\x91\xA0", "\xC2\xBD",
      // contractions
      "'s", "'S", "'t", "'ll", "'LL", "'re", "'ve", "'m", "'d", "'", "n't",
      // punctuation runs and symbols
      ".", "...", "*/", "/*", "//", "->", "?!", "\"", "(", ")", "{", "}", ";", ",", "#", "<", ">", "=",
      "==", "_", "-", "--", "`", "```", "$", "%", "&&", "|", "\\", "@", "+", "~",
      // combining marks after letters, precomposed forms
      "\xCC\x81", "\xCC\xA7", "\xCC\x88", "e\xCC\x81", "a\xCC\x88", "s\xCC\x87", "<\xCC\xB8",
      // compatibility characters NFKC rewrites
      "\xEF\xAC\x81", "\xEF\xAC\x83", "\xEF\xBC\xA1", "\xEF\xBC\xA2", "\xEF\xBC\x91", "\xEF\xBC\x8E",
      "\xE2\x84\xA2", "\xE3\x8E\x9E", "\xC2\xB2", "\xE2\x85\xA0", "\xEF\xBD\xA1", "\xC2\xA8", "\xC2\xB4",
      // literal metaspace
      "\xE2\x96\x81", "\xE2\x96\x81\xE2\x96\x81", "\xE2\x96\x81x",
      // emoji, ZWJ sequences, modifiers
      "\xF0\x9F\x91\x8D", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      // CJK, kana, Hangul (precomposed and jamo), Arabic
      "\xE4\xB8\xAD\xE6\x96\x87", "\xE6\x97\xA5", "\xE3\x81\xB2\xE3\x82\x89", "\xE3\x82\xAB\xE3\x82\xBF",
      "\xED\x95\x9C\xEA\xB5\xAD", "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", "\xE1\x84\x92\xE1\x85\xA1",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7",
      // controls
      "\x01", "\x7F", "\xC2\xAD"};
  return f;
}

bool IsCharStart(const std::string& s, size_t i) {
  return i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
}
size_t BackToChar(const std::string& s, size_t i) {
  while (i > 0 && !IsCharStart(s, i)) --i;
  return i;
}

struct Generator {
  std::mt19937_64 rng;
  const std::vector<std::string>& specials;

  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); }

  std::string Fragment() {
    // Special-token strings, whole or cut in two (the two halves may arrive
    // in separate steps, so the seam falls inside them).
    if (!specials.empty() && Below(6) == 0) {
      const std::string& s = specials[Below(specials.size())];
      if (Below(2) == 0) return s;
      size_t cut = BackToChar(s, 1 + Below(s.size() - 1));
      if (cut == 0) return s;
      return Below(2) == 0 ? s.substr(0, cut) : s.substr(cut);
    }
    return SeamFragments()[Below(SeamFragments().size())];
  }
  std::string Fragments(size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += Fragment();
    return out;
  }
};

// One edit aimed at the seam: mostly appends (what agents do), then
// truncations, replacements near the end and edits further back.
std::string Edit(Generator& g, const std::string& text) {
  switch (g.Below(10)) {
    case 0:
    case 1:
    case 2:
    case 3:
      return text + g.Fragments(1 + g.Below(4));
    case 4: {  // drop a short tail, then append
      size_t cut = BackToChar(text, text.size() - std::min(text.size(), 1 + g.Below(8)));
      return text.substr(0, cut) + g.Fragments(1 + g.Below(3));
    }
    case 5: {  // replace a region near the end
      size_t a = BackToChar(text, text.size() - std::min(text.size(), g.Below(40)));
      size_t b = BackToChar(text, std::min(text.size(), a + g.Below(6)));
      return text.substr(0, a) + g.Fragments(1 + g.Below(2)) + text.substr(b);
    }
    case 6: {  // insert anywhere
      size_t a = BackToChar(text, g.Below(text.size() + 1));
      return text.substr(0, a) + g.Fragments(1 + g.Below(2)) + text.substr(a);
    }
    case 7: {  // pure truncation
      size_t cut = BackToChar(text, text.size() - std::min(text.size(), 1 + g.Below(12)));
      return text.substr(0, cut);
    }
    case 8: {  // duplicate the last characters (extends the last piece)
      size_t a = BackToChar(text, text.size() - std::min(text.size(), 1 + g.Below(6)));
      return text + text.substr(a);
    }
    default:  // a special-token string right at the seam
      return text + (g.specials.empty() ? g.Fragment() : g.specials[g.Below(g.specials.size())]) +
             g.Fragments(g.Below(3));
  }
}

std::string Escaped(const std::string& s) { return nlohmann::json(s).dump(); }

// Every step goes to the reference unless TOKTIER_CAMPAIGN_REFERENCE_EVERY=N
// (then every N-th; the in-process full tokenization still checks all).
size_t ReferenceEvery() {
  const char* v = std::getenv("TOKTIER_CAMPAIGN_REFERENCE_EVERY");
  size_t n = v ? std::strtoull(v, nullptr, 10) : 1;
  return n == 0 ? 1 : n;
}

struct CampaignResult {
  size_t repairs = 0;
  size_t reference_checked = 0;
  size_t divergences = 0;
  std::map<std::string, size_t> paths;
};

// Runs `steps` repairs on one subject with one add_special_tokens setting.
void RunCampaign(const Subject& s, bool special, size_t steps, uint64_t seed, size_t max_bytes,
                 CampaignResult& total) {
  Generator g{std::mt19937_64(seed), s.specials};
  toktier::test::RequireNode();
  std::string ref_input;
  std::vector<std::string> ours;           // repaired IDs per step, as JSON
  std::vector<std::string> descriptions;   // how to reproduce each step
  auto flush_reference = [&] {
    if (ours.empty()) return;
    auto lines = toktier::test::RunNodeTool("ref_encode.js --tokenizer '" + s.path + "'", ref_input);
    REQUIRE_MESSAGE(lines.has_value(), "reference encoder failed for " << s.name);
    REQUIRE(lines->size() == ours.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      if ((*lines)[i] != ours[i]) {
        ++total.divergences;
        FAIL_CHECK("repair differs from the reference: " << s.name << " special=" << special << " "
                                                         << descriptions[i]);
      }
    }
    total.reference_checked += ours.size();
    ref_input.clear();
    ours.clear();
    descriptions.clear();
  };

  TokenState state;
  std::string text;
  std::vector<uint32_t> want, want_ends;
  for (size_t i = 0; i < steps; ++i) {
    std::string prev = text;
    if (text.size() > max_bytes || g.Below(40) == 0) {
      state = TokenState();  // a new session
      prev.clear();
      text = g.Fragments(g.Below(4));
    }
    text = Edit(g, text);
    RepairOutcome o = Repairer::Update(*s.tok, state, text, special);
    std::string path(toktier::core::RepairPathName(o.path));
    if (o.path == RepairPath::kFull) path += "/" + std::string(toktier::core::FullReasonName(o.full_reason));
    ++total.paths[path];
    ++total.repairs;
    s.tok->EncodeWithEnds(text, special, want, want_ends);
    std::string how = "path=" + path + " sync=" + std::to_string(o.sync_point) + " prev=" + Escaped(prev) +
                      " next=" + Escaped(text);
    if (state.ids() != want || state.ends() != want_ends) {
      ++total.divergences;
      FAIL_CHECK("repair differs from full tokenization: " << s.name << " special=" << special << " " << how);
      state = TokenState();
      continue;
    }
    if (i % ReferenceEvery() == 0) {
      ref_input += nlohmann::json{{"text", text}, {"add_special_tokens", special}}.dump() + "\n";
      ours.push_back(nlohmann::json(state.ids()).dump());
      descriptions.push_back(std::move(how));
      if (ours.size() >= 20000) flush_reference();
    }
  }
  flush_reference();
}

size_t StepsPerRun(size_t ci_default) {
  if (const char* v = std::getenv("TOKTIER_CAMPAIGN_STEPS")) return std::strtoull(v, nullptr, 10);
  const char* longc = std::getenv("TOKTIER_LONG_CAMPAIGN");
  return longc && std::string(longc) == "1" ? ci_default * 200 : ci_default;
}

void Report(const char* what, const CampaignResult& r) {
  std::ostringstream os;
  os << what << ": " << r.repairs << " repairs, " << r.reference_checked << " checked against the reference, "
     << r.divergences << " divergences;";
  for (const auto& [k, v] : r.paths) os << " " << k << "=" << v;
  MESSAGE(os.str());
}

std::optional<nlohmann::json> BaseJson(const std::string& name) {
  auto bytes = toktier::test::ReadFile(toktier::test::TokenizerPath(name));
  REQUIRE_MESSAGE(bytes.has_value(),
                  "tokenizer files missing: run tools/dev.sh setup (no " << toktier::test::TokenizerPath(name) << ")");
  return nlohmann::json::parse(*bytes);
}

// Checks one edit sequence step by step against full tokenization and the
// reference; returns the outcomes.
std::vector<RepairOutcome> CheckSequence(const Subject& s, const std::vector<std::string>& texts, bool special) {
  TokenState state;
  std::vector<RepairOutcome> outcomes;
  std::string ref_input;
  std::vector<std::string> ours;
  for (const std::string& text : texts) {
    outcomes.push_back(Repairer::Update(*s.tok, state, text, special));
    std::vector<uint32_t> want, want_ends;
    s.tok->EncodeWithEnds(text, special, want, want_ends);
    CHECK(state.ids() == want);
    CHECK(state.ends() == want_ends);
    ref_input += nlohmann::json{{"text", text}, {"add_special_tokens", special}}.dump() + "\n";
    ours.push_back(nlohmann::json(state.ids()).dump());
  }
  toktier::test::RequireNode();
  auto lines = toktier::test::RunNodeTool("ref_encode.js --tokenizer '" + s.path + "'", ref_input);
  REQUIRE(lines.has_value());
  CHECK(*lines == ours);
  return outcomes;
}

nlohmann::json ByteLevelGpt2() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}, {"trim_offsets", true}};
}

}  // namespace

TEST_CASE("Llama 2, an append after </s> and U+2028 does not keep the next segment's prefix token") {
  auto s = Shipped("llama2");
  REQUIRE_MESSAGE(s, "tokenizer files missing: run tools/dev.sh setup");
  // The second segment's Metaspace-style prefix "▁" stands alone before the
  // byte-fallback tokens of U+2028, so it ends where </s> ends (offset 20).
  auto outcomes = CheckSequence(*s, {"plain text then </s>\xE2\x80\xA8",
                                     "plain text then </s>\xE2\x80\xA8\n\n\xE2\x96\x81\xE2\x96\x81*/"},
                                /*special=*/true);
  CHECK(outcomes[1].path != RepairPath::kFull);
  CHECK(outcomes[1].sync_point == 20);
}

TEST_CASE("NFKC before a ByteLevel pre-tokenizer, U+2000 before the seam") {
  auto base = BaseJson("llama3");
  REQUIRE_MESSAGE(base, "tokenizer files missing: run tools/dev.sh setup");
  (*base)["normalizer"] = {{"type", "NFKC"}};
  (*base)["pre_tokenizer"] = ByteLevelGpt2();
  auto s = Synthetic(*base, "nfkc_gpt2");
  REQUIRE(s);
  // NFKC turns U+2000 into U+0020, which " ?" then joins to "*/": the cut
  // after "1\u2000" is not hard in the normalized text.
  CheckSequence(*s, {"x = 1\xE2\x80\x80", "x = 1\xE2\x80\x80*/"}, false);
  // The same with a plain space, and the chain where a Replace feeds a
  // Unicode form a combining mark (the junction is checked per op).
  CheckSequence(*s, {"x = 1 ", "x = 1 */"}, false);
  (*base)["normalizer"] = {{"type", "Sequence"},
                           {"normalizers", {{{"type", "Replace"}, {"pattern", {{"String", "~"}}}, {"content", "\xCC\x81"}},
                                            {{"type", "NFC"}}}}};
  auto chain = Synthetic(*base, "replace_nfc_gpt2");
  REQUIRE(chain);
  CheckSequence(*chain, {"caf", "cafe", "cafe~", "cafe~ ok", "cafe~~s"}, false);
  RemoveTemp(*s);
  RemoveTemp(*chain);
}

TEST_CASE("adversarial edit campaign over the shipped tokenizers") {
  const std::vector<std::string> names = {"llama3",     "llama3_1",  "qwen3",     "deepseek_v3",
                                          "gptoss",     "gpt4o",     "gpt35turbo", "llama2",
                                          "gemma3",     "tiktoken:cl100k_base", "tiktoken:o200k_base",
                                          "tiktoken:r50k_base", "tiktoken:p50k_base"};
  const size_t steps = StepsPerRun(1200);
  CampaignResult total;
  uint64_t seed = 15000;
  for (const auto& name : names) {
    auto s = Shipped(name);
    REQUIRE_MESSAGE(s, "tokenizer files missing: run tools/dev.sh setup");
    for (bool special : {true, false}) RunCampaign(*s, special, steps, ++seed, 1200, total);
  }
  Report("shipped tokenizers", total);
  CHECK(total.divergences == 0);
}

TEST_CASE("adversarial edit campaign over every normalizer with every pre-tokenizer") {
  auto llama3 = BaseJson("llama3");
  auto qwen3 = BaseJson("qwen3");
  auto deepseek = BaseJson("deepseek_v3");
  auto llama2 = BaseJson("llama2");
  REQUIRE_MESSAGE((llama3 && qwen3 && deepseek && llama2), "tokenizer files missing: run tools/dev.sh setup");
  using nlohmann::json;
  auto replace = [](const char* pat, const char* content) {
    return json{{"type", "Replace"}, {"pattern", {{"String", pat}}}, {"content", content}};
  };
  auto seq = [](std::vector<json> items) { return json{{"type", "Sequence"}, {"normalizers", items}}; };
  const std::vector<std::pair<std::string, json>> normalizers = {
      {"none", nullptr},
      {"nfc", {{"type", "NFC"}}},
      {"nfd", {{"type", "NFD"}}},
      {"nfkc", {{"type", "NFKC"}}},
      {"nfkd", {{"type", "NFKD"}}},
      {"replace", replace(" ", "\xE2\x96\x81")},
      {"prepend", {{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}},
      {"strip", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}},
      {"seq_nfkc_replace", seq({{{"type", "NFKC"}}, replace("\xE2\x80\x80", " ")})},
      {"seq_replace_nfc", seq({replace("~", "\xCC\x81"), {{"type", "NFC"}}})},
      {"seq_nfd_nfkc", seq({{{"type", "NFD"}}, {{"type", "NFKC"}}})},
      {"seq_prepend_replace_nfkc", seq({{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
                                        replace(" ", "\xE2\x96\x81"), {{"type", "NFKC"}}})},
  };
  // Pre-tokenizers on the byte-level vocabulary of Llama 3.
  const std::vector<std::pair<std::string, json>> byte_level = {
      {"gpt2", ByteLevelGpt2()},
      {"gpt2_prefix", {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", true}, {"trim_offsets", true}}},
      {"cl100k", (*llama3)["pre_tokenizer"]},
      {"qwen", (*qwen3)["pre_tokenizer"]},
      {"deepseek", (*deepseek)["pre_tokenizer"]},
      {"digits_bytelevel",
       {{"type", "Sequence"},
        {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, ByteLevelGpt2()}}}},
  };
  const size_t steps = StepsPerRun(350);
  CampaignResult total;
  uint64_t seed = 150000;
  // TOKTIER_CAMPAIGN_ONLY=NAME runs only the subjects whose name contains NAME.
  const char* only = std::getenv("TOKTIER_CAMPAIGN_ONLY");
  auto run = [&](json j, const std::string& name) {
    if (only && name.find(only) == std::string::npos) return;
    auto s = Synthetic(j, name);
    if (!s) return;
    RunCampaign(*s, /*special=*/true, steps, ++seed, 900, total);
    RemoveTemp(*s);
  };
  for (const auto& [pname, pre] : byte_level) {
    for (const auto& [nname, norm] : normalizers) {
      json j = *llama3;
      j["normalizer"] = norm;
      j["pre_tokenizer"] = pre;
      run(j, nname + "_" + pname);
    }
  }
  // SentencePiece-style vocabulary (Llama 2, byte fallback): no
  // pre-tokenizer, and Metaspace with each prepend scheme, split on and off.
  for (const auto& [nname, norm] : normalizers) {
    json j = *llama2;
    j["normalizer"] = norm;
    j["pre_tokenizer"] = nullptr;
    run(j, nname + "_none");
  }
  for (const char* scheme : {"always", "first", "never"}) {
    for (bool split : {true, false}) {
      for (const char* nname : {"none", "nfkc"}) {
        json j = *llama2;
        j["normalizer"] = std::string(nname) == "none" ? json(nullptr) : json{{"type", "NFKC"}};
        j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"},
                              {"prepend_scheme", scheme}, {"split", split}};
        run(j, std::string(nname) + "_metaspace_" + scheme + (split ? "_split" : ""));
      }
    }
  }
  Report("synthetic tokenizers", total);
  CHECK(total.divergences == 0);
}
