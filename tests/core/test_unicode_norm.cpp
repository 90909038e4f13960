// Unicode normalization forms (core/unicode_norm.h) against the reference's
// normalizers (HF tokenizers' Rust core, old Unicode data), through
// tools/ref_normalize.js; also through core::Normalizer (ASCII chunking) and
// the Qwen3 tokenizer (NFC).
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <unistd.h>
#include <vector>

#include "core/core.h"
#include "core/normalizer.h"
#include "core/unicode.h"
#include "core/unicode_norm.h"
#include "test_support.h"

namespace {

using Json = nlohmann::json;
using toktier::core::Normalizer;
using toktier::core::NormalizerOp;
using toktier::core::unicode::CombiningClass;
using toktier::core::unicode::Form;
using toktier::core::unicode::NormalizeForm;

constexpr Form kForms[] = {Form::kNFC, Form::kNFD, Form::kNFKC, Form::kNFKD};
const char* FormName(Form f) {
  switch (f) {
    case Form::kNFC: return "NFC";
    case Form::kNFD: return "NFD";
    case Form::kNFKC: return "NFKC";
    default: return "NFKD";
  }
}
NormalizerOp::Kind KindOf(Form f) {
  switch (f) {
    case Form::kNFC: return NormalizerOp::Kind::kNFC;
    case Form::kNFD: return NormalizerOp::Kind::kNFD;
    case Form::kNFKC: return NormalizerOp::Kind::kNFKC;
    default: return NormalizerOp::Kind::kNFKD;
  }
}

void Put(char32_t cp, std::string& out) { toktier::core::unicode::AppendUtf8(cp, out); }
std::string U8(const std::vector<char32_t>& cps) {
  std::string s;
  for (char32_t c : cps) Put(c, s);
  return s;
}
std::string Hex(std::string_view s) {
  std::ostringstream o;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    char32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
    o << (i ? " " : "") << std::hex << std::uppercase << static_cast<uint32_t>(cp);
    i += len;
  }
  return o.str();
}
std::string Norm(Form f, std::string_view s) {
  std::string o;
  REQUIRE(NormalizeForm(f, s, &o));
  return o;
}

struct Case {
  Form form;
  std::string text;
};

// Runs tools/ref_normalize.js; empty on failure.
std::vector<std::string> RunReference(const std::vector<Case>& cases) {
  std::string input;
  for (const auto& c : cases) input += Json{{"form", FormName(c.form)}, {"text", c.text}}.dump() + "\n";
  auto lines = toktier::test::RunNodeTool("ref_normalize.js", input);
  std::vector<std::string> out;
  if (!lines) return out;
  for (const auto& line : *lines) out.push_back(Json::parse(line).get<std::string>());
  return out;
}

// Compares NormalizeForm and core::Normalizer with the reference on every case.
void Differential(const char* what, const std::vector<Case>& cases) {
  toktier::test::RequireNode();
  auto ref = RunReference(cases);
  REQUIRE_MESSAGE(ref.size() == cases.size(), what << ": reference run failed");
  Normalizer normalizers[4];
  for (int k = 0; k < 4; ++k) {
    NormalizerOp op;
    op.kind = KindOf(kForms[k]);
    normalizers[k].Add(op);
  }
  size_t diffs = 0, chunk_diffs = 0;
  std::string out, napplied;
  std::vector<uint32_t> align;
  for (size_t i = 0; i < cases.size(); ++i) {
    out.clear();
    REQUIRE(NormalizeForm(cases[i].form, cases[i].text, &out));
    if (out != ref[i]) {
      if (++diffs <= 10) {
        MESSAGE(what << " " << FormName(cases[i].form) << " [" << Hex(cases[i].text) << "]: toktier ["
                     << Hex(out) << "] reference [" << Hex(ref[i]) << "]");
      }
    }
    normalizers[static_cast<int>(cases[i].form)].Apply(cases[i].text, true, true, napplied, align);
    if (napplied != ref[i] && ++chunk_diffs <= 10) {
      MESSAGE(what << " Normalizer " << FormName(cases[i].form) << " [" << Hex(cases[i].text) << "]: ["
                   << Hex(napplied) << "] reference [" << Hex(ref[i]) << "]");
    }
  }
  MESSAGE(std::string(what) << ": " << cases.size() << " cases, " << diffs << " differences");
  CHECK(diffs == 0);
  CHECK(chunk_diffs == 0);
}

bool Scalar(char32_t c) { return c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF); }

// Non-starters of the reference plus marks that newer Unicode versions
// classify differently (new marks the reference sees as starters).
std::vector<char32_t> MarkPool() {
  std::vector<char32_t> v;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (Scalar(c) && CombiningClass(c) != 0) v.push_back(c);
  }
  for (char32_t c : {0x1AC0u, 0x1E08Fu, 0x1ABFu, 0x1DFAu, 0x10D69u, 0x16FF0u, 0x0897u, 0x1133Bu, 0x0CF3u, 0x10EFDu}) {
    v.push_back(c);
  }
  return v;
}

}  // namespace

TEST_CASE("unicode_norm: examples where the reference differs from newer Unicode") {
  // U+1E08F (Unicode 15) is a starter for the reference: U+0334 stays after it.
  CHECK(Norm(Form::kNFC, U8({'I', 0x1E08F, 0x334})) == U8({'I', 0x1E08F, 0x334}));
  CHECK(Norm(Form::kNFD, U8({'I', 0x1E08F, 0x334})) == U8({'I', 0x1E08F, 0x334}));
  // U+1AC0 (Unicode 14) is a starter for the reference: it ends the run.
  for (Form f : kForms) CHECK(Norm(f, U8({0x35F, 0x356, 0x1AC0})) == U8({0x356, 0x35F, 0x1AC0}));
  CHECK(CombiningClass(0x1AC0) == 0);
  CHECK(CombiningClass(0x1E08F) == 0);
  CHECK(CombiningClass(0x301) == 230);
  CHECK(CombiningClass(0x334) == 1);
  // Characters (and their decompositions in newer Unicode) the reference does
  // not know: neither decomposed nor recomposed.
  const std::vector<std::pair<char32_t, std::vector<char32_t>>> newer = {
      {0x105C9, {0x105D2, 0x307}}, {0x105E4, {0x105DA, 0x307}}, {0x11383, {0x11382, 0x113C9}},
      {0x11385, {0x11384, 0x113BB}}, {0x1138E, {0x1138B, 0x113C2}}, {0x11391, {0x11390, 0x113C9}},
      {0x113C5, {0x113C2, 0x113C2}}, {0x113C7, {0x113C2, 0x113B8}}, {0x113C8, {0x113C2, 0x113C9}},
      {0x11938, {0x11935, 0x11930}}, {0x16121, {0x1611E, 0x1611E}}, {0x16122, {0x1611E, 0x16129}},
      {0x16123, {0x1611E, 0x1611F}}, {0x16124, {0x16129, 0x1611F}}, {0x16125, {0x1611E, 0x16120}},
      {0x16126, {0x1611E, 0x1611E, 0x1611F}}, {0x16127, {0x1611E, 0x16129, 0x1611F}},
      {0x16128, {0x1611E, 0x1611E, 0x16120}}, {0x16D68, {0x16D67, 0x16D67}}, {0x16D69, {0x16D63, 0x16D67}},
      {0x16D6A, {0x16D63, 0x16D67, 0x16D67}}};
  for (const auto& [c, d] : newer) {
    CAPTURE(Hex(U8({c})));
    for (Form f : kForms) {
      CHECK(Norm(f, U8({c})) == U8({c}));
      CHECK(Norm(f, U8(d)) == U8(d));
    }
  }
  // Standard cases.
  CHECK(Norm(Form::kNFC, U8({'e', 0x301})) == U8({0xE9}));
  CHECK(Norm(Form::kNFD, U8({0x1E08})) == U8({'C', 0x327, 0x301}));
  CHECK(Norm(Form::kNFC, U8({'C', 0x301, 0x327})) == U8({0x1E08}));
  CHECK(Norm(Form::kNFKC, U8({0xFB01})) == "fi");
  CHECK(Norm(Form::kNFC, U8({0x1100, 0x1161, 0x11A8})) == U8({0xAC01}));
  CHECK(Norm(Form::kNFC, U8({0xAC00, 0x11A7})) == U8({0xAC00, 0x11A7}));
  CHECK(Norm(Form::kNFD, U8({0xAC01})) == U8({0x1100, 0x1161, 0x11A8}));
  std::string o;
  CHECK_FALSE(NormalizeForm(Form::kNFC, "\xC3", &o));
  CHECK_FALSE(NormalizeForm(Form::kNFC, "\xED\xA0\x80", &o));
  CHECK(o.empty());
}

TEST_CASE("unicode_norm: every code point against the reference") {
  std::vector<char32_t> all;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (Scalar(c) && c != '\n') all.push_back(c);
  }
  std::vector<Case> cases;
  for (Form f : kForms) {
    for (size_t i = 0; i < all.size(); i += 2048) {
      std::string isolated, adjacent;  // each char alone / neighbors interacting
      for (size_t k = i; k < std::min(all.size(), i + 2048); ++k) {
        Put(all[k], isolated);
        isolated.push_back('\n');
        Put(all[k], adjacent);
      }
      cases.push_back({f, isolated});
      cases.push_back({f, adjacent});
    }
  }
  Differential("single code points", cases);
}

TEST_CASE("unicode_norm: random mark sequences against the reference") {
  std::vector<char32_t> marks = MarkPool();
  const std::vector<char32_t> starters = {'a', 'A', 'e', 'o', 'u', 'C', 'I', 's', ' ', 0xC7, 0xE9, 0x391,
                                          0x3B1, 0x1F00, 0x928, 0x9C7, 0xB47, 0xDD9, 0x1025, 0x1B05,
                                          0x110A, 0x1100, 0x1161, 0xAC00, 0x304B, 0x30CF, 0x11099, 0x1D157};
  std::mt19937 rng(12345);
  std::vector<Case> cases;
  for (int n = 0; n < 8000; ++n) {
    std::vector<char32_t> seq;
    int len = 1 + static_cast<int>(rng() % 10);
    if (rng() % 4 != 0) seq.push_back(starters[rng() % starters.size()]);
    for (int k = 0; k < len; ++k) {
      if (rng() % 6 == 0) {
        seq.push_back(starters[rng() % starters.size()]);
      } else {
        seq.push_back(marks[rng() % marks.size()]);
      }
    }
    std::string s = U8(seq);
    for (Form f : kForms) cases.push_back({f, s});
  }
  Differential("random mark sequences", cases);
}

TEST_CASE("unicode_norm: Hangul against the reference") {
  std::vector<Case> cases;
  std::string syll, lvt;
  for (char32_t s = 0xAC00; s <= 0xD7A3; ++s) Put(s, syll);
  for (char32_t l = 0x10FF; l <= 0x1113; ++l) {
    for (char32_t v = 0x1160; v <= 0x1176; ++v) {
      for (char32_t t = 0x11A6; t <= 0x11C3; ++t) lvt += U8({l, v, t, ' ', l, v, ' ', 0xAC00 + (t % 19) * 588, t, ' '});
    }
  }
  std::mt19937 rng(7);
  std::string jamo;
  for (int n = 0; n < 20000; ++n) Put(0x1100 + rng() % 0x100, jamo);
  for (Form f : kForms) {
    cases.push_back({f, syll});
    cases.push_back({f, lvt});
    cases.push_back({f, jamo});
  }
  Differential("Hangul", cases);
}

TEST_CASE("unicode_norm: composition candidates against the reference") {
  // Every char that decomposes, as itself and decomposed, with marks of
  // several classes around its parts.
  std::vector<Case> cases;
  std::string batch;
  int in_batch = 0;
  auto flush = [&](bool force) {
    if (in_batch == 0 || (!force && in_batch < 256)) return;
    for (Form f : kForms) cases.push_back({f, batch});
    batch.clear();
    in_batch = 0;
  };
  for (char32_t c = 0xA0; c <= 0x10FFFF; ++c) {
    if (!Scalar(c)) continue;
    std::string self = U8({c}), nfd = Norm(Form::kNFD, self), nfkd = Norm(Form::kNFKD, self);
    if (nfd == self && nfkd == self) continue;
    for (const std::string& d : {nfd, nfkd}) {
      batch += d + "\n" + d + U8({0x334}) + "\n" + d + U8({0x301}) + "\n" + d + U8({0x327, 0x345}) + "\n";
      batch += self + U8({0x323}) + "\n" + self + U8({0x1AC0, 0x301}) + "\n";
      // The parts with a mark inserted after the first one.
      size_t len = (static_cast<unsigned char>(d[0]) < 0x80) ? 1 : (static_cast<unsigned char>(d[0]) < 0xE0) ? 2
                   : (static_cast<unsigned char>(d[0]) < 0xF0) ? 3 : 4;
      batch += d.substr(0, len) + U8({0x334}) + d.substr(len) + "\n";
      batch += d.substr(0, len) + U8({0x1E08F}) + d.substr(len) + "\n";
    }
    ++in_batch;
    flush(false);
  }
  flush(true);
  Differential("composition candidates", cases);
}

TEST_CASE("unicode_norm: Qwen3 (NFC) encodes the divergent examples like the reference") {
  auto t = toktier::test::LoadTokenizer("qwen3");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  toktier::test::RequireNode();
  std::vector<std::string> texts = {
      U8({'I', 0x1E08F, 0x334}),      U8({0x35F, 0x356, 0x1AC0}), U8({'x', 0x105D2, 0x307, ' ', 0x11935, 0x11930}),
      U8({'C', 0x301, 0x327, ' ', 'e', 0x301, 0x1100, 0x1161, 0x11A8}),
      U8({'a', 0x1E08F, 0x334, 0x301, 'b', 0x35F, 0x1AC0, 0x356, '.'})};
  std::string input;
  for (const auto& s : texts) input += Json{{"text", s}}.dump() + "\n";
  auto lines = toktier::test::RunNodeTool("ref_encode.js --tokenizer " + toktier::test::TokenizerPath("qwen3"), input);
  REQUIRE(lines.has_value());
  size_t i = 0;
  for (const auto& line : *lines) {
    REQUIRE(i < texts.size());
    auto ref = Json::parse(line).get<std::vector<uint32_t>>();
    std::vector<uint32_t> ids;
    t->Encode(texts[i], false, ids);
    CAPTURE(Hex(texts[i]));
    CHECK(ids == ref);
    ++i;
  }
  CHECK(i == texts.size());
}
