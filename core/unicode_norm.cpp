#include "core/unicode_norm.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "core/unicode.h"

namespace toktier::core::unicode {
namespace {

struct NormCccRange {
  char32_t first, last;
  uint8_t ccc;
};
struct NormDecomp {
  char32_t cp;
  uint16_t offset;  // into kNormPool
  uint8_t length;
};
struct NormPair {
  char32_t first, second, composite;
};

#include "core/unicode_norm_tables.inc"

static_assert(kNormCanon[0].cp >= 0xA0 && kNormCompat[0].cp >= 0xA0, "Decompose's fast path");

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

const NormDecomp* FindDecomp(const NormDecomp* begin, const NormDecomp* end, char32_t cp) {
  const NormDecomp* it = std::lower_bound(begin, end, cp, [](const NormDecomp& d, char32_t c) { return d.cp < c; });
  return it != end && it->cp == cp ? it : nullptr;
}

// Appends the full decomposition of cp (already canonically ordered).
void Decompose(char32_t cp, bool compat, std::vector<char32_t>& buf) {
  if (cp < 0xA0) {  // below the first decomposable character (asserted in the tables)
    buf.push_back(cp);
    return;
  }
  if (cp >= kSBase && cp < kSBase + kSCount) {
    char32_t s = cp - kSBase;
    buf.push_back(kLBase + s / kNCount);
    buf.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) buf.push_back(kTBase + s % kTCount);
    return;
  }
  const NormDecomp* d = nullptr;
  if (compat) d = FindDecomp(std::begin(kNormCompat), std::end(kNormCompat), cp);
  if (d == nullptr) d = FindDecomp(std::begin(kNormCanon), std::end(kNormCanon), cp);
  if (d == nullptr) {
    buf.push_back(cp);
    return;
  }
  buf.insert(buf.end(), kNormPool + d->offset, kNormPool + d->offset + d->length);
}

char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const NormPair* begin = std::begin(kNormCompose);
  const NormPair* end = std::end(kNormCompose);
  const NormPair* it = std::lower_bound(begin, end, std::pair(a, b), [](const NormPair& p, std::pair<char32_t, char32_t> k) {
    return p.first < k.first || (p.first == k.first && p.second < k.second);
  });
  return it != end && it->first == a && it->second == b ? it->composite : 0;
}

// Strict UTF-8 decoding (no surrogates, no overlongs); false on error.
bool DecodeAll(std::string_view in, bool compat, std::vector<char32_t>& buf) {
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  for (size_t i = 0, len = 0; i < in.size(); i += len) {
    char32_t cp;
    if (!DecodeStrict(s, in.size(), i, &cp, &len)) return false;
    Decompose(cp, compat, buf);
  }
  return true;
}

}  // namespace

uint8_t CombiningClass(char32_t cp) {
  if (cp < kNormCcc[0].first) return 0;
  const NormCccRange* begin = std::begin(kNormCcc);
  const NormCccRange* end = std::end(kNormCcc);
  const NormCccRange* it = std::upper_bound(begin, end, cp, [](char32_t c, const NormCccRange& r) { return c < r.first; });
  if (it == begin) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

namespace {

// Quick-check values and combining classes of every code point, by form,
// in a two-stage table (256-code-point blocks; the blocks without any
// non-zero value share block 0).
class QuickCheckTable {
 public:
  static constexpr uint16_t kNo = 1u << 8, kMaybe = 1u << 9;

  explicit QuickCheckTable(Form form) : stage1_(0x110000 >> 8, 0), blocks_(256, 0) {
    const bool compat = form == Form::kNFKC || form == Form::kNFKD;
    const bool compose = form == Form::kNFC || form == Form::kNFKC;
    for (const NormCccRange& r : kNormCcc) {
      for (char32_t cp = r.first; cp <= r.last; ++cp) Set(cp, r.ccc);
    }
    // A character that the form maps to something else cannot occur in it.
    auto mark_no_if_changed = [&](char32_t cp) {
      std::string one, res;
      AppendUtf8(cp, one);
      if (!NormalizeForm(form, one, &res) || res != one) Or(cp, kNo);
    };
    for (const NormDecomp& d : kNormCanon) mark_no_if_changed(d.cp);
    if (compat) {
      for (const NormDecomp& d : kNormCompat) mark_no_if_changed(d.cp);
    }
    if (!compose) {
      for (char32_t cp = kSBase; cp < kSBase + kSCount; ++cp) Or(cp, kNo);
    } else {
      for (const NormPair& p : kNormCompose) Or(p.second, kMaybe);
      for (char32_t cp = kVBase; cp < kVBase + kVCount; ++cp) Or(cp, kMaybe);
      for (char32_t cp = kTBase + 1; cp < kTBase + kTCount; ++cp) Or(cp, kMaybe);
    }
  }
  uint16_t Get(char32_t cp) const { return blocks_[(size_t{stage1_[cp >> 8]} << 8) | (cp & 0xFF)]; }

 private:
  uint16_t& Slot(char32_t cp) {
    uint32_t& b = stage1_[cp >> 8];
    if (b == 0) {
      b = static_cast<uint32_t>(blocks_.size() >> 8);
      blocks_.resize(blocks_.size() + 256, 0);
    }
    return blocks_[(size_t{b} << 8) | (cp & 0xFF)];
  }
  void Set(char32_t cp, uint8_t ccc) { Slot(cp) = static_cast<uint16_t>((Slot(cp) & 0xFF00) | ccc); }
  void Or(char32_t cp, uint16_t bits) { Slot(cp) |= bits; }

  std::vector<uint32_t> stage1_;
  std::vector<uint16_t> blocks_;
};

const QuickCheckTable& QuickCheckFor(Form form) {
  // Built on first use of each form (a few thousand one-character normalizations).
  switch (form) {
    case Form::kNFD: {
      static const QuickCheckTable nfd(Form::kNFD);
      return nfd;
    }
    case Form::kNFKC: {
      static const QuickCheckTable nfkc(Form::kNFKC);
      return nfkc;
    }
    case Form::kNFKD: {
      static const QuickCheckTable nfkd(Form::kNFKD);
      return nfkd;
    }
    default: {
      static const QuickCheckTable nfc(Form::kNFC);
      return nfc;
    }
  }
}

}  // namespace

size_t FirstQuickCheckFailure(Form form, std::string_view in) {
  const QuickCheckTable& table = QuickCheckFor(form);
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  const size_t n = in.size();
  uint8_t last_ccc = 0;
  for (size_t i = 0; i < n;) {
    if (s[i] < 0x80) {
      last_ccc = 0;
      ++i;
      while (i + 8 <= n) {
        uint64_t w;
        std::memcpy(&w, s + i, 8);
        if (w & 0x8080808080808080ULL) break;
        i += 8;
      }
      continue;
    }
    char32_t cp;
    size_t len;
    if (!DecodeStrict(s, n, i, &cp, &len)) return i;
    const uint16_t v = table.Get(cp);
    if (v & (QuickCheckTable::kNo | QuickCheckTable::kMaybe)) return i;
    const uint8_t ccc = static_cast<uint8_t>(v & 0xFF);
    if (ccc != 0 && last_ccc > ccc) return i;
    last_ccc = ccc;
    i += len;
  }
  return std::string_view::npos;
}

bool IsNormalizedQuick(Form form, std::string_view in) {
  return FirstQuickCheckFailure(form, in) == std::string_view::npos;
}

bool NormalizeForm(Form form, std::string_view in, std::string* out) {
  const bool compat = form == Form::kNFKC || form == Form::kNFKD;
  const bool compose = form == Form::kNFC || form == Form::kNFKC;
  std::vector<char32_t> buf;
  buf.reserve(in.size() + 8);
  if (!DecodeAll(in, compat, buf)) return false;

  // Canonical ordering: stable sort of each run of non-starters by class.
  std::vector<uint8_t> cls(buf.size());
  for (size_t i = 0; i < buf.size(); ++i) cls[i] = CombiningClass(buf[i]);
  for (size_t i = 0; i < buf.size();) {
    if (cls[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < buf.size() && cls[j] != 0) ++j;
    // Insertion sort (stable; runs are short).
    for (size_t k = i + 1; k < j; ++k) {
      char32_t c = buf[k];
      uint8_t v = cls[k];
      size_t m = k;
      while (m > i && cls[m - 1] > v) {
        buf[m] = buf[m - 1];
        cls[m] = cls[m - 1];
        --m;
      }
      buf[m] = c;
      cls[m] = v;
    }
    i = j;
  }

  if (compose && buf.size() > 1) {
    // Canonical composition: `starter` is the index of the last starter (the
    // composee) in the output prefix buf[0, w); a char C composes with it if
    // no char between them has class 0 or >= class(C).
    size_t w = 0;
    size_t starter = SIZE_MAX;
    int last_cls = -1;  // class of the last char kept after the starter; -1: none
    for (size_t i = 0; i < buf.size(); ++i) {
      char32_t c = buf[i];
      int v = cls[i];
      if (starter != SIZE_MAX && (last_cls < 0 || (last_cls < v))) {
        char32_t comp = Compose(buf[starter], c);
        if (comp != 0) {
          buf[starter] = comp;
          continue;
        }
      }
      if (v == 0) {
        starter = w;
        last_cls = -1;
      } else {
        last_cls = v;
      }
      buf[w] = c;
      cls[w] = static_cast<uint8_t>(v);
      ++w;
    }
    buf.resize(w);
  }
  for (char32_t c : buf) AppendUtf8(c, *out);
  return true;
}

}  // namespace toktier::core::unicode
