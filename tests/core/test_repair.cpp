// Property tests of incremental repair: every update must equal a full
// tokenization of the new text, for every tokenizer family, over the classic
// seams, random edit sequences on real and adversarial text, and long appends.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/core.h"
#include "test_support.h"

using toktier::core::FullReason;
using toktier::core::RepairOutcome;
using toktier::core::RepairPath;
using toktier::core::Repairer;
using toktier::core::Tokenizer;
using toktier::core::TokenState;

namespace {

const std::vector<std::string> kFamilies = {"llama3",      "llama3_1",  "qwen3",     "deepseek_v3",
                                            "gptoss",      "gpt4o",     "gpt35turbo", "llama2",
                                            "gemma3",      "tiktoken:cl100k_base", "tiktoken:o200k_base",
                                            "tiktoken:r50k_base", "tiktoken:p50k_base"};

struct Tally {
  std::map<std::string, size_t> paths;
  size_t steps = 0;
};

// Updates the state and checks it against a full tokenization.
RepairOutcome Step(const Tokenizer& t, TokenState& st, const std::string& text, bool special, Tally& tally,
                   size_t known_common_prefix = 0) {
  toktier::core::RepairOptions opt;
  opt.known_common_prefix = known_common_prefix;
  RepairOutcome o = Repairer::Update(t, st, text, special, opt);
  std::vector<uint32_t> want, want_ends;
  t.EncodeWithEnds(text, special, want, want_ends);
  REQUIRE(st.text() == text);
  if (st.ids() != want) {
    size_t i = 0;
    while (i < want.size() && i < st.ids().size() && want[i] == st.ids()[i]) ++i;
    FAIL_CHECK("repair diverged: path=" << toktier::core::RepairPathName(o.path) << " L=" << o.common_prefix
                                        << " p=" << o.sync_point << " at token " << i << " of " << want.size()
                                        << " text tail: '" << text.substr(text.size() > 60 ? text.size() - 60 : 0)
                                        << "'");
  }
  CHECK(st.ends() == want_ends);
  ++tally.steps;
  std::string key(toktier::core::RepairPathName(o.path));
  if (o.path == RepairPath::kFull) key += std::string("/") + std::string(toktier::core::FullReasonName(o.full_reason));
  ++tally.paths[key];
  return o;
}

std::string RealText() {
  static std::string text = [] {
    std::string out;
    for (const char* p : {"/usr/share/common-licenses/GPL-3", "/usr/include/stdio.h",
                          "/usr/share/i18n/locales/ja_JP", "/usr/share/i18n/locales/ru_RU",
                          "/usr/share/i18n/locales/ar_SA"}) {
      if (auto s = toktier::test::ReadFile(p)) out += s->substr(0, 40000);
    }
    if (out.empty()) {
      out = "The quick brown fox jumps over the lazy dog. It's 2026; x = f(y) + 12345;\n";
      for (int i = 0; i < 10; ++i) out += out;
    }
    return out;
  }();
  return text;
}

std::string AdversarialText(std::mt19937& rng, size_t n) {
  static const std::vector<std::string> atoms = {
      " ", "  ", "\t", "\n", "\r\n", "\r", "\xC2\x85", "\xE2\x80\xA8", "\xC2\xA0", "\xE3\x80\x80",
      "a", "Z", "e\xCC\x81", "\xC3\xA9", "\xCC\x81", "'s", "'S", "'LL", "'ll", "'", "1", "12", "123",
      "4567", "\xD9\xA3", "\xEF\xBC\x95", ".", ",", "...", "/", "//", "(", ")", "{", "}", "\"",
      "\xE6\x97\xA5\xE6\x9C\xAC", "\xE3\x81\xAE", "\xEC\x95\x88", "\xF0\x9F\x98\x80",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9", "<|eot", "_id|>", "<|eot_id|>", "<|im_start|>",
      "<|im_end|>", "<|endoftext|>", "<", "|", ">", "pipe", "line", "The", "HELLO", "hello", "_", "-",
      "\xE1\x84\x80", "\xE1\x85\xA1", "\xEA\xB0\x80", "Dž", "\xE2\x96\x81", "    ", "\t\t", "\n\n\n"};
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, atoms.size() - 1);
  while (s.size() < n) s += atoms[pick(rng)];
  return s;
}

// Cuts s to at most n bytes at a character boundary.
std::string CutAt(const std::string& s, size_t n) {
  n = std::min(n, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

TEST_CASE("repair: classic seams equal full tokenization") {
  const std::vector<std::pair<std::string, std::string>> seams = {
      {" pipe", "line"}, {"12", "345"}, {"  ", "x"}, {"\r", "\n"}, {"a", "\xCC\x81"},
      {"<|eot", "_id|>"}, {"'", "s"}, {"'S", "LL"}, {"e", "\xCC\x81"}, {"<|im_", "start|>"},
      {"x ", " y"}, {"foo\n", "\n"}, {"a", " "}, {"word", "'s"}, {"\xE6\x97\xA5", "\xE6\x9C\xAC"},
      {"1", "\xD9\xA3"}, {"<|endof", "text|>"}, {"hello", "<|eot_id|>"}, {"\xF0\x9F\x91\xA8", "\xE2\x80\x8D\xF0\x9F\x91\xA9"},
      {"\xC3\xA9", "\xCC\x81"}, {" ", "\xC2\xA0"}, {"End.", ""}};
  const std::vector<std::string> contexts = {"", "Some context here. ", "<|im_start|>user\nhi there",
                                             "x = 10;\n    ", "ends with space "};
  for (const auto& name : kFamilies) {
    auto t = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
    Tally tally;
    for (bool special : {false, true}) {
      for (const auto& ctx : contexts) {
        for (const auto& [a, b] : seams) {
          TokenState st;
          Step(*t, st, ctx + a, special, tally);
          Step(*t, st, ctx + a + b, special, tally);
          Step(*t, st, ctx + a + b + " and more text after it.", special, tally);
          Step(*t, st, ctx + a, special, tally);  // truncate back
        }
      }
    }
    MESSAGE(name << ": " << tally.steps << " seam steps");
  }
}

TEST_CASE("repair: random edit sequences on real and adversarial text") {
  const bool long_run = std::getenv("TOKTIER_LONG_CAMPAIGN") != nullptr;
  const int sessions = long_run ? 40 : 4;
  const int steps_per_session = long_run ? 200 : 60;
  for (const auto& name : kFamilies) {
    auto t = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
    Tally tally;
    std::mt19937 rng(std::hash<std::string>{}(name));
    const std::string real = RealText();
    for (int s = 0; s < sessions; ++s) {
      bool special = s % 2 == 1;
      TokenState st;
      std::string text;
      for (int k = 0; k < steps_per_session; ++k) {
        int op = std::uniform_int_distribution<int>(0, 9)(rng);
        std::string next = text;
        if (op <= 5) {  // append: sizes from 1 char to several KB
          size_t len = std::min<size_t>(1u << std::uniform_int_distribution<int>(0, 12)(rng), 8192);
          if (rng() % 2) {
            size_t at = rng() % real.size();
            std::string chunk = CutAt(real.substr(CutAt(real, at).size()), len);
            next += chunk;
          } else {
            next += AdversarialText(rng, len);
          }
        } else if (op <= 7 && !text.empty()) {  // truncate
          next = CutAt(text, rng() % (text.size() + 1));
        } else if (!text.empty()) {  // edit in the middle: replace a tail from some point
          std::string head = CutAt(text, rng() % (text.size() + 1));
          next = head + AdversarialText(rng, 1 + rng() % 40) + text.substr(std::min(text.size(), head.size() + 5));
          // Keep valid UTF-8: recut the tail at a boundary.
          if (toktier::core::FindInvalidUtf8(next) != std::string::npos) next = head + AdversarialText(rng, 10);
        } else {
          next = AdversarialText(rng, 100);
        }
        REQUIRE(toktier::core::FindInvalidUtf8(next) == std::string::npos);
        // Half the steps pass a proven common prefix (any length up to the
        // true one, also inside a character), as the proxy does.
        size_t known = 0;
        if (k % 2 == 1) {
          size_t lcp = 0;
          while (lcp < text.size() && lcp < next.size() && text[lcp] == next[lcp]) ++lcp;
          known = rng() % (lcp + 1);
        }
        Step(*t, st, next, special, tally, known);
        text = next;
      }
    }
    std::string summary;
    for (const auto& [k, v] : tally.paths) summary += " " + k + "=" + std::to_string(v);
    MESSAGE(name << ": " << tally.steps << " steps;" << summary);
  }
}

TEST_CASE("repair: long appends and a 100K-character piece without spaces") {
  for (const auto& name : kFamilies) {
    auto t = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
    Tally tally;
    TokenState st;
    std::string text = RealText().substr(0, 50000);
    Step(*t, st, text, true, tally);
    text += std::string(100000, 'x');  // one huge piece
    Step(*t, st, text, true, tally);
    text += " tail text";
    auto o = Step(*t, st, text, true, tally);
    INFO(name << " path " << toktier::core::RepairPathName(o.path) << " reason "
              << toktier::core::FullReasonName(o.full_reason));
    // Without a pre-tokenizer (SentencePiece-style) there may be no sync
    // point in 100K letters; then the full path is the right answer.
    const bool has_pretokenizer = name != "llama2" && name != "gemma3";
    if (has_pretokenizer) CHECK(o.path != RepairPath::kFull);
    text += RealText().substr(0, 100000);
    o = Step(*t, st, text, true, tally);
    if (has_pretokenizer) CHECK(o.path != RepairPath::kFull);
  }
}

TEST_CASE("repair: outcomes are reported") {
  auto t = toktier::test::LoadTokenizer("llama3_1");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  TokenState st;
  auto o = Repairer::Update(*t, st, "Hello there, friend.", true);
  CHECK(o.path == RepairPath::kFull);
  CHECK(o.full_reason == FullReason::kNoState);
  o = Repairer::Update(*t, st, "Hello there, friend.", true);
  CHECK(o.path == RepairPath::kUnchanged);
  o = Repairer::Update(*t, st, "Hello there, friend. How are you?", true);
  CHECK(o.path == RepairPath::kFirstTry);
  CHECK(o.kept_tokens > 1);
  CHECK(o.sync_point <= o.common_prefix);
  o = Repairer::Update(*t, st, "Hello there, friend. How are you?", false);
  CHECK(o.path == RepairPath::kFull);
  CHECK(o.full_reason == FullReason::kSpecialsMismatch);
  o = Repairer::Update(*t, st, "Jello there, friend.", false);
  CHECK(o.path == RepairPath::kFull);
  CHECK(o.full_reason == FullReason::kEditAtStart);
  auto other = toktier::test::LoadTokenizer("llama3");
  o = Repairer::Update(*other, st, "Jello there, friend.", false);
  CHECK(o.full_reason == FullReason::kVersionMismatch);
  toktier::core::RepairOptions quarantined;
  quarantined.allow_fast_path = false;
  o = Repairer::Update(*other, st, "Jello there, friend!", false, quarantined);
  CHECK(o.full_reason == FullReason::kQuarantined);
  // A run of letters longer than the widest window (512 * 2^5 chars) has no
  // hard boundary: widening, then full.
  TokenState s2;
  std::string letters = "Start. ";
  for (int i = 0; i < 4000; ++i) letters += "abcde";
  Repairer::Update(*other, s2, letters, false);
  o = Repairer::Update(*other, s2, letters + "z", false);
  CHECK(o.path == RepairPath::kFull);
  CHECK(o.full_reason == FullReason::kNoCertificate);
  // Within reach, the same edit widens instead.
  TokenState s3;
  std::string shorter = "Start. " + letters.substr(0, 2000);
  Repairer::Update(*other, s3, shorter, false);
  o = Repairer::Update(*other, s3, shorter + "z", false);
  CHECK(o.path == RepairPath::kWidened);
  CHECK(o.widenings == 2);
}

TEST_CASE("repair: state memory is at most 16 bytes per token on real text") {
  auto t = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  TokenState st;
  std::string text = RealText();
  Repairer::Update(*t, st, text, true);
  double per_token = static_cast<double>(st.AccountedBytes()) / static_cast<double>(st.ids().size());
  MESSAGE("accounted bytes per token: " << per_token);
  CHECK(per_token <= 16.0);
}

TEST_CASE("repair: common prefix length") {
  std::mt19937_64 rng(5);
  for (int iter = 0; iter < 500; ++iter) {
    std::string a(rng() % 20000, 'x');
    for (auto& c : a) c = static_cast<char>('a' + rng() % 3);
    std::string b = a.substr(0, rng() % (a.size() + 1));
    size_t want = b.size();
    if (!b.empty() && rng() % 2) {
      size_t at = rng() % b.size();
      b[at] = 'z';
      want = at;
    }
    CHECK(toktier::core::CommonPrefixLength(a, b) == want);
    CHECK(toktier::core::CommonPrefixLength(b, a) == want);
  }
}
