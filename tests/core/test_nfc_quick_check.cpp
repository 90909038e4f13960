// Issue 13: the normalization quick check (unicode::IsNormalizedQuick) lets
// Normalizer::LeavesUnchanged and ApplyUnicodeForm skip NormalizeForm for
// text that is certainly in the form. A "yes" that NormalizeForm contradicts
// would change token IDs, so every answer of "yes" is checked here against
// NormalizeForm itself: every code point alone, every pair from the
// characters that take part in decompositions, compositions and reordering,
// and random strings of them. Then the chunk encoder that normalizes only
// around what changes (TokenizerImpl::EncodeChunk, Normalizer::FirstChange)
// against the generic path, which normalizes every segment whole.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/normalizer.h"
#include "core/tokenizer_impl.h"
#include "core/unicode.h"
#include "core/unicode_norm.h"
#include "test_support.h"

namespace {

using toktier::core::unicode::CombiningClass;
using toktier::core::unicode::Form;
using toktier::core::unicode::IsNormalizedQuick;
using toktier::core::unicode::NormalizeForm;

constexpr Form kForms[] = {Form::kNFC, Form::kNFD, Form::kNFKC, Form::kNFKD};

std::string U8(std::initializer_list<char32_t> cps) {
  std::string s;
  for (char32_t c : cps) toktier::core::unicode::AppendUtf8(c, s);
  return s;
}

bool IsScalar(char32_t cp) { return cp < 0xD800 || (cp > 0xDFFF && cp <= 0x10FFFF); }

// Decoded code points of valid UTF-8.
std::vector<char32_t> Decode(std::string_view s) {
  std::vector<char32_t> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    out.push_back(toktier::core::unicode::DecodeAt(s, i, &len));
    i += len;
  }
  return out;
}

// The characters whose neighbours matter: composites (anything a form maps
// elsewhere), the parts of their decompositions (the first and second
// elements of every composition), every non-starter, Hangul jamo and
// syllables, and a few ASCII letters.
std::vector<char32_t> InterestingCodePoints() {
  std::vector<char32_t> set;
  for (char32_t cp = 0xA0; cp <= 0x10FFFF; ++cp) {
    if (!IsScalar(cp)) continue;
    if (CombiningClass(cp) != 0) set.push_back(cp);
    const std::string one = U8({cp});
    for (Form f : {Form::kNFD, Form::kNFKD}) {
      std::string d;
      if (!NormalizeForm(f, one, &d) || d == one) continue;
      set.push_back(cp);
      for (char32_t part : Decode(d)) set.push_back(part);
    }
  }
  for (char32_t cp = 0x1100; cp < 0x1113; cp += 3) set.push_back(cp);   // L
  for (char32_t cp = 0x1161; cp < 0x1176; cp += 2) set.push_back(cp);   // V
  for (char32_t cp = 0x11A8; cp < 0x11C3; cp += 3) set.push_back(cp);   // T
  for (char32_t cp = 0xAC00; cp < 0xD7A4; cp += 27 * 28 + 1) set.push_back(cp);  // LV and LVT
  for (char32_t cp : {U'a', U'e', U'A', U'o', U'0'}) set.push_back(cp);
  std::sort(set.begin(), set.end());
  set.erase(std::unique(set.begin(), set.end()), set.end());
  return set;
}

// CHECKs that a "yes" of the quick check is right; counts the yeses.
struct Checker {
  size_t yes = 0, checked = 0, wrong = 0;
  void Check(Form f, const std::string& s) {
    ++checked;
    if (!IsNormalizedQuick(f, s)) return;
    ++yes;
    std::string out;
    const bool ok = NormalizeForm(f, s, &out) && out == s;
    if (!ok && ++wrong <= 5) {
      std::string hex;
      for (char32_t c : Decode(s)) hex += " U+" + std::to_string(static_cast<uint32_t>(c));
      FAIL_CHECK("quick check said yes for a text the form changes, form " << static_cast<int>(f) << ":" << hex);
    }
  }
};

}  // namespace

TEST_CASE("NFC quick check on every code point alone") {
  for (Form f : kForms) {
    Checker c;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (IsScalar(cp)) c.Check(f, U8({cp}));
    }
    CHECK(c.wrong == 0);
    // Nearly everything is in every form; the quick check must say so.
    CHECK(c.yes > c.checked * 9 / 10);
  }
}

TEST_CASE("NFC quick check on pairs and random strings of interesting characters") {
  const std::vector<char32_t> set = InterestingCodePoints();
  REQUIRE(set.size() > 3000);
  // Right-hand characters: those that can compose with or reorder against
  // what precedes them: non-starters and the quick check's "maybe" (a
  // character a form leaves alone but the quick check cannot vouch for).
  std::vector<char32_t> right;
  auto maybe = [](Form f, const std::string& one) {
    std::string out;
    return !IsNormalizedQuick(f, one) && NormalizeForm(f, one, &out) && out == one;
  };
  for (char32_t cp : set) {
    const std::string one = U8({cp});
    if (CombiningClass(cp) != 0 || maybe(Form::kNFC, one) || maybe(Form::kNFKC, one)) right.push_back(cp);
  }
  MESSAGE(set.size() << " characters, " << right.size() << " of them on the right of pairs");
  for (Form f : kForms) {
    Checker c;
    for (char32_t a : set) {
      for (char32_t b : right) c.Check(f, U8({a, b}));
    }
    std::mt19937 rng(13);
    std::uniform_int_distribution<size_t> pick(0, set.size() - 1), len(2, 6);
    for (int n = 0; n < 200000; ++n) {
      std::string s;
      for (size_t k = len(rng); k > 0; --k) toktier::core::unicode::AppendUtf8(set[pick(rng)], s);
      c.Check(f, s);
    }
    CHECK(c.wrong == 0);
    MESSAGE("form " << static_cast<int>(f) << ": " << c.checked << " texts, " << c.yes << " quick yes");
  }
}

TEST_CASE("NFC quick check answers") {
  CHECK(IsNormalizedQuick(Form::kNFC, "plain ascii"));
  CHECK(IsNormalizedQuick(Form::kNFC, U8({0x0660, 0x0966, 0xFF10, 0x4E2D})));  // digits, CJK
  CHECK(IsNormalizedQuick(Form::kNFC, U8({U'e', 0x0334})));                     // a mark nothing composes with
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, U8({U'e', 0x0301})));               // composes: only NFC tells
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, U8({0x212B})));                     // a singleton (Angstrom)
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, U8({U'a', 0x0301, 0x0334})));      // classes out of order
  CHECK_FALSE(IsNormalizedQuick(Form::kNFKC, U8({0xFF10})));                    // fullwidth digit: compatibility
  CHECK(IsNormalizedQuick(Form::kNFC, U8({0xAC00})));                           // LV syllable
  CHECK_FALSE(IsNormalizedQuick(Form::kNFD, U8({0xAC00})));
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, U8({0xAC00, 0x11A8})));             // LV + T composes
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, "\xC3"));                           // invalid UTF-8
  CHECK_FALSE(IsNormalizedQuick(Form::kNFC, "\xED\xA0\x80"));                   // a surrogate
  // Normalizer::LeavesUnchanged agrees with the full check on a mixed text.
  toktier::core::Normalizer n;
  toktier::core::NormalizerOp op;
  op.kind = toktier::core::NormalizerOp::Kind::kNFC;
  n.Add(op);
  CHECK(n.LeavesUnchanged("x " + U8({0x0966, 0x0967}) + " y " + U8({0x00E9})));
  CHECK_FALSE(n.LeavesUnchanged("x " + U8({U'e', 0x0301}) + " y"));
}

namespace {

struct Encoded {
  std::vector<uint32_t> ids, ends;
  std::vector<toktier::core::TextSpan> added;
  bool operator==(const Encoded&) const = default;
};

Encoded EncodeOn(const toktier::core::Tokenizer& tok, std::string_view text, toktier::core::TokenizerImpl::Path path) {
  Encoded e;
  tok.impl().EncodeFull(text, true, path, {e.ids, &e.ends, &e.added});
  return e;
}

// Ordinary text with stretches a form changes (or only may change) every
// 1 to ~3000 bytes: NFD sequences, singletons, marks out of order, marks that
// compose with nothing, Hangul jamo, compatibility characters.
std::string DenselyUnnormalizedText(uint32_t seed, size_t size) {
  const std::vector<std::string> words = {" The", " state", "'s", " caf\xC3\xA9", " 123", "\n", "  ", ",", " int",
                                          "(x)", " \xE4\xB8\x80\xE4\xBA\x8C", " na\xC3\xAFve", "<|im_end|>", "\t"};
  const std::vector<std::string> spots = {
      U8({U'e', 0x0301}),         U8({0x212B}),                 U8({U'a', 0x0301, 0x0323}),
      U8({U'a', 0x0334}),         U8({0x1100, 0x1161, 0x11A8}), U8({0xAC00, 0x11A8}),
      U8({0xFB01}),               U8({0x00E9, 0x0323}),         U8({0x0344}),
      U8({0xFF10, 0xFF11}),       U8({U'x', 0x0308, 0x0301}),   U8({0x0958}),
      U8({0x1E9B, 0x0323}),       U8({U'\n', 0x0301}),          U8({0x0301}),
  };
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < size) {
    const size_t gap = rng() % 4 == 0 ? rng() % 16 : rng() % 3000;
    for (size_t stop = s.size() + gap; s.size() < stop;) s += words[rng() % words.size()];
    s += spots[rng() % spots.size()];
  }
  return s;
}

}  // namespace

TEST_CASE("text that is not normalized in many places encodes like the uncut generic path") {
  auto qwen3 = toktier::test::LoadTokenizer("qwen3");
  REQUIRE_MESSAGE(qwen3, "tokenizer files missing: run tools/dev.sh setup");
  // Qwen3's own NFC, and the same model under NFKC and an NFD+NFC chain.
  std::vector<std::shared_ptr<const toktier::core::Tokenizer>> toks = {qwen3};
  const auto bytes = toktier::test::ReadFile(toktier::test::TokenizerPath("qwen3"));
  REQUIRE(bytes);
  for (const char* normalizer : {R"({"type":"NFKC"})", R"({"type":"Sequence","normalizers":[{"type":"NFD"},{"type":"NFC"}]})"}) {
    nlohmann::json j = nlohmann::json::parse(*bytes);
    j["normalizer"] = nlohmann::json::parse(normalizer);
    toktier::core::Status st;
    auto tok = toktier::core::Tokenizer::FromBytes(j.dump(), "", &st);
    REQUIRE_MESSAGE(st.ok(), st.message());
    toks.push_back(tok);
  }
  size_t compared = 0;
  for (size_t t = 0; t < toks.size(); ++t) {
    for (uint32_t seed = 1; seed <= 6; ++seed) {
      const std::string text = DenselyUnnormalizedText(seed, seed <= 3 ? 20000 : 150000);
      const Encoded fast = EncodeOn(*toks[t], text, toktier::core::TokenizerImpl::Path::kFast);
      const Encoded generic = EncodeOn(*toks[t], text, toktier::core::TokenizerImpl::Path::kGeneric);
      CHECK_MESSAGE(fast == generic, "tokenizer " << t << " seed " << seed);
      ++compared;
    }
  }
  CHECK(compared == 18);
}
