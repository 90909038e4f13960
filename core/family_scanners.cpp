// Hand-written scanners for the known pre-tokenizer families (see
// pretokenizer.h), and their hard-boundary rules (docs/repair.md).
//
// Each scanner reproduces, match by match, what Oniguruma's find_iter does
// with the family's pattern: at each position the alternatives are tried in
// order, each greedy with backtracking, and the first that matches wins. The
// comments at each matcher name the alternative being reproduced. Pieces are
// the matches (the GPT-2 / cl100k / Qwen2 / o200k patterns match every
// character, so there are no gaps; DeepSeek-V3's third pattern can leave
// gaps, which become pieces of their own as HF's Isolated split does).
#include "core/family_scanners.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <vector>

#include "core/core.h"
#include "core/unicode.h"

namespace toktier::core {
namespace {

using unicode::DecodeAt;

constexpr size_t kNpos = static_cast<size_t>(-1);

// Scanner classes of a character (one bit set per property).
enum Cls : uint32_t {
  kL = 1u << 0,          // \p{L}
  kN = 1u << 1,          // \p{N}
  kWs = 1u << 2,         // \s
  kCrLf = 1u << 3,       // \r or \n
  kSpace = 1u << 4,      // ' '
  kO = 1u << 5,          // [^\s\p{L}\p{N}]
  kUpSet = 1u << 6,      // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowSet = 1u << 7,     // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kLM = 1u << 8,         // [\p{L}\p{M}]
  kPS = 1u << 9,         // [\p{P}\p{S}]
  kCjk = 1u << 10,       // DeepSeek's [一-龥぀-ゟ゠-ヿ]
  kAsciiPunct = 1u << 11,  // DeepSeek's [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]
  kAsciiAlpha = 1u << 12,  // [A-Za-z]
  kCrLfSlash = 1u << 13,   // [\r\n/]
  kApos = 1u << 14,        // '
  kDsOther = 1u << 15,     // neither \p{N} nor DeepSeek CJK
};

#define TOKTIER_FS_INLINE inline __attribute__((always_inline))

__attribute__((noinline)) uint32_t ClassOf(char32_t cp) {
  using namespace unicode;
  const uint16_t b = unicode::Classes(cp);
  uint32_t c = 0;
  if (b & kLetter) c |= kL | kLM;
  if (b & kNumber) c |= kN;
  if (b & kWhite) c |= kWs;
  if (!(b & (kWhite | kLetter | kNumber))) c |= kO;
  if (b & (kLu | kLt | kLm | kLo | kMark)) c |= kUpSet;
  if (b & (kLl | kLm | kLo | kMark)) c |= kLowSet;
  if (b & kMark) c |= kLM;
  if (b & (kPunct | kSymbol)) c |= kPS;
  if ((cp >= 0x4E00 && cp <= 0x9FA5) || (cp >= 0x3040 && cp <= 0x30FF)) c |= kCjk;
  if (cp == '\r' || cp == '\n') c |= kCrLf | kCrLfSlash;
  if (cp == '/') c |= kCrLfSlash;
  if (cp == ' ') c |= kSpace;
  if (cp == '\'') c |= kApos;
  if (!(c & (kN | kCjk))) c |= kDsOther;
  if (cp < 128 && ((cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z'))) c |= kAsciiAlpha;
  if (cp < 128 && cp > 32 && cp < 127 && !((cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') ||
                                          (cp >= '0' && cp <= '9')))
    c |= kAsciiPunct;
  return c;
}

// gpu/ reads these bits through core.h (DeviceClassBits): one meaning each.
constexpr bool SameBit(uint32_t a, uint32_t b) { return a == b; }
static_assert(SameBit(kL, kDevL) &&
              SameBit(kN, kDevN) &&
              SameBit(kWs, kDevWs) &&
              SameBit(kCrLf, kDevCrLf) &&
              SameBit(kSpace, kDevSpace) &&
              SameBit(kO, kDevO) &&
              SameBit(kUpSet, kDevUpSet) &&
              SameBit(kLowSet, kDevLowSet) &&
              SameBit(kLM, kDevLM) &&
              SameBit(kPS, kDevPS) &&
              SameBit(kCjk, kDevCjk) &&
              SameBit(kAsciiPunct, kDevAsciiPunct) &&
              SameBit(kAsciiAlpha, kDevAsciiAlpha) &&
              SameBit(kCrLfSlash, kDevCrLfSlash) &&
              SameBit(kApos, kDevApos) &&
              SameBit(kDsOther, kDevDsOther));

// Classes of ASCII bytes (bytes >= 0x80 have no bits: the slow path
// decodes), and of the BMP in two stages (blocks of 128 code points, equal
// blocks shared), both built once from ClassOf; the supplementary planes
// call ClassOf itself.
struct ClassTables {
  static_assert(kDsOther <= 0xFFFF, "classes fit 16 bits");
  std::array<uint32_t, 256> ascii{};
  std::array<uint16_t, 512> stage1{};
  std::vector<uint16_t> blocks;
  ClassTables() {
    for (char32_t c = 0; c < 128; ++c) ascii[c] = ClassOf(c);
    std::map<std::vector<uint16_t>, uint16_t> seen;
    std::vector<uint16_t> block(128);
    for (uint32_t hi = 0; hi < 512; ++hi) {
      for (uint32_t lo = 0; lo < 128; ++lo) block[lo] = static_cast<uint16_t>(ClassOf((hi << 7) | lo));
      const auto [it, fresh] = seen.emplace(block, static_cast<uint16_t>(blocks.size() / 128));
      if (fresh) blocks.insert(blocks.end(), block.begin(), block.end());
      stage1[hi] = it->second;
    }
  }
  TOKTIER_FS_INLINE uint32_t Of(char32_t cp) const {
    if (cp < 0x10000) [[likely]] {
      return blocks[(static_cast<uint32_t>(stage1[cp >> 7]) << 7) | (cp & 127)];
    }
    return ClassOf(cp);
  }
  static const ClassTables& Get() {
    static const ClassTables tables;
    return tables;
  }
};

// A view of one segment with class lookups.
class Text {
 public:
  Text(std::string_view s, const ClassTables& tables)
      : s_(reinterpret_cast<const unsigned char*>(s.data())), sv_(s), ascii_(tables.ascii.data()), tables_(tables) {}

  unsigned char Byte(size_t i) const { return s_[i]; }
  // Class of the byte at i if it is ASCII, else 0.
  uint32_t AsciiClass(size_t i) const { return ascii_[s_[i]]; }

  // Class of the character at i (< end); its length in *len.
  TOKTIER_FS_INLINE uint32_t At(size_t i, size_t* len) const {
    const unsigned char c = s_[i];
    if (c < 0x80) {
      *len = 1;
      return ascii_[c];
    }
    return tables_.Of(DecodeAt(sv_, i, len));
  }
  TOKTIER_FS_INLINE uint32_t At(size_t i) const {
    size_t len;
    return At(i, &len);
  }

  // End of the run of characters having any of `mask`, from i, before n.
  TOKTIER_FS_INLINE size_t Run(size_t i, size_t n, uint32_t mask) const {
    for (;;) {
      // Word-at-a-time for the classes whose ASCII members are one byte
      // range (or all but one): a stop at an ASCII byte ends the run.
      bool stopped = false;
      if (mask == kL || mask == kLM || mask == kAsciiAlpha) {
        i = AsciiRunWords<'a', 'z', 0x20, true>(i, n, &stopped);
      } else if (mask == kLowSet) {
        i = AsciiRunWords<'a', 'z', 0, true>(i, n, &stopped);
      } else if (mask == kUpSet) {
        i = AsciiRunWords<'A', 'Z', 0, true>(i, n, &stopped);
      } else if (mask == kDsOther) {
        i = AsciiRunWords<'0', '9', 0, false>(i, n, &stopped);
      }
      if (stopped) return i;
      while (i < n && (ascii_[s_[i]] & mask)) ++i;
      if (i >= n || s_[i] < 0x80) return i;
      size_t len;
      if (!(tables_.Of(DecodeAt(sv_, i, &len)) & mask)) return i;
      i += len;
    }
  }

  // Word-at-a-time part of Run: from i, the end of the run of ASCII bytes
  // inside [kLo, kHi] (kInside; after OR-ing kFold into each byte) or
  // outside it (!kInside), within whole 8-byte words. *stopped: the run
  // ends at the returned position, an ASCII byte that is not a member;
  // otherwise the byte loop goes on from there (a word holding a non-ASCII
  // byte, or fewer than 8 bytes left). For bytes below 0x80, adding
  // 0x80 - lo sets a byte's top bit iff it is >= lo, with no carry out.
  template <unsigned char kLo, unsigned char kHi, unsigned char kFold, bool kInside>
  TOKTIER_FS_INLINE size_t AsciiRunWords(size_t i, size_t n, bool* stopped) const {
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s_ + i, 8);
      if (w & kHigh) return i;
      const uint64_t x = w | (kOnes * kFold);
      const uint64_t ge_lo = (x + kOnes * (0x80 - kLo)) & kHigh;
      const uint64_t gt_hi = (x + kOnes * (0x80 - kHi - 1)) & kHigh;
      const uint64_t inside = ge_lo & ~gt_hi;
      const uint64_t nonmember = (kInside ? ~inside : inside) & kHigh;
      if (nonmember) {
        *stopped = true;
        return i + static_cast<size_t>(__builtin_ctzll(nonmember) / 8);
      }
      i += 8;
    }
    return i;
  }

  // End of the run of ASCII bytes in [kLo, kHi] (after OR-ing kFold) from i,
  // before n; stops at any other byte, a non-ASCII one included.
  template <unsigned char kLo, unsigned char kHi, unsigned char kFold>
  TOKTIER_FS_INLINE size_t AsciiRangeEnd(size_t i, size_t n) const {
    bool stopped = false;
    i = AsciiRunWords<kLo, kHi, kFold, true>(i, n, &stopped);
    if (stopped) return i;
    while (i < n && s_[i] < 0x80 && static_cast<unsigned char>((s_[i] | kFold) - kLo) <= kHi - kLo) ++i;
    return i;
  }

  // End of the run of ASCII capitals from i, before n: a byte loop, since
  // such runs are short (words start with one; word-at-a-time was slower).
  size_t AsciiCapitalsEnd(size_t i, size_t n) const {
    while (i < n && s_[i] >= 'A' && s_[i] <= 'Z') ++i;
    return i;
  }

  // Lower-cased letter of a contraction at i (< n), or 0; *len its length.
  // With `fold`, (?i:) semantics: ASCII case plus U+017F (long s folds to s).
  int ContractionLetter(size_t i, size_t n, bool fold, size_t* len) const {
    const unsigned char c = s_[i];
    *len = 1;
    if (c < 0x80) {
      if (fold && c >= 'A' && c <= 'Z') return c | 0x20;
      return c;
    }
    if (fold && c == 0xC5 && i + 1 < n && s_[i + 1] == 0xBF) {
      *len = 2;
      return 's';
    }
    return 0;
  }

  // Byte length of 's|'t|'re|'ve|'m|'ll|'d at i (s_[i] == '\''), 0 if none.
  size_t Contraction(size_t i, size_t n, bool fold) const {
    if (i + 1 >= n) return 0;
    size_t l1;
    const int c1 = ContractionLetter(i + 1, n, fold, &l1);
    switch (c1) {
      case 's': case 't': case 'm': case 'd':
        return 1 + l1;
      case 'r': case 'v': case 'l': {
        const size_t k = i + 1 + l1;
        if (k >= n) return 0;
        size_t l2;
        const int c2 = ContractionLetter(k, n, fold, &l2);
        if (c2 == (c1 == 'l' ? 'l' : 'e')) return 1 + l1 + l2;
        return 0;
      }
      default:
        return 0;
    }
  }

  // Whitespace alternatives at i (a whitespace character), up to n:
  // with `crlf_alt`, \s*[\r\n]+ first; then \s+(?!\S), then \s+.
  size_t WhitespaceEnd(size_t i, size_t n, bool crlf_alt) const {
    size_t j = i, last = i, crlf_end = 0;
    while (j < n) {
      // Runs of spaces (indentation) a word at a time.
      if (s_[j] == ' ' && j + 8 <= n) {
        size_t k = j;
        for (;;) {
          uint64_t w;
          std::memcpy(&w, s_ + k, 8);
          const uint64_t x = w ^ 0x2020202020202020ULL;
          if (x != 0) {
            k += static_cast<size_t>(__builtin_ctzll(x) / 8);
            break;
          }
          k += 8;
          if (k + 8 > n) break;
        }
        if (k > j) {
          last = k - 1;
          j = k;
          continue;
        }
      }
      const unsigned char c = s_[j];
      size_t len = 1;
      uint32_t cls;
      if (c < 0x80) {
        cls = ascii_[c];
      } else {
        cls = tables_.Of(DecodeAt(sv_, j, &len));
      }
      if (!(cls & kWs)) break;
      if (cls & kCrLf) crlf_end = j + len;
      last = j;
      j += len;
    }
    if (crlf_alt && crlf_end) return crlf_end;  // \s*[\r\n]+
    if (j == n) return n;                       // \s+(?!\S) at the end
    if (last > i) return last;                  // \s+(?!\S): leave the last one
    return j;                                   // \s+
  }

 private:
  const unsigned char* s_;
  std::string_view sv_;
  const uint32_t* ascii_;
  const ClassTables& tables_;
};

// Writes pieces through a raw pointer, growing the vector in chunks. From
// the vector's end (kAppend: Split's contract), or from its start keeping
// its size as room (kReuse: SplitReusing's; count() says how many).
class Out {
 public:
  enum Mode { kAppend, kReuse };
  Out(std::vector<Span>& v, Mode mode) : v_(v), mode_(mode), used_(mode == kAppend ? v.size() : 0) {
    if (mode == kAppend || v_.size() < 1024) {
      Grow();
    } else {
      p_ = v_.data();
      end_ = p_ + v_.size();
    }
  }
  ~Out() {
    if (mode_ == kAppend) v_.resize(count());
  }
  Out(const Out&) = delete;
  Out& operator=(const Out&) = delete;
  TOKTIER_FS_INLINE void Push(size_t b, size_t e) {
    if (p_ == end_) Grow();
    *p_++ = Span{static_cast<uint32_t>(b), static_cast<uint32_t>(e)};
  }
  size_t count() const { return static_cast<size_t>(p_ - v_.data()); }

 private:
  __attribute__((noinline)) void Grow() {
    if (p_) used_ = count();
    v_.resize(std::max(used_ + 1024, v_.size() + v_.size() / 2));
    p_ = v_.data() + used_;
    end_ = v_.data() + v_.size();
  }
  std::vector<Span>& v_;
  Mode mode_;
  size_t used_;
  Span* p_ = nullptr;
  Span* end_ = nullptr;
};

TOKTIER_FS_INLINE void Emit(Out& out, size_t b, size_t e) { out.Push(b, e); }

// ---------------------------------------------------------------------------
// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t MatchGpt2(const Text& t, size_t i, size_t n) {
  if (t.Byte(i) == '\'') {
    if (size_t k = t.Contraction(i, n, false)) return i + k;
  }
  size_t len;
  uint32_t c = t.At(i, &len);
  size_t start = i;
  if ((c & kSpace) && i + 1 < n) {
    const uint32_t c2 = t.At(i + 1);
    if (c2 & (kL | kN | kO)) {
      start = i + 1;
      c = c2;
    }
  }
  if (c & kL) return t.Run(start, n, kL);
  if (c & kN) return t.Run(start, n, kN);
  if (c & kO) return t.Run(start, n, kO);
  return t.WhitespaceEnd(i, n, false);
}

// cl100k / Llama 3 (kDigitsMax = 3) and Qwen2 (kDigitsMax = 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
template <int kDigitsMax>
size_t MatchCl100k(const Text& t, size_t i, size_t n) {
  const unsigned char b = t.Byte(i);
  if (b == '\'') {
    if (size_t k = t.Contraction(i, n, true)) return i + k;
  }
  size_t len;
  const uint32_t c = t.At(i, &len);
  if (c & kL) return t.Run(i + len, n, kL);
  if (!(c & (kCrLf | kN)) && i + len < n && (t.At(i + len) & kL)) return t.Run(i + len, n, kL);
  if (c & kN) {
    size_t e = i + len;
    for (int k = 1; k < kDigitsMax && e < n; ++k) {
      size_t l2;
      if (!(t.At(e, &l2) & kN)) break;
      e += l2;
    }
    return e;
  }
  if (c & kO) return t.Run(t.Run(i + len, n, kO), n, kCrLf);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kO)) return t.Run(t.Run(i + 1, n, kO), n, kCrLf);
  return t.WhitespaceEnd(i, n, true);
}

// o200k:
// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?
// |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|...)?
// |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
inline size_t O200kContraction(const Text& t, size_t e, size_t n) {
  return (e < n && t.Byte(e) == '\'') ? t.Contraction(e, n, true) : 0;
}

// First alternative after the optional prefix, from s: U*W+ contraction?.
size_t O200kAlt1(const Text& t, size_t s, size_t n) {
  // Fast path: a U* run of ASCII capitals only, ending at an ASCII
  // character or the end. None of its characters is in W, so there is no
  // backtracking point: W+ must start right after it.
  {
    const size_t j = t.AsciiCapitalsEnd(s, n);
    if (j >= n || t.Byte(j) < 0x80) {
      if (j < n && (t.At(j) & kLowSet)) {
        const size_t e = t.Run(j, n, kLowSet);
        return e + O200kContraction(t, e, n);
      }
      return kNpos;
    }
  }
  size_t j = s, last_low_end = kNpos;
  while (j < n) {
    size_t len;
    const uint32_t c = t.At(j, &len);
    if (!(c & kUpSet)) break;
    if (c & kLowSet) last_low_end = j + len;
    j += len;
  }
  if (j < n && (t.At(j) & kLowSet)) {
    // U* took the whole run; W+ continues from j.
    const size_t e = t.Run(j, n, kLowSet);
    return e + O200kContraction(t, e, n);
  }
  // Backtrack U* to the last character that W+ accepts; W+ is that one
  // character (everything after it in the run is U only).
  if (last_low_end != kNpos) return last_low_end + O200kContraction(t, last_low_end, n);
  return kNpos;
}

// Second alternative after the optional prefix, from s: U+W* contraction?.
size_t O200kAlt2(const Text& t, size_t s, size_t n) {
  if (s >= n || !(t.At(s) & kUpSet)) return kNpos;
  const size_t e = t.Run(t.Run(s, n, kUpSet), n, kLowSet);
  return e + O200kContraction(t, e, n);
}

// The letter alternatives on ASCII letters, from s (a letter at i, or one
// right after a prefix character at i): [A-Z]*[a-z]+ (the first
// alternative), else [A-Z]+ (the second, W* taking nothing), then a
// contraction. Uppercase ASCII letters are not in W, so the first one has
// nothing to backtrack to. kNpos where a run stops at a non-ASCII byte
// (a non-ASCII letter may continue it): the general path decides.
TOKTIER_FS_INLINE size_t O200kAsciiLetters(const Text& t, size_t s, size_t n) {
  const size_t j = t.AsciiCapitalsEnd(s, n);
  if (j < n && t.Byte(j) >= 0x80) return kNpos;
  size_t e = j;
  if (j < n && t.Byte(j) >= 'a' && t.Byte(j) <= 'z') {
    e = t.AsciiRangeEnd<'a', 'z', 0>(j, n);
    if (e < n && t.Byte(e) >= 0x80) return kNpos;
  }
  return e + O200kContraction(t, e, n);
}

size_t MatchO200k(const Text& t, size_t i, size_t n) {
  {
    const uint32_t a = t.AsciiClass(i);
    size_t r = kNpos;
    if (a & kAsciiAlpha) {
      r = O200kAsciiLetters(t, i, n);
    } else if ((a & (kO | kWs)) && !(a & kCrLf) && i + 1 < n && (t.AsciiClass(i + 1) & kAsciiAlpha)) {
      r = O200kAsciiLetters(t, i + 1, n);  // [^\r\n\p{L}\p{N}] prefix
    }
    if (r != kNpos) return r;
  }
  size_t len;
  const uint32_t c = t.At(i, &len);
  // The letter alternatives need a U or W character right after the optional
  // prefix (or at i): skip them when neither is there.
  const bool self = c & (kUpSet | kLowSet);
  const bool prefix = !(c & (kCrLf | kL | kN)) && i + len < n && (t.At(i + len) & (kUpSet | kLowSet));
  if (self || prefix) {
    size_t r;
    if (prefix && (r = O200kAlt1(t, i + len, n)) != kNpos) return r;
    if (self && (r = O200kAlt1(t, i, n)) != kNpos) return r;
    if (prefix && (r = O200kAlt2(t, i + len, n)) != kNpos) return r;
    if (self && (r = O200kAlt2(t, i, n)) != kNpos) return r;
  }
  if (c & kN) {
    size_t e = i + len;
    for (int k = 1; k < 3 && e < n; ++k) {
      size_t l2;
      if (!(t.At(e, &l2) & kN)) break;
      e += l2;
    }
    return e;
  }
  if (c & kO) return t.Run(t.Run(i + len, n, kO), n, kCrLfSlash);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kO)) {
    return t.Run(t.Run(i + 1, n, kO), n, kCrLfSlash);
  }
  return t.WhitespaceEnd(i, n, true);
}

// DeepSeek-V3's third split:
// [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//  ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// kNpos where nothing matches at i (the character joins a gap).
TOKTIER_FS_INLINE size_t MatchDeepSeekMain(const Text& t, size_t i, size_t n) {
  size_t len;
  const uint32_t c = t.At(i, &len);
  if ((c & kAsciiPunct) && i + 1 < n && t.Byte(i + 1) < 0x80 && (t.At(i + 1) & kAsciiAlpha)) {
    return t.Run(i + 1, n, kAsciiAlpha);
  }
  if (!(c & (kCrLf | kL | kPS)) && i + len < n && (t.At(i + len) & kLM)) {
    return t.Run(i + len, n, kLM);
  }
  if (c & kLM) return t.Run(i + len, n, kLM);
  if (c & kPS) return t.Run(t.Run(i + len, n, kPS), n, kCrLf);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kPS)) {
    return t.Run(t.Run(i + 1, n, kPS), n, kCrLf);
  }
  if (c & kWs) return t.WhitespaceEnd(i, n, true);
  return kNpos;
}

// Split of [b, e) by the third pattern (Isolated: gaps are pieces too).
void SplitDeepSeekMain(const Text& t, size_t b, size_t e, Out& out) {
  size_t i = b, gap = b;
  while (i < e) {
    const size_t m = MatchDeepSeekMain(t, i, e);
    if (m == kNpos) {
      size_t len;
      t.At(i, &len);
      i += len;
      continue;
    }
    if (gap < i) Emit(out, gap, i);
    Emit(out, i, m);
    i = gap = m;
  }
  if (gap < e) Emit(out, gap, e);
}

class FamilyScanner final : public Splitter {
 public:
  explicit FamilyScanner(PatternFamily family) : family_(family), tables_(ClassTables::Get()) {}

  void Split(std::string_view segment, std::vector<Span>& pieces) const override {
    Out out(pieces, Out::kAppend);
    SplitInto(segment, out);
  }
  size_t SplitReusing(std::string_view segment, std::vector<Span>& pieces) const override {
    Out out(pieces, Out::kReuse);
    SplitInto(segment, out);
    return out.count();
  }

  bool IsHardBoundary(std::string_view text, size_t p) const override;

  std::string_view name() const override { return FamilyName(family_); }

 private:
  void SplitInto(std::string_view segment, Out& out) const {
    const Text t(segment, tables_);
    const size_t n = segment.size();
    if (n == 0) return;
    switch (family_) {
      case PatternFamily::kGpt2: Loop<MatchGpt2>(t, n, out); break;
      case PatternFamily::kCl100k: Loop<MatchCl100k<3>>(t, n, out); break;
      case PatternFamily::kQwen2: Loop<MatchCl100k<1>>(t, n, out); break;
      case PatternFamily::kO200k: Loop<MatchO200k>(t, n, out); break;
      case PatternFamily::kDeepSeekV3: SplitDeepSeek(t, n, out); break;
      case PatternFamily::kNone: break;
    }
  }

  template <size_t (*kMatch)(const Text&, size_t, size_t)>
  static void Loop(const Text& t, size_t n, Out& out) {
    size_t i = 0;
    while (i < n) {
      const size_t e = kMatch(t, i, n);
      Emit(out, i, e);
      i = e;
    }
  }

  // Steps 1 and 2 (\p{N}{1,3} and the kana/CJK runs, both Isolated) cut the
  // segment into maximal runs of digits (in chunks of three), of CJK and of
  // other characters; step 3 then splits the CJK and other runs (a digit
  // chunk has nothing step 3 can match, so it stays whole).
  static void SplitDeepSeek(const Text& t, size_t n, Out& out) {
    size_t i = 0;
    while (i < n) {
      size_t len;
      const uint32_t c = t.At(i, &len);
      if (c & kN) {
        size_t e = i + len;
        for (int k = 1; k < 3 && e < n; ++k) {
          size_t l2;
          if (!(t.At(e, &l2) & kN)) break;
          e += l2;
        }
        Emit(out, i, e);
        i = e;
        continue;
      }
      const size_t e = t.Run(i + len, n, (c & kCjk) ? kCjk : kDsOther);
      SplitDeepSeekMain(t, i, e, out);
      i = e;
    }
  }

  PatternFamily family_;
  const ClassTables& tables_;
};

// ---------------------------------------------------------------------------
// Hard boundaries (docs/repair.md, "Hard boundaries"). Each rule looks only at
// the characters next to p inside `text`; a character outside `text` counts
// as unknown, and a rule that needs it does not fire.

namespace hb {

inline bool IsM(uint32_t c) { return (c & kLM) && !(c & kL); }
inline bool IsPureLl(uint32_t c) { return (c & kLowSet) && !(c & kUpSet); }
inline bool IsPureLuLt(uint32_t c) { return (c & kUpSet) && !(c & kLowSet); }
inline bool IsWsNotCrLf(uint32_t c) { return (c & kWs) && !(c & kCrLf); }
// DeepSeek: a character that no alternative of the third pattern starts with
// (not \p{L}, \p{M}, \p{N}, \p{P}, \p{S}, \s).
inline bool IsDsOther(uint32_t c) { return !(c & (kLM | kN | kPS | kWs)); }
inline bool IsGpt2ContractionStart(unsigned char b) {
  return b == 's' || b == 't' || b == 'r' || b == 'v' || b == 'm' || b == 'l' || b == 'd';
}

// a = class of text[p-1], b = class of text[p], c = class of text[p-2]
// (has_c false when p-1 is the first character of `text`).
bool Gpt2(uint32_t a, uint32_t b, bool has_c, uint32_t c, unsigned char b_byte) {
  if (a & kL) return !(b & kL);
  if (a & kN) return !(b & kN);
  if (a & kO) {
    if (b & kO) return false;
    if ((a & kApos) && IsGpt2ContractionStart(b_byte)) return has_c && (c & (kO | kSpace));
    return true;
  }
  // a is whitespace: hard only when it is a lone non-space whitespace
  // character before a non-whitespace one.
  if ((b & kWs) || (a & kSpace)) return false;
  return has_c && !(c & kWs);
}

template <bool kSingleDigits>
bool Cl100k(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  if (a & kL) return !(b & kL);
  if (a & kN) return kSingleDigits || !(b & kN);
  if (a & kCrLf) {
    if (!(b & kWs)) return true;
    if (b & kCrLf) return false;
    return has_c && (c & kO);
  }
  if (a & kO) {
    if ((b & kN) || IsWsNotCrLf(b)) return true;
    if (b & kL) return has_c && (c & (kO | kSpace));
    return false;
  }
  // a is whitespace other than CR/LF.
  if (!has_c || IsWsNotCrLf(c)) return false;
  if (b & kN) return true;
  return (b & kO) && !(a & kSpace);
}

bool O200k(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  if (a & kL) {
    if (b & (kN | kWs)) return true;
    if ((b & kO) && !IsM(b) && !(b & kApos)) return true;
    // Lower then upper case ("fooBar"), unless a may be the middle letter of
    // a case-insensitive contraction ("'lL", "'rE").
    return IsPureLl(a) && IsPureLuLt(b) && has_c && !(c & kApos);
  }
  if (a & kN) return !(b & kN);
  if (a & kCrLf) {
    if (!(b & kWs)) return !(b & kCrLfSlash);
    if (b & kCrLf) return false;
    return has_c && (c & kO) && !IsM(c);
  }
  if (a & kO) {  // includes \p{M}
    if ((b & kN) || IsWsNotCrLf(b)) return true;
    if ((b & kL) && !IsM(a) && !(a & kCrLfSlash) && has_c) {
      return (c & kSpace) || ((c & kO) && !IsM(c) && !(c & kCrLfSlash));
    }
    return false;
  }
  if (!has_c || IsWsNotCrLf(c)) return false;
  if (b & kN) return true;
  return (b & kO) && !IsM(b) && !(a & kSpace);
}

bool DeepSeek(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  // Steps 1 and 2: edges of digit runs and of CJK runs cut every text.
  if ((a & kN) != (b & kN)) return true;
  if (a & kN) return false;
  if ((a & kCjk) != (b & kCjk)) return true;
  // Inside one piece of steps 1-2: the third pattern.
  if (a & kLM) return !(b & kLM);
  if (a & kPS) {
    if (b & (kPS | kCrLf)) return false;
    return !((a & kAsciiPunct) && (b & kAsciiAlpha));
  }
  if (a & kCrLf) return !(b & kWs);
  if (!(a & kWs)) return (b & (kPS | kWs)) != 0;  // a gap character
  if (!has_c || IsWsNotCrLf(c)) return false;
  if (IsDsOther(b)) return true;
  return (b & kPS) && !(a & kSpace);
}

}  // namespace hb

bool FamilyScanner::IsHardBoundary(std::string_view text, size_t p) const {
  if (p == 0 || p >= text.size()) return false;
  if ((static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) return false;
  const Text t(text, tables_);
  const size_t pa = unicode::PrevStart(text, p);
  const uint32_t a = t.At(pa);
  const uint32_t b = t.At(p);
  const bool has_c = pa > 0;
  const uint32_t c = has_c ? t.At(unicode::PrevStart(text, pa)) : 0;
  switch (family_) {
    case PatternFamily::kGpt2: return hb::Gpt2(a, b, has_c, c, static_cast<unsigned char>(text[p]));
    case PatternFamily::kCl100k: return hb::Cl100k<false>(a, b, has_c, c);
    case PatternFamily::kQwen2: return hb::Cl100k<true>(a, b, has_c, c);
    case PatternFamily::kO200k: return hb::O200k(a, b, has_c, c);
    case PatternFamily::kDeepSeekV3: return hb::DeepSeek(a, b, has_c, c);
    case PatternFamily::kNone: break;
  }
  return false;
}

}  // namespace

// ---------------------------------------------------------------------------

uint32_t ScannerClassOf(char32_t cp) { return ClassOf(cp); }

std::string_view FamilyName(PatternFamily f) {
  switch (f) {
    case PatternFamily::kGpt2: return "gpt2";
    case PatternFamily::kCl100k: return "cl100k";
    case PatternFamily::kQwen2: return "qwen2";
    case PatternFamily::kO200k: return "o200k";
    case PatternFamily::kDeepSeekV3: return "deepseek_v3";
    case PatternFamily::kNone: break;
  }
  return "none";
}

namespace {

// CR / LF written literally or as \r / \n escapes mean the same to the regex.
std::string CanonicalPattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 8);
  for (char c : p) {
    if (c == '\r') {
      out += "\\r";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

bool IsRegexSplit(const PreTokenizerStep& s, std::string_view pattern) {
  return s.kind == PreTokenizerStep::Kind::kSplit && s.pattern_is_regex &&
         CanonicalPattern(s.pattern) == CanonicalPattern(pattern);
}

// Isolated keeps every match and every gap as its own piece. Removed with
// invert=true keeps the matches and drops the gaps, which are always empty
// for a pattern that matches at every position (GPT-2, cl100k, Qwen2, o200k),
// so the pieces are the same.
bool FullCoverBehaviour(const PreTokenizerStep& s) {
  return (s.behavior == SplitBehavior::kIsolated && !s.invert) ||
         (s.behavior == SplitBehavior::kRemoved && s.invert);
}

bool Isolated(const PreTokenizerStep& s) {
  return s.behavior == SplitBehavior::kIsolated && !s.invert;
}

}  // namespace

PatternFamily DetectFamily(const std::vector<PreTokenizerStep>& all_steps) {
  namespace fp = family_patterns;
  std::vector<const PreTokenizerStep*> steps;
  for (const auto& s : all_steps) {
    if (s.kind == PreTokenizerStep::Kind::kByteLevel && !s.use_regex) continue;
    steps.push_back(&s);
  }
  if (steps.size() == 1) {
    const PreTokenizerStep& s = *steps[0];
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) return PatternFamily::kGpt2;  // use_regex
    if (!FullCoverBehaviour(s)) return PatternFamily::kNone;
    if (IsRegexSplit(s, fp::kGpt2)) return PatternFamily::kGpt2;
    if (IsRegexSplit(s, fp::kCl100k)) return PatternFamily::kCl100k;
    if (IsRegexSplit(s, fp::kQwen2)) return PatternFamily::kQwen2;
    if (IsRegexSplit(s, fp::kO200k)) return PatternFamily::kO200k;
    return PatternFamily::kNone;
  }
  if (steps.size() == 3 && IsRegexSplit(*steps[0], fp::kDeepSeekDigits) && Isolated(*steps[0]) &&
      IsRegexSplit(*steps[1], fp::kDeepSeekCjk) && Isolated(*steps[1]) &&
      IsRegexSplit(*steps[2], fp::kDeepSeekMain) && Isolated(*steps[2])) {
    return PatternFamily::kDeepSeekV3;
  }
  return PatternFamily::kNone;
}

std::unique_ptr<Splitter> MakeFamilyScanner(const std::vector<PreTokenizerStep>& steps) {
  const PatternFamily f = DetectFamily(steps);
  if (f == PatternFamily::kNone) return nullptr;
  return std::make_unique<FamilyScanner>(f);
}

}  // namespace toktier::core

#undef TOKTIER_FS_INLINE
