// The hand-written family scanners (core/family_scanners.cpp) against the
// generic path (core/regex_split.cpp, PCRE2 with the reference's classes), and
// proofs of their hard-boundary rules (docs/repair.md, "Hard boundaries"):
//  (a) every string up to N characters over a representative alphabet splits
//      identically by the scanner and by the generic path;
//  (b) at every position p of those strings where IsHardBoundary says true,
//      Split(X) == Split(X[:p]) ++ (Split(X[p:]) shifted by p). Split(X) and
//      Split(X[:p]) come from the generic path; Split(X[p:]) from the scanner,
//      which (a) shows equal to the generic path on X[p:] (itself a string of
//      the enumeration).
// Plus random long strings (100K characters without spaces, long whitespace
// runs) and random mid-length strings. TOKTIER_LONG_CAMPAIGN=1 enumerates one
// character further and runs more random strings.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/family_scanners.h"
#include "core/pretokenizer.h"
#include "core/regex_split.h"
#include "test_support.h"

namespace core = toktier::core;
using core::PatternFamily;
using core::PreTokenizerStep;
using core::Span;
using core::SplitBehavior;
namespace fp = core::family_patterns;

namespace {

bool LongCampaign() {
  const char* e = std::getenv("TOKTIER_LONG_CAMPAIGN");
  return e && std::string(e) == "1";
}

PreTokenizerStep SplitStep(std::string_view pattern, SplitBehavior b = SplitBehavior::kIsolated,
                           bool invert = false) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::kSplit;
  s.pattern = std::string(pattern);
  s.behavior = b;
  s.invert = invert;
  return s;
}

PreTokenizerStep ByteLevel(bool use_regex) {
  PreTokenizerStep s;
  s.kind = PreTokenizerStep::Kind::kByteLevel;
  s.use_regex = use_regex;
  return s;
}

struct Family {
  const char* name;
  std::vector<PreTokenizerStep> steps;
  bool full_cover;  // the pattern matches at every position (no gaps)
};

std::vector<Family> Families() {
  return {
      {"gpt2", {SplitStep(fp::kGpt2), ByteLevel(false)}, true},
      {"cl100k", {SplitStep(fp::kCl100k), ByteLevel(false)}, true},
      {"qwen2", {SplitStep(fp::kQwen2), ByteLevel(false)}, true},
      {"o200k", {SplitStep(fp::kO200k), ByteLevel(false)}, true},
      {"deepseek_v3",
       {SplitStep(fp::kDeepSeekDigits), SplitStep(fp::kDeepSeekCjk), SplitStep(fp::kDeepSeekMain),
        ByteLevel(false)},
       false},
  };
}

const Family& FamilyNamed(const std::string& name) {
  static const std::vector<Family> all = Families();
  for (const auto& f : all) {
    if (name == f.name) return f;
  }
  FAIL("no family " << name);
  return all[0];
}

std::string Show(std::string_view s) {
  std::string o;
  for (unsigned char c : s) {
    char b[8];
    if (c < 32 || c == '\\' || c >= 127) {
      std::snprintf(b, sizeof b, "\\x%02X", c);
      o += b;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}

std::string ShowPieces(std::string_view s, const std::vector<Span>& v) {
  std::string o;
  for (auto sp : v) o += "[" + Show(s.substr(sp.begin, sp.end - sp.begin)) + "]";
  return o;
}

struct Counts {
  long long strings = 0;
  long long splits = 0;          // scanner-vs-generic comparisons
  long long inverted = 0;        // Isolated-vs-(Removed, invert) comparisons
  long long positions = 0;       // inner positions seen
  long long hard = 0;            // of which IsHardBoundary said true (each checked)
  long long scanner_diffs = 0;
  long long inverted_diffs = 0;
  long long boundary_failures = 0;
  std::vector<std::string> examples;

  void Example(std::string e) {
    if (examples.size() < 8) examples.push_back(std::move(e));
  }
};

class Checker {
 public:
  explicit Checker(const Family& f) : family_(f) {
    std::string err;
    scanner_ = core::MakeFamilyScanner(f.steps);
    REQUIRE_MESSAGE(scanner_, "no scanner for " << f.name);
    generic_ = core::MakeGenericSplitter(f.steps, &err);
    REQUIRE_MESSAGE(generic_, err);
    if (f.full_cover) {
      auto inv = f.steps;
      inv[0].behavior = SplitBehavior::kRemoved;
      inv[0].invert = true;
      REQUIRE(core::MakeFamilyScanner(inv));  // accepted as the same family
      inverted_ = core::MakeGenericSplitter(inv, &err);
      REQUIRE_MESSAGE(inverted_, err);
    }
  }

  // (a) and (b) for every string of 1..max_len characters over `alphabet`.
  void Exhaustive(const std::vector<std::string>& alphabet, int max_len, Counts& c) {
    std::string s;
    std::vector<size_t> starts;  // byte offset of each character
    std::vector<std::vector<Span>> generic_at(max_len + 1);  // generic split of each prefix
    std::vector<Span> scan, tail, inv;
    // Iterative DFS over the strings, extending by one character at a time.
    std::vector<size_t> next(max_len + 1, 0);
    int depth = 0;
    while (true) {
      if (next[depth] == alphabet.size() || depth == max_len) {
        if (depth == 0) break;
        --depth;
        s.resize(starts.back());
        starts.pop_back();
        continue;
      }
      starts.push_back(s.size());
      s += alphabet[next[depth]++];
      ++depth;
      next[depth] = 0;
      Visit(s, starts, generic_at, depth, max_len, scan, tail, inv, c);
    }
  }

  // Scanner vs generic on one string, and hard boundaries: at every position
  // (probes < 0) or at `probes` random positions.
  void Compare(std::string_view s, std::mt19937_64& rng, int probes, Counts& c) {
    std::vector<Span> g, sc;
    generic_->Split(s, g);
    scanner_->Split(s, sc);
    // SplitReusing into a buffer holding an earlier string's pieces.
    const size_t reused = scanner_->SplitReusing(s, reuse_);
    if (reused != sc.size() || !std::equal(sc.begin(), sc.end(), reuse_.begin())) {
      ++c.scanner_diffs;
      c.Example("SplitReusing differs from Split on " + Show(s));
    }
    ++c.strings;
    ++c.splits;
    if (g != sc) {
      ++c.scanner_diffs;
      c.Example(std::string(family_.name) + " string differs (" + std::to_string(s.size()) +
                " bytes), first different piece: scanner " + FirstDiff(s, sc, g));
    }
    if (s.size() < 2) return;
    std::uniform_int_distribution<size_t> pos(1, s.size() - 1);
    const size_t tries = probes < 0 ? s.size() - 1 : static_cast<size_t>(probes);
    std::vector<Span> left, right;
    for (size_t k = 0; k < tries; ++k) {
      const size_t p = probes < 0 ? k + 1 : pos(rng);
      if ((static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) continue;
      ++c.positions;
      if (!scanner_->IsHardBoundary(s, p)) continue;
      ++c.hard;
      left.clear();
      right.clear();
      generic_->Split(s.substr(0, p), left);
      generic_->Split(s.substr(p), right);
      for (auto& r : right) {
        left.push_back({r.begin + static_cast<uint32_t>(p), r.end + static_cast<uint32_t>(p)});
      }
      if (left != g) {
        ++c.boundary_failures;
        c.Example(std::string(family_.name) + " hard boundary fails at " + std::to_string(p) +
                  ": \"" + Show(s.substr(p >= 12 ? p - 12 : 0, p >= 12 ? 12 : p)) + "|" +
                  Show(s.substr(p, 12)) + "\"");
      }
    }
  }

 private:
  std::vector<Span> reuse_;  // SplitReusing's buffer, kept across strings
  static std::string FirstDiff(std::string_view s, const std::vector<Span>& a,
                               const std::vector<Span>& b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    auto one = [&](const std::vector<Span>& v) {
      return i < v.size() ? Show(s.substr(v[i].begin, v[i].end - v[i].begin)) + "@" +
                                std::to_string(v[i].begin)
                          : std::string("<end>");
    };
    return one(a) + " generic " + one(b);
  }

  void Visit(const std::string& s, const std::vector<size_t>& starts,
             std::vector<std::vector<Span>>& generic_at, int depth, int max_len,
             std::vector<Span>& scan, std::vector<Span>& tail, std::vector<Span>& inv, Counts& c) {
    std::vector<Span>& g = generic_at[depth];
    g.clear();
    generic_->Split(s, g);
    scan.clear();
    scanner_->Split(s, scan);
    ++c.strings;
    ++c.splits;
    if (scan != g) {
      ++c.scanner_diffs;
      c.Example(std::string(family_.name) + " \"" + Show(s) + "\": scanner " + ShowPieces(s, scan) +
                " generic " + ShowPieces(s, g));
    }
    if (inverted_ && depth < max_len) {
      inv.clear();
      inverted_->Split(s, inv);
      ++c.inverted;
      if (inv != g) {
        ++c.inverted_diffs;
        c.Example(std::string(family_.name) + " \"" + Show(s) + "\": Removed+invert " +
                  ShowPieces(s, inv) + " Isolated " + ShowPieces(s, g));
      }
    }
    for (int k = 1; k < depth; ++k) {
      const size_t p = starts[k];
      ++c.positions;
      if (!scanner_->IsHardBoundary(s, p)) continue;
      ++c.hard;
      const std::vector<Span>& left = generic_at[k];  // generic split of s[:p]
      tail.clear();
      scanner_->Split(std::string_view(s).substr(p), tail);
      bool ok = left.size() + tail.size() == g.size();
      for (size_t i = 0; ok && i < left.size(); ++i) ok = left[i] == g[i];
      for (size_t i = 0; ok && i < tail.size(); ++i) {
        const Span& x = g[left.size() + i];
        ok = tail[i].begin + p == x.begin && tail[i].end + p == x.end;
      }
      if (!ok) {
        ++c.boundary_failures;
        c.Example(std::string(family_.name) + " hard boundary fails: \"" + Show(s.substr(0, p)) +
                  "|" + Show(s.substr(p)) + "\"");
      }
    }
  }

  const Family& family_;
  std::unique_ptr<core::Splitter> scanner_, generic_, inverted_;
};

void Report(const char* what, const Counts& c) {
  MESSAGE(std::string(what) << ": " << c.strings << " strings, " << c.splits << " scanner==generic splits, "
               << c.inverted << " Removed+invert==Isolated splits, " << c.hard << " of "
               << c.positions << " positions hard and checked; " << c.scanner_diffs
               << " scanner diffs, " << c.inverted_diffs << " invert diffs, "
               << c.boundary_failures << " boundary failures");
  for (const auto& e : c.examples) MESSAGE(e);
  CHECK(c.scanner_diffs == 0);
  CHECK(c.inverted_diffs == 0);
  CHECK(c.boundary_failures == 0);
}

void RunExhaustive(const char* family, const std::vector<std::string>& alphabet, int max_len) {
  if (LongCampaign()) ++max_len;
  Checker ch(FamilyNamed(family));
  Counts c;
  ch.Exhaustive(alphabet, max_len, c);
  const std::string what = std::string(family) + " (" + std::to_string(alphabet.size()) +
                           " characters, length <= " + std::to_string(max_len) + ")";
  Report(what.c_str(), c);
}

}  // namespace

// Alphabets: one or two characters per class that matters to the family's
// pattern, ASCII and non-ASCII (the scanners have an ASCII fast path), and the
// contraction letters. U+0301 is a combining mark, U+0661 an Arabic-Indic
// digit, U+00A0 / U+0085 non-ASCII whitespace, U+01C5 a titlecase letter,
// U+02B0 a modifier letter, U+4E2D a CJK ideograph (Lo), U+309B a kana-block
// symbol (Sk, inside DeepSeek's CJK range), U+0001 a control character (no
// alternative of DeepSeek's third pattern matches it).

TEST_CASE("exhaustive: gpt2 scanner == generic, hard boundaries proven") {
  RunExhaustive("gpt2",
                {"S", "1", " ", "\n", ".", "'", "s", "r", "e", "\t", "\u0301", "\u00a0"},
                6);
}

TEST_CASE("exhaustive: cl100k scanner == generic, hard boundaries proven") {
  RunExhaustive("cl100k", {"\u00e9", "1", " ", "\n", "\r", ".", "'", "S", "l", "\t", "\u0301", "\u0085"},
                6);
}

TEST_CASE("exhaustive: qwen2 scanner == generic, hard boundaries proven") {
  RunExhaustive("qwen2",
                {"a", "\u0661", "2", " ", "\n", "\r", ".", "'", "s", "\t", "\u0301", "\u00a0"},
                6);
}

TEST_CASE("exhaustive: o200k scanner == generic, hard boundaries proven") {
  RunExhaustive("o200k", {"a", "\u01C5", "1", " ", "\t", "\n", "/", ".", "'", "\u02B0", "\u4e2d",
                          "\u0301"},
                6);
}

TEST_CASE("exhaustive: deepseek_v3 scanner == generic, hard boundaries proven") {
  RunExhaustive("deepseek_v3", {"a", "1", " ", "\n", ".", "$", "\t", "\u4e2d", "\u309b", "\u0301",
                                "\x01", "\u0085"},
                6);
}

TEST_CASE("exhaustive: contractions and case folding (cl100k, o200k, gpt2)") {
  // (?i:) contractions: 'S, 'LL, 'rE and U+017F (long s folds to s); U+212A
  // (Kelvin sign) folds to k, which no contraction has.
  const std::vector<std::string> alpha = {"'", "s", "S", "l", "L", "r", "E", "\u017f", "\u212a", " "};
  RunExhaustive("cl100k", alpha, 6);
  RunExhaustive("o200k", alpha, 6);
  RunExhaustive("gpt2", alpha, 6);
}

namespace {

std::string RandomString(std::mt19937_64& rng, const std::vector<std::string>& alphabet,
                         size_t chars) {
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::string s;
  for (size_t i = 0; i < chars; ++i) s += alphabet[pick(rng)];
  return s;
}

// Runs of whitespace (up to 2000 characters, mixed kinds) between words.
std::string WhitespaceRuns(std::mt19937_64& rng, size_t chars) {
  const std::vector<std::string> ws = {" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u0085", "\u3000"};
  const std::vector<std::string> word = {"a", "Ab", "1", "12345", ".", "'s", "/", "\u4e2d", "x\u0301"};
  std::uniform_int_distribution<size_t> run(1, 2000), pw(0, ws.size() - 1), pword(0, word.size() - 1);
  std::uniform_int_distribution<int> kinds(0, 2);
  std::string s;
  size_t n = 0;
  while (n < chars) {
    const size_t len = run(rng);
    const int k = kinds(rng);
    for (size_t i = 0; i < len; ++i) s += k == 0 ? " " : ws[pw(rng)];
    s += word[pword(rng)];
    n += len + 1;
  }
  return s;
}

}  // namespace

TEST_CASE("scanner: random long strings equal the generic path") {
  std::mt19937_64 rng(20250101);
  const bool long_run = LongCampaign();
  // No whitespace at all: one 100K-character stretch of letters, digits,
  // marks, punctuation, CJK, contractions.
  const std::vector<std::string> no_space = {
      "a", "Z", "s", "'", "l", "1", "9", "\u0661", ".", "/", "$", "_", "(", "\u00e9", "\u0301",
      "\u01C5", "\u02B0", "\u4e2d", "\u3042", "\u309b", "\x01", "\u3002", "\u017f", "\U0001F600"};
  const std::vector<std::string> mixed = {"a", "Z", "'", "s", "1", " ", " ", "\n", "\r", "\t",
                                          ".", "/", "\u00a0", "\u0085", "\u0301", "\u4e2d",
                                          "\u2028", "\u0661"};
  const std::vector<std::string> letters = {"a", "B", "\u00e9", "\u01C5", "\u02B0", "\u4e2d", "\u0301"};
  const std::vector<std::string> digits = {"1", "2", "\u0661", "\u00b2"};
  Counts total;
  for (const auto& f : Families()) {
    Checker ch(f);
    const int reps = long_run ? 20 : 2;
    for (int r = 0; r < reps; ++r) {
      ch.Compare(RandomString(rng, no_space, 100000), rng, 20, total);
      ch.Compare(RandomString(rng, mixed, 100000), rng, 20, total);
      ch.Compare(RandomString(rng, letters, 100000), rng, 5, total);
      ch.Compare(RandomString(rng, digits, 100000), rng, 5, total);
      ch.Compare(WhitespaceRuns(rng, 100000), rng, 20, total);
    }
  }
  Report("random long strings", total);
}

// Issue 13: the scanners classify ASCII runs 8 bytes at a time and take
// ASCII-only fast paths (o200k's letter alternatives, DeepSeek's non-digit
// runs). Strings made of runs (1-40 bytes of one ASCII class, then a
// non-ASCII letter, mark, digit or CJK character, a contraction, spaces)
// put every run end at every offset of a word, and next to the characters
// that make a fast path hand over to the general one.
TEST_CASE("word-at-a-time ASCII runs next to non-ASCII characters equal the generic path") {
  std::mt19937_64 rng(13);
  const std::vector<std::string> runs = {"abcdefghijklmnopqrstuvwxyzabcdefghijklmn",
                                         "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMN",
                                         "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgHiJkLmN",
                                         "0123456789012345678901234567890123456789",
                                         "                                        ",
                                         "..,,;;::!!??--__((//))[[]]{{}}<<>>==++**"};
  const std::vector<std::string> single = {"\u00e9", "\u00c9", "\u01C5", "\u02B0", "\u0301", "\u4e2d",
                                           "\u3042", "\u0661", "\u00b2", "\u017f", "'s", "'LL", "'",
                                           "\n", "\r\n", "\t", "\u00a0", "\U0001F600", "a", "Z", "1", " "};
  std::uniform_int_distribution<size_t> pick_run(0, runs.size() - 1), pick_single(0, single.size() - 1),
      run_len(1, 40), parts(1, 12);
  const int n = LongCampaign() ? 200000 : 20000;
  Counts total;
  for (const auto& f : Families()) {
    Checker ch(f);
    for (int i = 0; i < n; ++i) {
      std::string s;
      for (size_t k = parts(rng); k > 0; --k) {
        const std::string& r = runs[pick_run(rng)];
        const size_t len = run_len(rng), at = rng() % (r.size() - len + 1);
        s += r.substr(at, len);
        s += single[pick_single(rng)];
      }
      ch.Compare(s, rng, i % 8 == 0 ? -1 : 4, total);
    }
  }
  Report("ASCII runs next to non-ASCII", total);
}

TEST_CASE("scanner: random mid-length strings, every hard boundary checked") {
  std::mt19937_64 rng(7);
  const std::vector<std::string> alpha = {"a", "A", "s", "'", "l", "L", "1", "2", "\u0661", " ",
                                          " ", "\t", "\n", "\r", ".", "/", "$", "\u00a0", "\u0085",
                                          "\u0301", "\u01C5", "\u02B0", "\u4e2d", "\u309b", "\x01",
                                          "\u017f"};
  const int n = LongCampaign() ? 200000 : 8000;
  std::uniform_int_distribution<size_t> len(7, 40);
  Counts total;
  for (const auto& f : Families()) {
    Checker ch(f);
    for (int i = 0; i < n; ++i) {
      const std::string s = RandomString(rng, alpha, len(rng));
      ch.Compare(s, rng, -1, total);
    }
  }
  Report("random mid-length strings", total);
}

TEST_CASE("scanner: families are detected from the tokenizer files") {
  struct Case {
    const char* tokenizer;
    PatternFamily family;
  };
  const Case cases[] = {
      {"llama3", PatternFamily::kCl100k},      {"llama3_1", PatternFamily::kCl100k},
      {"gpt35turbo", PatternFamily::kCl100k},  {"qwen3", PatternFamily::kQwen2},
      {"gpt4o", PatternFamily::kO200k},        {"gptoss", PatternFamily::kO200k},
      {"deepseek_v3", PatternFamily::kDeepSeekV3}, {"llama2", PatternFamily::kNone},
      {"gemma3", PatternFamily::kNone},
  };
  for (const auto& c : cases) {
    auto content = toktier::test::ReadFile(toktier::test::TokenizerPath(c.tokenizer));
    REQUIRE_MESSAGE(content.has_value(), "tokenizer files missing: run tools/dev.sh setup (no " << c.tokenizer << ")");
    auto j = nlohmann::json::parse(*content);
    std::vector<PreTokenizerStep> steps;
    std::string err;
    REQUIRE_MESSAGE(core::ParsePreTokenizerSteps(j["pre_tokenizer"], &steps, &err), err);
    CHECK_MESSAGE(core::DetectFamily(steps) == c.family, c.tokenizer);
    CHECK((core::MakeFamilyScanner(steps) != nullptr) == (c.family != PatternFamily::kNone));
  }
  const std::pair<const char*, PatternFamily> tiktoken[] = {
      {"r50k_base", PatternFamily::kGpt2},    {"p50k_base", PatternFamily::kGpt2},
      {"p50k_edit", PatternFamily::kGpt2},    {"cl100k_base", PatternFamily::kCl100k},
      {"o200k_base", PatternFamily::kO200k}, {"gpt2", PatternFamily::kGpt2},
  };
  for (const auto& [name, family] : tiktoken) {
    auto content = toktier::test::ReadFile(toktier::test::TokenizerPath(std::string("tiktoken:") + name));
    REQUIRE_MESSAGE(content.has_value(), "tokenizer files missing: run tools/dev.sh setup (no " << name << ")");
    auto j = nlohmann::json::parse(*content);
    // As the tiktoken loader builds it: one Split, Removed, invert=true.
    std::vector<PreTokenizerStep> steps = {
        SplitStep(j["pat_str"].get<std::string>(), SplitBehavior::kRemoved, true)};
    CHECK_MESSAGE(core::DetectFamily(steps) == family, name);
  }
  // ByteLevel(use_regex=true) alone is GPT-2; other behaviours, a changed
  // pattern, or an extra step are not a family.
  CHECK(core::DetectFamily({ByteLevel(true)}) == PatternFamily::kGpt2);
  CHECK(core::DetectFamily({SplitStep(fp::kCl100k, SplitBehavior::kMergedWithPrevious)}) ==
        PatternFamily::kNone);
  CHECK(core::DetectFamily({SplitStep(fp::kCl100k, SplitBehavior::kRemoved, false)}) ==
        PatternFamily::kNone);
  CHECK(core::DetectFamily({SplitStep(std::string(fp::kCl100k) + "|x")}) == PatternFamily::kNone);
  CHECK(core::DetectFamily({SplitStep(fp::kCl100k), SplitStep(fp::kGpt2)}) == PatternFamily::kNone);
  CHECK(core::DetectFamily({SplitStep(fp::kDeepSeekDigits), SplitStep(fp::kDeepSeekCjk),
                            SplitStep(fp::kDeepSeekMain, SplitBehavior::kRemoved, true)}) ==
        PatternFamily::kNone);
}

TEST_CASE("scanner: hard boundary rules on typical text") {
  // The rules fire often on ordinary prose and code (the repair wants one
  // within a few characters of any edit).
  const std::string prose =
      "The quick brown fox, who wasn't there, jumped over 12345 lazy dogs.\n"
      "    if (x == 42) { return foo_bar(y); } // done\r\n";
  for (const auto& f : Families()) {
    auto sc = core::MakeFamilyScanner(f.steps);
    REQUIRE(sc);
    int hard = 0, chars = 0;
    size_t longest_gap = 0, last = 0;
    for (size_t p = 1; p < prose.size(); ++p) {
      ++chars;
      if (sc->IsHardBoundary(prose, p)) {
        ++hard;
        longest_gap = std::max(longest_gap, p - last);
        last = p;
      }
    }
    MESSAGE(std::string(f.name) << ": " << hard << " hard boundaries in " << chars
                   << " positions, longest stretch without one " << longest_gap);
    CHECK(hard * 4 > chars);
    CHECK(longest_gap <= 12);
    CHECK_FALSE(sc->IsHardBoundary(prose, 0));
    CHECK_FALSE(sc->IsHardBoundary(prose, prose.size()));
  }
  // Not hard: inside a word, space before a word, digits mid-chunk in cl100k.
  auto cl = core::MakeFamilyScanner(FamilyNamed("cl100k").steps);
  CHECK_FALSE(cl->IsHardBoundary("hello", 2));
  CHECK_FALSE(cl->IsHardBoundary("a b", 2));
  CHECK_FALSE(cl->IsHardBoundary("a  b", 2));
  CHECK_FALSE(cl->IsHardBoundary("12345", 3));
  CHECK_FALSE(cl->IsHardBoundary(".\n", 1));
  CHECK(cl->IsHardBoundary("hello world", 5));
  CHECK(cl->IsHardBoundary("x\ny", 2));
  // A UTF-8 continuation byte is never a boundary.
  CHECK_FALSE(cl->IsHardBoundary("a\u00e9.", 2));
}
