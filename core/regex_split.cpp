// The generic pre-tokenizer path; see regex_split.h and pretokenizer.h.
//
// Semantics reproduced from HF tokenizers 0.23 (checked against the Node
// binding by tests/core/test_regex_split.cpp):
//  - Pattern::find_matches: the text is cut into (span, is_match) pieces
//    covering it, matches found by the onig crate's find_iter (an empty match
//    that ends where the previous match ended is skipped by advancing one
//    character); an empty text gives one empty non-match.
//  - Invert flips is_match; the behaviors fold the pieces exactly as
//    NormalizedString::split does; empty pieces are dropped afterwards.
//  - Each step runs on every piece of the previous step alone (lookarounds
//    never see across piece boundaries).
#include "core/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <utility>

namespace toktier::core {
namespace {

using unicode::Tables;

constexpr char32_t kMaxCp = 0x10FFFF;

// ---------------------------------------------------------------------------
// Code point sets.

struct CodeSet {
  std::vector<std::pair<char32_t, char32_t>> r;  // sorted, disjoint after Normalize

  void Add(char32_t lo, char32_t hi) { r.emplace_back(lo, hi); }
  void AddSet(const CodeSet& o) { r.insert(r.end(), o.r.begin(), o.r.end()); }
  void Normalize() {
    std::sort(r.begin(), r.end());
    std::vector<std::pair<char32_t, char32_t>> out;
    for (const auto& p : r) {
      if (!out.empty() && p.first <= out.back().second + 1) {
        out.back().second = std::max(out.back().second, p.second);
      } else {
        out.push_back(p);
      }
    }
    r = std::move(out);
  }
  CodeSet Complement() const {  // requires Normalize()d
    CodeSet c;
    char32_t next = 0;
    for (const auto& p : r) {
      if (p.first > next) c.Add(next, p.first - 1);
      next = p.second + 1;
    }
    if (next <= kMaxCp) c.Add(next, kMaxCp);
    return c;
  }
};

// Code points having any of `mask`'s bits.
CodeSet SetFromBits(Tables tables, uint16_t mask) {
  CodeSet s;
  for (const auto& e : unicode::Ranges(tables)) {
    if (e.bits & mask) s.Add(e.first, e.last);
  }
  s.Normalize();
  return s;
}

void AppendHex(std::string& out, char32_t c) {
  char buf[16];
  snprintf(buf, sizeof buf, "\\x{%X}", static_cast<unsigned>(c));
  out += buf;
}

// PCRE2 class for a normalized set; surrogates are cut out (PCRE2 rejects
// them and valid UTF-8 never contains them).
void EmitSet(const CodeSet& s, std::string& out) {
  std::string body;
  for (auto [lo, hi] : s.r) {
    std::pair<char32_t, char32_t> parts[2] = {{lo, hi}, {1, 0}};
    if (lo <= 0xDFFF && hi >= 0xD800) {
      parts[0] = {lo, 0xD7FF};
      parts[1] = {0xE000, hi};
    }
    for (auto [a, b] : parts) {
      if (a > b) continue;
      AppendHex(body, a);
      if (b != a) {
        body += '-';
        AppendHex(body, b);
      }
    }
  }
  if (body.empty()) {
    out += "(?!)";
  } else {
    out += '[';
    out += body;
    out += ']';
  }
}

// ---------------------------------------------------------------------------
// Pattern translation.

bool DecodeUtf8(std::string_view s, size_t pos, char32_t* cp, size_t* len) {
  auto u = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char c = u(pos);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || pos + n > s.size()) return false;
  char32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t i = 1; i < n; ++i) {
    if ((u(pos + i) & 0xC0) != 0x80) return false;
    v = (v << 6) | (u(pos + i) & 0x3F);
  }
  if (v > kMaxCp || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *cp = v;
  *len = n;
  return true;
}

std::string Lower(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == ' ' || c == '_' || c == '-') continue;
    o += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return o;
}

// \p{name} -> class bits; 0 if unknown.
uint16_t PropertyBits(std::string_view name) {
  using namespace unicode;
  static const struct { const char* n; uint16_t b; } kProps[] = {
      {"l", kLetter}, {"letter", kLetter}, {"lu", kLu}, {"uppercaseletter", kLu},
      {"ll", kLl}, {"lowercaseletter", kLl}, {"lt", kLt}, {"titlecaseletter", kLt},
      {"lm", kLm}, {"modifierletter", kLm}, {"lo", kLo}, {"otherletter", kLo},
      {"m", kMark}, {"mark", kMark}, {"combiningmark", kMark}, {"n", kNumber},
      {"number", kNumber}, {"nd", kDigit}, {"decimalnumber", kDigit}, {"p", kPunct},
      {"punctuation", kPunct}, {"s", kSymbol}, {"symbol", kSymbol},
  };
  std::string l = Lower(name);
  for (const auto& p : kProps) {
    if (l == p.n) return p.b;
  }
  return 0;
}

class Translator {
 public:
  Translator(std::string_view pat, Tables tables) : p_(pat), tables_(tables) {}

  bool Run(std::string* out, std::string* error) {
    bool ok = Top();
    if (!ok) {
      *error = "regex " + std::string(p_) + ": " + err_;
      return false;
    }
    *out = std::move(out_);
    return true;
  }

 private:
  bool Fail(std::string msg) {
    if (err_.empty()) err_ = std::move(msg) + " at offset " + std::to_string(i_);
    return false;
  }
  bool hf() const { return tables_ == Tables::kHuggingFace; }
  bool AtEnd() const { return i_ >= p_.size(); }
  char Peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : '\0'; }

  bool ReadHex(size_t max_digits, bool braced, char32_t* v) {
    size_t n = 0;
    *v = 0;
    while (!AtEnd() && (braced || n < max_digits) && isxdigit(static_cast<unsigned char>(Peek()))) {
      char c = Peek();
      *v = *v * 16 + (isdigit(static_cast<unsigned char>(c)) ? c - '0' : (tolower(c) - 'a' + 10));
      ++i_;
      ++n;
      if (*v > kMaxCp) return Fail("hex escape out of range");
    }
    if (n == 0) return Fail("bad hex escape");
    return true;
  }

  // After a backslash: a single code point escape. Returns 1 if it was one
  // (sets *cp), 0 if not a single-character escape, -1 on error.
  int SingleCharEscape(char c, char32_t* cp) {
    switch (c) {
      case 'n': *cp = '\n'; ++i_; return 1;
      case 'r': *cp = '\r'; ++i_; return 1;
      case 't': *cp = '\t'; ++i_; return 1;
      case 'f': *cp = '\f'; ++i_; return 1;
      case 'v': *cp = 0x0B; ++i_; return 1;  // Oniguruma/regex: VT, not PCRE2's class
      case 'e': *cp = 0x1B; ++i_; return 1;
      case 'a': *cp = 0x07; ++i_; return 1;
      case 'x':
        ++i_;
        if (Peek() == '{') {
          ++i_;
          if (!ReadHex(8, true, cp)) return -1;
          if (Peek() != '}') return Fail("unterminated \\x{"), -1;
          ++i_;
        } else if (!ReadHex(2, false, cp)) {
          return -1;
        }
        return 1;
      case 'u':
        if (!hf()) return Fail("\\u escape"), -1;
        ++i_;
        if (!ReadHex(4, false, cp)) return -1;
        return 1;
      case '0': {
        ++i_;
        char32_t v = 0;
        for (int k = 0; k < 2 && Peek() >= '0' && Peek() <= '7'; ++k, ++i_) v = v * 8 + (Peek() - '0');
        *cp = v;
        return 1;
      }
      default:
        break;
    }
    unsigned char uc = static_cast<unsigned char>(c);
    if (uc < 0x80 && !isalnum(uc)) {  // escaped punctuation / space: literal
      *cp = uc;
      ++i_;
      return 1;
    }
    return 0;
  }

  // After a backslash: a class escape (\p{..} \P{..} \s \S \d \D \w \W).
  // Returns 1 and sets *set, 0 if not a class escape, -1 on error.
  int ClassEscape(char c, bool in_bracket, CodeSet* set) {
    using namespace unicode;
    uint16_t bits = 0;
    bool neg = false;
    switch (c) {
      case 's': case 'S': bits = kWhite; neg = c == 'S'; ++i_; break;
      case 'd': case 'D': bits = kDigit; neg = c == 'D'; ++i_; break;
      case 'w': case 'W':
        bits = in_bracket ? kBracketWord : kWord;
        neg = c == 'W';
        ++i_;
        break;
      case 'p': case 'P': {
        neg = c == 'P';
        ++i_;
        if (Peek() != '{') return Fail("\\p without braces"), -1;
        size_t close = p_.find('}', i_);
        if (close == std::string_view::npos) return Fail("unterminated \\p{"), -1;
        std::string_view name = p_.substr(i_ + 1, close - i_ - 1);
        if (!name.empty() && name[0] == '^') {
          if (!hf()) return Fail("\\p{^..}"), -1;
          neg = !neg;
          name.remove_prefix(1);
        }
        bits = PropertyBits(name);
        if (bits == 0) return Fail("unsupported Unicode property \\p{" + std::string(name) + "}"), -1;
        i_ = close + 1;
        break;
      }
      default:
        return 0;
    }
    *set = SetFromBits(tables_, bits);
    if (neg) *set = set->Complement();
    return 1;
  }

  bool Bracket(CodeSet* result) {
    // At '['.
    ++i_;
    bool neg = false;
    if (Peek() == '^') {
      neg = true;
      ++i_;
    }
    if (Peek() == ']') return Fail("']' first in a bracket expression");
    CodeSet set;
    while (true) {
      if (AtEnd()) return Fail("unterminated bracket expression");
      char c = Peek();
      if (c == ']') {
        ++i_;
        break;
      }
      if (c == '[') return Fail("nested bracket / POSIX class");
      if (c == '&' && Peek(1) == '&') return Fail("'&&' class intersection");
      char32_t lo;
      if (c == '\\') {
        ++i_;
        if (AtEnd()) return Fail("trailing backslash");
        CodeSet cls;
        int r = ClassEscape(Peek(), true, &cls);
        if (r < 0) return false;
        if (r == 1) {
          if (Peek() == '-' && Peek(1) != ']') return Fail("range from a class");
          set.AddSet(cls);
          continue;
        }
        r = SingleCharEscape(Peek(), &lo);
        if (r < 0) return false;
        if (r == 0) return Fail(std::string("unsupported escape \\") + Peek() + " in brackets");
      } else {
        size_t len;
        if (!DecodeUtf8(p_, i_, &lo, &len)) return Fail("invalid UTF-8 in pattern");
        i_ += len;
      }
      char32_t hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && i_ + 1 < p_.size()) {
        ++i_;
        if (Peek() == '\\') {
          ++i_;
          int r = SingleCharEscape(Peek(), &hi);
          if (r <= 0) return Fail("bad range end");
        } else if (Peek() == '[') {
          return Fail("bad range end");
        } else {
          size_t len;
          if (!DecodeUtf8(p_, i_, &hi, &len)) return Fail("invalid UTF-8 in pattern");
          i_ += len;
        }
        if (hi < lo) return Fail("reversed range");
      }
      set.Add(lo, hi);
    }
    set.Normalize();
    *result = neg ? set.Complement() : set;
    return true;
  }

  void EmitClass(const CodeSet& s) {
    if (caseless_) out_ += "(?-i:";  // Oniguruma does not case-fold \p{..}, \s, ...
    EmitSet(s, out_);
    if (caseless_) out_ += ')';
  }

  void EmitLiteral(char32_t c) {
    static const char* kSpecial = "\\^$.|?*+()[]{}";
    if (c < 0x80 && (strchr(kSpecial, static_cast<char>(c)) || c < 0x20 || c == 0x7F)) {
      if (c < 0x20 || c == 0x7F) {
        AppendHex(out_, c);
      } else {
        out_ += '\\';
        out_ += static_cast<char>(c);
      }
    } else {
      AppendHex(out_, c);
    }
  }

  bool Top() {
    while (!AtEnd()) {
      char c = Peek();
      switch (c) {
        case '\\': {
          ++i_;
          if (AtEnd()) return Fail("trailing backslash");
          char e = Peek();
          CodeSet cls;
          int r = ClassEscape(e, false, &cls);
          if (r < 0) return false;
          if (r == 1) {
            if (caseless_ && !hf()) return Fail("class inside (?i)");
            EmitClass(cls);
            break;
          }
          if (e == 'A' || e == 'z' || e == 'Z') {
            out_ += '\\';
            out_ += e;
            ++i_;
            break;
          }
          char32_t cp;
          r = SingleCharEscape(e, &cp);
          if (r < 0) return false;
          if (r == 0) return Fail(std::string("unsupported escape \\") + e);
          if (caseless_ && cp >= 0x80) return Fail("non-ASCII literal inside (?i)");
          EmitLiteral(cp);
          break;
        }
        case '[': {
          if (caseless_) return Fail("bracket expression inside (?i)");
          CodeSet s;
          if (!Bracket(&s)) return false;
          EmitClass(s);
          break;
        }
        case '(': {
          ++i_;
          stack_.push_back(caseless_);
          out_ += '(';
          if (Peek() != '?') break;  // capturing group
          ++i_;
          char g = Peek();
          if (g == ':' || g == '=' || g == '!' || g == '>') {
            out_ += '?';
            out_ += g;
            ++i_;
          } else if (g == '<' && (Peek(1) == '=' || Peek(1) == '!')) {
            out_ += "?<";
            out_ += Peek(1);
            i_ += 2;
          } else if (g == 'i' || g == '-') {
            bool on = true, val = caseless_;
            std::string flags;
            while (!AtEnd() && Peek() != ':' && Peek() != ')') {
              char f = Peek();
              if (f == '-') {
                on = false;
              } else if (f == 'i') {
                val = on;
              } else {
                return Fail(std::string("unsupported group option '") + f + "'");
              }
              flags += f;
              ++i_;
            }
            if (AtEnd()) return Fail("unterminated group options");
            out_ += '?';
            out_ += flags;
            if (Peek() == ':') {
              out_ += ':';
              caseless_ = val;
              ++i_;
            } else {  // (?i) : applies to the rest of the enclosing group
              out_ += ')';
              ++i_;
              stack_.pop_back();
              caseless_ = val;
            }
          } else {
            return Fail(std::string("unsupported group (?") + g);
          }
          break;
        }
        case ')':
          if (stack_.empty()) return Fail("unbalanced ')'");
          caseless_ = stack_.back();
          stack_.pop_back();
          out_ += ')';
          ++i_;
          break;
        case '{': {
          // Quantifier; Oniguruma reads {,n} as {0,n}.
          size_t close = p_.find('}', i_);
          std::string_view body = close == std::string_view::npos ? std::string_view() : p_.substr(i_ + 1, close - i_ - 1);
          bool digits_ok = !body.empty() &&
                           std::all_of(body.begin(), body.end(), [](char ch) { return isdigit(static_cast<unsigned char>(ch)) || ch == ','; }) &&
                           std::count(body.begin(), body.end(), ',') <= 1;
          if (digits_ok && body[0] == ',') {
            if (!hf() || body.size() == 1) return Fail("quantifier {" + std::string(body) + "}");
            out_ += "{0";
            out_ += body;
            out_ += '}';
            i_ = close + 1;
          } else if (digits_ok) {
            out_ += '{';
            out_ += body;
            out_ += '}';
            i_ = close + 1;
          } else {
            return Fail("literal '{' (ambiguous between engines)");
          }
          break;
        }
        case '^': case '$': case '.': case '|': case '*': case '+': case '?':
          out_ += c;
          ++i_;
          break;
        default: {
          char32_t cp;
          size_t len;
          if (!DecodeUtf8(p_, i_, &cp, &len)) return Fail("invalid UTF-8 in pattern");
          if (caseless_ && cp >= 0x80) return Fail("non-ASCII literal inside (?i)");
          i_ += len;
          EmitLiteral(cp);
          break;
        }
      }
    }
    if (!stack_.empty()) return Fail("unbalanced '('");
    return true;
  }

  std::string_view p_;
  Tables tables_;
  size_t i_ = 0;
  bool caseless_ = false;
  std::vector<bool> stack_;
  std::string out_;
  std::string err_;
};

// ---------------------------------------------------------------------------
// Matching.

struct ThreadMatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* jit = nullptr;
  ThreadMatchState() {
    md = pcre2_match_data_create(1, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    jit = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(mctx, nullptr, jit);
  }
  ~ThreadMatchState() {
    pcre2_jit_stack_free(jit);
    pcre2_match_context_free(mctx);
    pcre2_match_data_free(md);
  }
};

ThreadMatchState& MatchState() {
  thread_local ThreadMatchState s;
  return s;
}

class Regex {
 public:
  static std::shared_ptr<Regex> Compile(std::string_view pattern, bool pattern_is_regex,
                                        Tables tables, std::string* error) {
    std::string translated;
    if (pattern_is_regex) {
      if (!TranslatePattern(pattern, tables, &translated, error)) return nullptr;
    } else {
      // HF escapes the string and compiles it: a literal match.
      translated = "\\Q" + std::string(pattern) + "\\E";
      if (pattern.find("\\E") != std::string_view::npos) {
        translated.clear();
        size_t len;
        char32_t cp;
        for (size_t i = 0; i < pattern.size(); i += len) {
          if (!DecodeUtf8(pattern, i, &cp, &len)) {
            *error = "invalid UTF-8 in String pattern";
            return nullptr;
          }
          AppendHex(translated, cp);
        }
      }
    }
    pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
    pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
    uint32_t opts = PCRE2_UTF | PCRE2_UCP;
    if (tables == Tables::kHuggingFace) opts |= PCRE2_MULTILINE;  // Oniguruma ^ $ are line anchors
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                     translated.size(), opts, &errcode, &erroff, cctx);
    pcre2_compile_context_free(cctx);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(errcode, buf, sizeof buf);
      *error = "regex " + std::string(pattern) + ": PCRE2: " + reinterpret_cast<char*>(buf);
      return nullptr;
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    auto r = std::shared_ptr<Regex>(new Regex);
    r->code_ = code;
    return r;
  }
  ~Regex() { pcre2_code_free(code_); }

  // Leftmost match at or after `start`; false if none.
  bool Search(std::string_view s, size_t start, size_t* b, size_t* e) const {
    ThreadMatchState& st = MatchState();
    int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                         PCRE2_NO_UTF_CHECK, st.md, st.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      // Resource limits: never silently differ.
      throw std::runtime_error("PCRE2 match error " + std::to_string(rc));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
    *b = ov[0];
    *e = ov[1];
    return true;
  }

 private:
  Regex() = default;
  pcre2_code* code_ = nullptr;
};

struct Piece {
  uint32_t b, e;
  bool match;
};

size_t Utf8Len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// HF Pattern::find_matches for a regex (onig crate find_iter).
void RegexMatches(const Regex& re, std::string_view s, std::vector<Piece>& out) {
  out.clear();
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last_end = 0, prev = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= s.size()) {
    size_t b, e;
    if (!re.Search(s, last_end, &b, &e)) break;
    if (b == e && have_last && last_match_end == e) {
      last_end += last_end < s.size() ? Utf8Len(static_cast<unsigned char>(s[last_end])) : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    if (prev != b) out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(b), false});
    out.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(e), true});
    prev = e;
  }
  if (prev != s.size()) out.push_back({static_cast<uint32_t>(prev), static_cast<uint32_t>(s.size()), false});
}

// HF Pattern::find_matches for a char predicate: every matching character is
// its own match; the runs between them are non-matches.
void CharMatches(uint16_t mask, Tables tables, std::string_view s, std::vector<Piece>& out) {
  out.clear();
  if (s.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    char32_t cp = unicode::DecodeAt(s, i, &len);
    if (unicode::Classes(cp, tables) & mask) {
      if (last < i) out.push_back({static_cast<uint32_t>(last), static_cast<uint32_t>(i), false});
      out.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + len), true});
      last = i + len;
    }
    i += len;
  }
  if (s.size() > last) out.push_back({static_cast<uint32_t>(last), static_cast<uint32_t>(s.size()), false});
}

// NormalizedString::split: fold (span, is_match) pieces by behavior; returns
// kept spans (possibly empty; the caller drops those).
void ApplyBehavior(SplitBehavior behavior, std::vector<Piece>& m, std::vector<Span>& out) {
  out.clear();
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const auto& p : m) {
        if (!p.match) out.push_back({p.b, p.e});
      }
      return;
    case SplitBehavior::kIsolated:
      for (const auto& p : m) out.push_back({p.b, p.e});
      return;
    case SplitBehavior::kContiguous: {
      bool prev = false;
      for (const auto& p : m) {
        if (p.match == prev && !out.empty()) {
          out.back().end = p.e;
        } else {
          out.push_back({p.b, p.e});
        }
        prev = p.match;
      }
      return;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool prev = false;
      for (const auto& p : m) {
        if (p.match && !prev && !out.empty()) {
          out.back().end = p.e;
        } else {
          out.push_back({p.b, p.e});
        }
        prev = p.match;
      }
      return;
    }
    case SplitBehavior::kMergedWithNext: {
      bool prev = false;
      for (auto it = m.rbegin(); it != m.rend(); ++it) {
        if (it->match && !prev && !out.empty()) {
          out.back().begin = it->b;
        } else {
          out.push_back({it->b, it->e});
        }
        prev = it->match;
      }
      std::reverse(out.begin(), out.end());
      return;
    }
  }
}

struct CompiledStep {
  enum class Kind { kNone, kRegex, kChars } kind = Kind::kNone;
  std::shared_ptr<Regex> re;
  uint16_t mask = 0;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kWhitespacePattern = R"(\w+|[^\w\s]+)";

class GenericSplitter final : public Splitter {
 public:
  GenericSplitter(std::vector<CompiledStep> steps, Tables tables)
      : steps_(std::move(steps)), tables_(tables) {}

  void Split(std::string_view segment, std::vector<Span>& pieces) const override {
    std::vector<Span> cur;
    if (!segment.empty()) cur.push_back({0, static_cast<uint32_t>(segment.size())});
    std::vector<Span> next, sub;
    std::vector<Piece> m;
    for (const auto& step : steps_) {
      if (step.kind == CompiledStep::Kind::kNone) continue;
      next.clear();
      for (const auto& piece : cur) {
        std::string_view s = segment.substr(piece.begin, piece.end - piece.begin);
        if (step.kind == CompiledStep::Kind::kRegex) {
          RegexMatches(*step.re, s, m);
        } else {
          CharMatches(step.mask, tables_, s, m);
        }
        if (step.invert) {
          for (auto& p : m) p.match = !p.match;
        }
        ApplyBehavior(step.behavior, m, sub);
        for (const auto& sp : sub) {
          if (sp.end > sp.begin) next.push_back({sp.begin + piece.begin, sp.end + piece.begin});
        }
      }
      cur.swap(next);
    }
    pieces.insert(pieces.end(), cur.begin(), cur.end());
  }

  std::string_view name() const override { return "generic"; }

 private:
  std::vector<CompiledStep> steps_;
  Tables tables_;
};

bool ParseBehavior(const nlohmann::json& v, SplitBehavior* b, std::string* error) {
  static const std::pair<const char*, SplitBehavior> kNames[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous},
  };
  if (v.is_string()) {
    for (const auto& [n, beh] : kNames) {
      if (v.get<std::string>() == n) {
        *b = beh;
        return true;
      }
    }
  }
  *error = "unsupported split behavior " + v.dump();
  return false;
}

bool GetBool(const nlohmann::json& obj, const char* key, bool def, bool* out, std::string* error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    *out = def;
    return true;
  }
  if (!it->is_boolean()) {
    *error = std::string("pre_tokenizer field '") + key + "' is not a boolean";
    return false;
  }
  *out = it->get<bool>();
  return true;
}

}  // namespace

bool TranslatePattern(std::string_view pattern, Tables tables, std::string* out,
                      std::string* error) {
  return Translator(pattern, tables).Run(out, error);
}

std::unique_ptr<Splitter> MakeGenericSplitter(const std::vector<PreTokenizerStep>& steps,
                                              Tables tables, std::string* error) {
  std::vector<CompiledStep> compiled;
  std::string err;
  for (const auto& s : steps) {
    CompiledStep c;
    using K = PreTokenizerStep::Kind;
    switch (s.kind) {
      case K::kSplit:
        c.kind = CompiledStep::Kind::kRegex;
        c.re = Regex::Compile(s.pattern, s.pattern_is_regex, tables, &err);
        c.behavior = s.behavior;
        c.invert = s.invert;
        break;
      case K::kByteLevel:
        if (s.use_regex) {
          c.kind = CompiledStep::Kind::kRegex;
          c.re = Regex::Compile(kGpt2Pattern, true, tables, &err);
          c.behavior = SplitBehavior::kIsolated;
        }
        break;
      case K::kWhitespace:
        c.kind = CompiledStep::Kind::kRegex;
        // HF's Whitespace uses the Rust regex crate (not Oniguruma): its \w
        // is the one tiktoken's engine has (includes ZWJ, excludes U+00B2).
        c.re = Regex::Compile(kWhitespacePattern, true, Tables::kTiktoken, &err);
        c.behavior = SplitBehavior::kRemoved;
        c.invert = true;
        break;
      case K::kWhitespaceSplit:
        c.kind = CompiledStep::Kind::kChars;
        c.mask = unicode::kRustWhite;
        c.behavior = SplitBehavior::kRemoved;
        break;
      case K::kDigits:
        c.kind = CompiledStep::Kind::kChars;
        c.mask = unicode::kRustNumeric;
        c.behavior = s.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
        break;
      case K::kPunctuation:
        c.kind = CompiledStep::Kind::kChars;
        c.mask = unicode::kHfPunct;
        c.behavior = s.behavior;
        break;
    }
    if (c.kind == CompiledStep::Kind::kRegex && !c.re) {
      if (error) *error = err;
      return nullptr;
    }
    compiled.push_back(std::move(c));
  }
  return std::make_unique<GenericSplitter>(std::move(compiled), tables);
}

std::unique_ptr<Splitter> MakeGenericSplitter(const std::vector<PreTokenizerStep>& steps,
                                              std::string* error) {
  return MakeGenericSplitter(steps, Tables::kHuggingFace, error);
}

bool ParsePreTokenizerSteps(const nlohmann::json& pt, std::vector<PreTokenizerStep>* steps,
                            std::string* error) {
  if (pt.is_null()) return true;
  if (!pt.is_object() || !pt.contains("type") || !pt["type"].is_string()) {
    *error = "pre_tokenizer is not an object with a type";
    return false;
  }
  const std::string type = pt["type"].get<std::string>();
  using K = PreTokenizerStep::Kind;
  PreTokenizerStep s;
  if (type == "Sequence") {
    auto it = pt.find("pretokenizers");
    if (it == pt.end() || !it->is_array()) {
      *error = "pre_tokenizer Sequence without 'pretokenizers'";
      return false;
    }
    for (const auto& sub : *it) {
      if (sub.is_null()) {
        *error = "null inside pre_tokenizer Sequence";
        return false;
      }
      if (!ParsePreTokenizerSteps(sub, steps, error)) return false;
    }
    return true;
  }
  if (type == "Split") {
    s.kind = K::kSplit;
    auto pat = pt.find("pattern");
    if (pat == pt.end() || !pat->is_object()) {
      *error = "Split pre_tokenizer without pattern";
      return false;
    }
    if (pat->contains("Regex") && (*pat)["Regex"].is_string()) {
      s.pattern = (*pat)["Regex"].get<std::string>();
      s.pattern_is_regex = true;
    } else if (pat->contains("String") && (*pat)["String"].is_string()) {
      s.pattern = (*pat)["String"].get<std::string>();
      s.pattern_is_regex = false;
    } else {
      *error = "Split pattern " + pat->dump() + " is neither Regex nor String";
      return false;
    }
    if (!pt.contains("behavior")) {
      *error = "Split pre_tokenizer without behavior";
      return false;
    }
    if (!ParseBehavior(pt["behavior"], &s.behavior, error)) return false;
    if (!GetBool(pt, "invert", false, &s.invert, error)) return false;
  } else if (type == "ByteLevel") {
    s.kind = K::kByteLevel;
    bool add_prefix_space;
    if (!GetBool(pt, "add_prefix_space", true, &add_prefix_space, error)) return false;
    if (add_prefix_space) {
      *error = "ByteLevel pre_tokenizer with add_prefix_space=true (inserts text; not a split)";
      return false;
    }
    if (!GetBool(pt, "use_regex", true, &s.use_regex, error)) return false;
  } else if (type == "Digits") {
    s.kind = K::kDigits;
    if (!GetBool(pt, "individual_digits", false, &s.individual_digits, error)) return false;
  } else if (type == "Whitespace") {
    s.kind = K::kWhitespace;
  } else if (type == "WhitespaceSplit") {
    s.kind = K::kWhitespaceSplit;
  } else if (type == "Punctuation") {
    s.kind = K::kPunctuation;
    s.behavior = SplitBehavior::kIsolated;
    if (pt.contains("behavior") && !ParseBehavior(pt["behavior"], &s.behavior, error)) return false;
  } else if (type == "CharDelimiterSplit") {
    auto d = pt.find("delimiter");
    if (d == pt.end() || !d->is_string()) {
      *error = "CharDelimiterSplit without delimiter";
      return false;
    }
    s.kind = K::kSplit;
    s.pattern = d->get<std::string>();
    s.pattern_is_regex = false;
    s.behavior = SplitBehavior::kRemoved;
  } else if (type == "BertPreTokenizer") {
    PreTokenizerStep ws;
    ws.kind = K::kWhitespaceSplit;
    steps->push_back(ws);
    s.kind = K::kPunctuation;
    s.behavior = SplitBehavior::kIsolated;
  } else {
    *error = "unsupported pre_tokenizer type '" + type + "'";
    return false;
  }
  steps->push_back(std::move(s));
  return true;
}

}  // namespace toktier::core
