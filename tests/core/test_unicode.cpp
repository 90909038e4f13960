// Unicode class tables probed from the references (core/unicode_tables.inc).
#include <doctest/doctest.h>

#include <algorithm>

#include "core/unicode.h"
#include "test_support.h"

namespace u = toktier::core::unicode;

namespace {

bool Has(char32_t cp, uint16_t bits, u::Tables t = u::Tables::kHuggingFace) {
  return (u::Classes(cp, t) & bits) != 0;
}

uint16_t FromRanges(char32_t cp, u::Tables t) {
  auto r = u::Ranges(t);
  auto it = std::upper_bound(r.begin(), r.end(), cp,
                             [](char32_t c, const u::UnicodeRange& e) { return c < e.first; });
  if (it == r.begin()) return 0;
  --it;
  return cp <= it->last ? it->bits : 0;
}

size_t Count(uint16_t bits, u::Tables t) {
  size_t n = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) n += (u::Classes(c, t) & bits) != 0;
  return n;
}

}  // namespace

TEST_CASE("unicode: whitespace class") {
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680',
                     U'\u2000', U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    CAPTURE(static_cast<uint32_t>(c));
    CHECK(Has(c, u::kWhite));
    CHECK(Has(c, u::kWhite, u::Tables::kTiktoken));
    CHECK(Has(c, u::kRustWhite));
  }
  for (char32_t c : {U'\u200B', U'\u180E', U'\uFEFF', U'\u0000', U'a', U'\u001C'}) {
    CAPTURE(static_cast<uint32_t>(c));
    CHECK_FALSE(Has(c, u::kWhite));
  }
}

TEST_CASE("unicode: letters, marks, numbers, punctuation, symbols") {
  CHECK(u::Classes('a') == (u::kLl | u::kWord | u::kBracketWord));
  CHECK(u::Classes('A') == (u::kLu | u::kWord | u::kBracketWord));
  CHECK(u::Classes('7') == (u::kNumber | u::kDigit | u::kWord | u::kBracketWord | u::kRustNumeric));
  CHECK(Has(0x01C5, u::kLt));
  CHECK(Has(0x02B0, u::kLm));
  CHECK(Has(0x4E00, u::kLo));
  CHECK(Has(0x3042, u::kLo));  // hiragana
  CHECK(Has(0x30FC, u::kLm));  // katakana prolonged sound mark
  CHECK(Has(0x0301, u::kMark));
  CHECK_FALSE(Has(0x0301, u::kLetter));
  // Unicode 16 additions: letters per the reference (PCRE2 10.42 / utf8proc: unassigned).
  CHECK(Has(0x16100, u::kLetter));
  CHECK(Has(0x16100, u::kLetter, u::Tables::kTiktoken));
  CHECK(Has(0x0663, u::kNumber));
  CHECK(Has(0x0663, u::kDigit));
  CHECK(Has(0x00B2, u::kNumber));
  CHECK_FALSE(Has(0x00B2, u::kDigit));
  CHECK(Has('!', u::kPunct));
  CHECK(Has('$', u::kSymbol));
  CHECK_FALSE(Has('$', u::kPunct));
  CHECK(Has('$', u::kHfPunct));  // ASCII punctuation in Rust's sense
  CHECK(Has(0x1F600, u::kSymbol));
  CHECK(u::Classes(0x10FFFF) == 0);
  CHECK(u::Classes(0x110000) == 0);
  // \w: Oniguruma (outside brackets) counts U+00B2; inside brackets and in
  // the Rust regex crate it does not; only the regex crate counts ZWJ.
  CHECK(Has(0x00B2, u::kWord));
  CHECK_FALSE(Has(0x00B2, u::kBracketWord));
  CHECK_FALSE(Has(0x00B2, u::kWord, u::Tables::kTiktoken));
  CHECK_FALSE(Has(0x200D, u::kWord));
  CHECK(Has(0x200D, u::kWord, u::Tables::kTiktoken));
  // Digits uses Rust's char::is_numeric, newer than the regex tables.
  CHECK(Has(0x11DE0, u::kRustNumeric));
  CHECK_FALSE(Has(0x11DE0, u::kNumber));
}

TEST_CASE("unicode: lookup agrees with the range tables; class sizes") {
  for (auto t : {u::Tables::kHuggingFace, u::Tables::kTiktoken}) {
    size_t bad = 0;
    for (char32_t c = 0; c <= 0x10FFFF; ++c) bad += u::Classes(c, t) != FromRanges(c, t);
    CHECK(bad == 0);
    for (char32_t c = 0; c <= 0x10FFFF; ++c) {
      uint16_t b = u::Classes(c, t);
      // Lx classes are disjoint; \s never overlaps letters.
      int lx = __builtin_popcount(b & u::kLetter);
      if (lx > 1 || ((b & u::kWhite) && (b & u::kLetter))) ++bad;
    }
    CHECK(bad == 0);
  }
  const auto hf = u::Tables::kHuggingFace;
  CHECK(Count(u::kLetter, hf) == 141028);
  CHECK(Count(u::kLu, hf) == 1858);
  CHECK(Count(u::kLl, hf) == 2258);
  CHECK(Count(u::kLt, hf) == 31);
  CHECK(Count(u::kLm, hf) == 404);
  CHECK(Count(u::kLo, hf) == 136477);
  CHECK(Count(u::kMark, hf) == 2501);
  CHECK(Count(u::kNumber, hf) == 1911);
  CHECK(Count(u::kPunct, hf) == 855);
  CHECK(Count(u::kSymbol, hf) == 8514);
  CHECK(Count(u::kWhite, hf) == 25);
  CHECK(Count(u::kDigit, hf) == 760);
  // The two references agree everywhere except \w (both forms).
  size_t diff = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    const uint16_t w = u::kWord | u::kBracketWord;
    diff += (u::Classes(c, hf) & ~w) != (u::Classes(c, u::Tables::kTiktoken) & ~w);
  }
  CHECK(diff == 0);
}
