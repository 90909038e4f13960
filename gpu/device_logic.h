// The device pipeline's logic (docs/gpu.md), as __host__ __device__
// functions: the CUDA kernels (gpu/cuda/*.cu) call them once per thread, and
// the host driver (gpu/host_pipeline.cpp) runs the same grid serially. No
// CUDA API and no standard library here, so the file compiles under g++ and
// nvcc alike.
//
// Ported from core/family_scanners.cpp (matchers, hard-boundary rules) and
// core/bpe.cpp (MergeSmall) line by line; tests/gpu compares the results with
// the CPU path on exhaustive alphabets, corpora and whole tokenizations.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define TT_HD __host__ __device__
#define TT_HDI __host__ __device__ __forceinline__
#else
#define TT_HD
#define TT_HDI inline
#endif

namespace toktier::gpu::logic {

constexpr uint32_t kNpos = 0xFFFFFFFFu;
constexpr uint32_t kMissing = 0xFFFFFFFFu;
constexpr uint32_t kNoRank = 0xFFFFFFFFu;
// A token id that stands for "this piece is encoded on the host" (a piece
// longer than kMaxDevicePiece bytes); never a real id (ids are < 2^31).
constexpr uint32_t kLongPiece = 0xFFFFFFFEu;
// Pieces up to this many bytes are merged on the device (one thread each,
// arrays in local memory); longer ones are a counted host fallback.
constexpr uint32_t kMaxDevicePiece = 128;

// Families (same values as core::DeviceFamily).
enum Family : uint8_t { kCl100k = 1, kQwen2 = 2, kO200k = 3, kDeepSeekV3 = 4 };

// Byte kinds (the segment structure, marked from the host's added-token split).
enum Kind : uint8_t { kText = 0, kTextStart = 1, kAddedInner = 2, kAddedStart = 3 };

// Scanner classes (same values as core::DeviceClassBits; checked by a
// static_assert in gpu_encoder.cpp).
enum Cls : uint32_t {
  kL = 1u << 0, kN = 1u << 1, kWs = 1u << 2, kCrLf = 1u << 3, kSpace = 1u << 4, kO = 1u << 5,
  kUpSet = 1u << 6, kLowSet = 1u << 7, kLM = 1u << 8, kPS = 1u << 9, kCjk = 1u << 10,
  kAsciiPunct = 1u << 11, kAsciiAlpha = 1u << 12, kCrLfSlash = 1u << 13, kApos = 1u << 14,
  kDsOther = 1u << 15,
};

// ---- Tables (device or host pointers) ---------------------------------------

struct ClassView {
  const uint16_t* block_of;  // 0x1100 entries
  const uint16_t* blocks;
};

struct MergeSlot {
  uint64_t key;
  uint32_t rank;  // kNoRank: empty
  uint32_t id;
};
// (left, right) -> (rank, merged id): open addressing, linear probing, the
// hash and semantics of core's MergeMap.
struct MergeView {
  const MergeSlot* slots;
  uint64_t mask;
};

struct VocabSlot {
  uint64_t hash;
  uint32_t offset;  // into the arena
  uint32_t len;
  uint32_t id;  // kMissing: empty
  uint32_t pad;
};
// Token bytes -> id, for the tokens a whole piece may be looked up as
// (DeviceTables::whole_piece).
struct VocabView {
  const VocabSlot* slots;
  uint64_t mask;
  const uint8_t* arena;
  uint32_t max_len;  // longest key
};

struct Tables {
  ClassView cls;
  MergeView merges;
  VocabView vocab;
  const uint32_t* byte_ids;  // 256
  uint8_t family;
};

TT_HDI uint64_t MixKey(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

TT_HDI uint64_t HashBytes(const uint8_t* p, uint32_t n) {  // FNV-1a, then mixed
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint32_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return MixKey(h ^ n);
}

TT_HDI void FindMerge(const MergeView& m, uint32_t l, uint32_t r, uint32_t* rank, uint32_t* id) {
  const uint64_t key = (static_cast<uint64_t>(l) << 32) | r;
  for (uint64_t i = MixKey(key) & m.mask;; i = (i + 1) & m.mask) {
    const MergeSlot& s = m.slots[i];
    if (s.rank == kNoRank || s.key == key) {
      *rank = s.rank;
      *id = s.id;
      return;
    }
  }
}

TT_HDI uint32_t FindWhole(const VocabView& v, const uint8_t* p, uint32_t n) {
  if (n > v.max_len || v.mask == 0) return kMissing;
  const uint64_t h = HashBytes(p, n);
  for (uint64_t i = h & v.mask;; i = (i + 1) & v.mask) {
    const VocabSlot& s = v.slots[i];
    if (s.id == kMissing) return kMissing;
    if (s.hash == h && s.len == n) {
      bool eq = true;
      for (uint32_t k = 0; k < n && eq; ++k) eq = v.arena[s.offset + k] == p[k];
      if (eq) return s.id;
    }
  }
}

// ---- UTF-8 and classes ----------------------------------------------------

TT_HDI uint32_t DecodeAt(const uint8_t* s, uint32_t* len) {
  const uint32_t c = s[0];
  if (c < 0x80) { *len = 1; return c; }
  if (c < 0xE0) { *len = 2; return ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu); }
  if (c < 0xF0) { *len = 3; return ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu); }
  *len = 4;
  return ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
}

TT_HDI uint32_t ClassOfCp(const ClassView& c, uint32_t cp) {
  return c.blocks[static_cast<uint32_t>(c.block_of[cp >> 8]) * 256u + (cp & 255u)];
}

// One span of text (positions relative to s, length n) with class lookups:
// the scanners' Text class.
struct DText {
  const uint8_t* s;
  ClassView cls;

  TT_HDI uint8_t Byte(uint32_t i) const { return s[i]; }
  TT_HDI uint32_t At(uint32_t i, uint32_t* len) const { return ClassOfCp(cls, DecodeAt(s + i, len)); }
  TT_HDI uint32_t At(uint32_t i) const {
    uint32_t len;
    return At(i, &len);
  }
  // End of the run of characters having any of `mask`, from i, before n.
  TT_HDI uint32_t Run(uint32_t i, uint32_t n, uint32_t mask) const {
    while (i < n) {
      uint32_t len;
      if (!(At(i, &len) & mask)) return i;
      i += len;
    }
    return i;
  }
  TT_HDI int ContractionLetter(uint32_t i, uint32_t n, bool fold, uint32_t* len) const {
    const uint8_t c = s[i];
    *len = 1;
    if (c < 0x80) {
      if (fold && c >= 'A' && c <= 'Z') return c | 0x20;
      return c;
    }
    if (fold && c == 0xC5 && i + 1 < n && s[i + 1] == 0xBF) {
      *len = 2;
      return 's';
    }
    return 0;
  }
  // Byte length of 's|'t|'re|'ve|'m|'ll|'d at i (s[i] == '\''), 0 if none.
  TT_HDI uint32_t Contraction(uint32_t i, uint32_t n, bool fold) const {
    if (i + 1 >= n) return 0;
    uint32_t l1;
    const int c1 = ContractionLetter(i + 1, n, fold, &l1);
    switch (c1) {
      case 's': case 't': case 'm': case 'd':
        return 1 + l1;
      case 'r': case 'v': case 'l': {
        const uint32_t k = i + 1 + l1;
        if (k >= n) return 0;
        uint32_t l2;
        const int c2 = ContractionLetter(k, n, fold, &l2);
        if (c2 == (c1 == 'l' ? 'l' : 'e')) return 1 + l1 + l2;
        return 0;
      }
      default:
        return 0;
    }
  }
  // \s*[\r\n]+ (with crlf_alt), then \s+(?!\S), then \s+, at whitespace i.
  TT_HDI uint32_t WhitespaceEnd(uint32_t i, uint32_t n, bool crlf_alt) const {
    uint32_t j = i, last = i, crlf_end = 0;
    while (j < n) {
      uint32_t len;
      const uint32_t c = At(j, &len);
      if (!(c & kWs)) break;
      if (c & kCrLf) crlf_end = j + len;
      last = j;
      j += len;
    }
    if (crlf_alt && crlf_end) return crlf_end;
    if (j == n) return n;
    if (last > i) return last;
    return j;
  }
};

// ---- Matchers (one match at i; family_scanners.cpp) -------------------------

template <int kDigitsMax>
TT_HD uint32_t MatchCl100k(const DText& t, uint32_t i, uint32_t n) {
  if (t.Byte(i) == '\'') {
    if (uint32_t k = t.Contraction(i, n, true)) return i + k;
  }
  uint32_t len;
  const uint32_t c = t.At(i, &len);
  if (c & kL) return t.Run(i + len, n, kL);
  if (!(c & (kCrLf | kN)) && i + len < n && (t.At(i + len) & kL)) return t.Run(i + len, n, kL);
  if (c & kN) {
    uint32_t e = i + len;
    for (int k = 1; k < kDigitsMax && e < n; ++k) {
      uint32_t l2;
      if (!(t.At(e, &l2) & kN)) break;
      e += l2;
    }
    return e;
  }
  if (c & kO) return t.Run(t.Run(i + len, n, kO), n, kCrLf);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kO)) return t.Run(t.Run(i + 1, n, kO), n, kCrLf);
  return t.WhitespaceEnd(i, n, true);
}

TT_HDI uint32_t O200kContraction(const DText& t, uint32_t e, uint32_t n) {
  return (e < n && t.Byte(e) == '\'') ? t.Contraction(e, n, true) : 0;
}

TT_HD inline uint32_t O200kAlt1(const DText& t, uint32_t s, uint32_t n) {
  uint32_t j = s, last_low_end = kNpos;
  while (j < n) {
    uint32_t len;
    const uint32_t c = t.At(j, &len);
    if (!(c & kUpSet)) break;
    if (c & kLowSet) last_low_end = j + len;
    j += len;
  }
  if (j < n && (t.At(j) & kLowSet)) {
    const uint32_t e = t.Run(j, n, kLowSet);
    return e + O200kContraction(t, e, n);
  }
  if (last_low_end != kNpos) return last_low_end + O200kContraction(t, last_low_end, n);
  return kNpos;
}

TT_HD inline uint32_t O200kAlt2(const DText& t, uint32_t s, uint32_t n) {
  if (s >= n || !(t.At(s) & kUpSet)) return kNpos;
  const uint32_t e = t.Run(t.Run(s, n, kUpSet), n, kLowSet);
  return e + O200kContraction(t, e, n);
}

TT_HD inline uint32_t MatchO200k(const DText& t, uint32_t i, uint32_t n) {
  uint32_t len;
  const uint32_t c = t.At(i, &len);
  const bool self = c & (kUpSet | kLowSet);
  const bool prefix = !(c & (kCrLf | kL | kN)) && i + len < n && (t.At(i + len) & (kUpSet | kLowSet));
  if (self || prefix) {
    uint32_t r;
    if (prefix && (r = O200kAlt1(t, i + len, n)) != kNpos) return r;
    if (self && (r = O200kAlt1(t, i, n)) != kNpos) return r;
    if (prefix && (r = O200kAlt2(t, i + len, n)) != kNpos) return r;
    if (self && (r = O200kAlt2(t, i, n)) != kNpos) return r;
  }
  if (c & kN) {
    uint32_t e = i + len;
    for (int k = 1; k < 3 && e < n; ++k) {
      uint32_t l2;
      if (!(t.At(e, &l2) & kN)) break;
      e += l2;
    }
    return e;
  }
  if (c & kO) return t.Run(t.Run(i + len, n, kO), n, kCrLfSlash);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kO)) return t.Run(t.Run(i + 1, n, kO), n, kCrLfSlash);
  return t.WhitespaceEnd(i, n, true);
}

// DeepSeek-V3's third pattern; kNpos where nothing matches (a gap character).
TT_HD inline uint32_t MatchDeepSeekMain(const DText& t, uint32_t i, uint32_t n) {
  uint32_t len;
  const uint32_t c = t.At(i, &len);
  if ((c & kAsciiPunct) && i + 1 < n && t.Byte(i + 1) < 0x80 && (t.At(i + 1) & kAsciiAlpha)) {
    return t.Run(i + 1, n, kAsciiAlpha);
  }
  if (!(c & (kCrLf | kL | kPS)) && i + len < n && (t.At(i + len) & kLM)) return t.Run(i + len, n, kLM);
  if (c & kLM) return t.Run(i + len, n, kLM);
  if (c & kPS) return t.Run(t.Run(i + len, n, kPS), n, kCrLf);
  if ((c & kSpace) && i + 1 < n && (t.At(i + 1) & kPS)) return t.Run(t.Run(i + 1, n, kPS), n, kCrLf);
  if (c & kWs) return t.WhitespaceEnd(i, n, true);
  return kNpos;
}

// Splits t[0, n) into pieces, calling emit(begin) for each piece start, in
// order (pieces are contiguous and cover the span).
template <typename Emit>
TT_HD void SplitDeepSeekMain(const DText& t, uint32_t b, uint32_t e, Emit& emit) {
  uint32_t i = b, gap = b;
  while (i < e) {
    const uint32_t m = MatchDeepSeekMain(t, i, e);
    if (m == kNpos) {
      uint32_t len;
      t.At(i, &len);
      i += len;
      continue;
    }
    if (gap < i) emit(gap);
    emit(i);
    i = gap = m;
  }
  if (gap < e) emit(gap);
}

template <typename Emit>
TT_HD void SplitDeepSeek(const DText& t, uint32_t n, Emit& emit) {
  uint32_t i = 0;
  while (i < n) {
    uint32_t len;
    const uint32_t c = t.At(i, &len);
    if (c & kN) {
      uint32_t e = i + len;
      for (int k = 1; k < 3 && e < n; ++k) {
        uint32_t l2;
        if (!(t.At(e, &l2) & kN)) break;
        e += l2;
      }
      emit(i);
      i = e;
      continue;
    }
    const uint32_t e = t.Run(i + len, n, (c & kCjk) ? kCjk : kDsOther);
    SplitDeepSeekMain(t, i, e, emit);
    i = e;
  }
}

template <typename Emit>
TT_HD void SplitSpan(uint8_t family, const DText& t, uint32_t n, Emit& emit) {
  uint32_t i = 0;
  switch (family) {
    case kCl100k:
      while (i < n) { emit(i); i = MatchCl100k<3>(t, i, n); }
      break;
    case kQwen2:
      while (i < n) { emit(i); i = MatchCl100k<1>(t, i, n); }
      break;
    case kO200k:
      while (i < n) { emit(i); i = MatchO200k(t, i, n); }
      break;
    case kDeepSeekV3:
      SplitDeepSeek(t, n, emit);
      break;
    default:
      break;
  }
}

// ---- Hard boundaries (family_scanners.cpp, namespace hb) --------------------
// a = class of the character before p, b = the one at p, c = the one before a
// (has_c false when a is the first character of the segment).

TT_HDI bool IsM(uint32_t c) { return (c & kLM) && !(c & kL); }
TT_HDI bool IsPureLl(uint32_t c) { return (c & kLowSet) && !(c & kUpSet); }
TT_HDI bool IsPureLuLt(uint32_t c) { return (c & kUpSet) && !(c & kLowSet); }
TT_HDI bool IsWsNotCrLf(uint32_t c) { return (c & kWs) && !(c & kCrLf); }
TT_HDI bool IsDsOther(uint32_t c) { return !(c & (kLM | kN | kPS | kWs)); }

template <bool kSingleDigits>
TT_HD bool HardCl100k(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
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
  if (!has_c || IsWsNotCrLf(c)) return false;
  if (b & kN) return true;
  return (b & kO) && !(a & kSpace);
}

TT_HD inline bool HardO200k(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  if (a & kL) {
    if (b & (kN | kWs)) return true;
    if ((b & kO) && !IsM(b) && !(b & kApos)) return true;
    return IsPureLl(a) && IsPureLuLt(b) && has_c && !(c & kApos);
  }
  if (a & kN) return !(b & kN);
  if (a & kCrLf) {
    if (!(b & kWs)) return !(b & kCrLfSlash);
    if (b & kCrLf) return false;
    return has_c && (c & kO) && !IsM(c);
  }
  if (a & kO) {
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

TT_HD inline bool HardDeepSeek(uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  if ((a & kN) != (b & kN)) return true;
  if (a & kN) return false;
  if ((a & kCjk) != (b & kCjk)) return true;
  if (a & kLM) return !(b & kLM);
  if (a & kPS) {
    if (b & (kPS | kCrLf)) return false;
    return !((a & kAsciiPunct) && (b & kAsciiAlpha));
  }
  if (a & kCrLf) return !(b & kWs);
  if (!(a & kWs)) return (b & (kPS | kWs)) != 0;
  if (!has_c || IsWsNotCrLf(c)) return false;
  if (IsDsOther(b)) return true;
  return (b & kPS) && !(a & kSpace);
}

TT_HDI bool HardBoundary(uint8_t family, uint32_t a, uint32_t b, bool has_c, uint32_t c) {
  switch (family) {
    case kCl100k: return HardCl100k<false>(a, b, has_c, c);
    case kQwen2: return HardCl100k<true>(a, b, has_c, c);
    case kO200k: return HardO200k(a, b, has_c, c);
    case kDeepSeekV3: return HardDeepSeek(a, b, has_c, c);
    default: return false;
  }
}

// ---- BPE of one piece (core/bpe.cpp MergeSmall) ----------------------------
// Byte symbols; repeatedly the lowest-rank adjacent pair merges, leftmost on
// ties. emit(offset, id) for each resulting token, in order. n <= kMaxDevicePiece.
template <typename Emit>
TT_HD void BpeSmall(const Tables& tb, const uint8_t* p, uint32_t n, Emit& emit) {
  uint32_t id[kMaxDevicePiece];
  uint32_t rank[kMaxDevicePiece];
  uint32_t merged[kMaxDevicePiece];
  int16_t next[kMaxDevicePiece];
  int16_t prev[kMaxDevicePiece];
  for (uint32_t k = 0; k < n; ++k) {
    id[k] = tb.byte_ids[p[k]];
    prev[k] = static_cast<int16_t>(k) - 1;
    next[k] = k + 1 < n ? static_cast<int16_t>(k + 1) : static_cast<int16_t>(-1);
  }
  for (uint32_t k = 0; k + 1 < n; ++k) FindMerge(tb.merges, id[k], id[k + 1], &rank[k], &merged[k]);
  rank[n - 1] = kNoRank;
  for (;;) {
    uint32_t best = kNoRank;
    int at = -1;
    for (int k = 0; k >= 0; k = next[k]) {
      if (rank[k] < best) {
        best = rank[k];
        at = k;
      }
    }
    if (at < 0) break;
    const int right = next[at];
    id[at] = merged[at];
    next[at] = next[right];
    if (next[right] >= 0) prev[next[right]] = static_cast<int16_t>(at);
    if (next[at] >= 0) {
      FindMerge(tb.merges, id[at], id[next[at]], &rank[at], &merged[at]);
    } else {
      rank[at] = kNoRank;
    }
    if (prev[at] >= 0) {
      const int q = prev[at];
      FindMerge(tb.merges, id[q], id[at], &rank[q], &merged[q]);
    }
  }
  for (int k = 0; k >= 0; k = next[k]) emit(static_cast<uint32_t>(k), id[k]);
}

// ---- The grid bodies ---------------------------------------------------------
// One request: text[0, n) with its segments (from the host's added-token
// split). Per-byte arrays: kind, span flags, piece starts, token starts and
// tid (the id of the token starting at a byte). Compactions (flag -> list of
// positions) run between the bodies: CUB on the device, a loop on the host.

struct Segment {  // as core::DeviceSegment, packed for the device
  uint32_t begin;
  uint32_t end;
  uint32_t is_added;
  uint32_t id;
};

struct Request {
  const uint8_t* text;
  uint32_t n;
  uint8_t* kind;          // per byte, zeroed before MarkSegment
  uint8_t* span_flag;     // per byte
  uint8_t* piece_flag;    // per byte, zeroed before SplitSpanBody
  uint8_t* token_flag;    // per byte, zeroed before BpePieceBody
  uint32_t* tid;          // per byte
};

// Segment s: its start kind; an added token's bytes and id.
TT_HDI void MarkSegmentBody(const Request& r, const Segment& s) {
  if (s.begin >= s.end) return;
  if (s.is_added) {
    r.kind[s.begin] = kAddedStart;
    r.tid[s.begin] = s.id;
    for (uint32_t i = s.begin + 1; i < s.end; ++i) r.kind[i] = kAddedInner;
  } else {
    r.kind[s.begin] = kTextStart;
  }
}

// Whether byte i starts a span: a segment start, or a character start where
// the family's hard-boundary rule says no piece crosses.
TT_HDI uint8_t SpanFlagBody(const Request& r, const Tables& tb, uint32_t i) {
  if (i >= r.n) return 0;
  const uint8_t k = r.kind[i];
  if (k == kTextStart || k == kAddedStart) return 1;
  if (k == kAddedInner) return 0;
  if ((r.text[i] & 0xC0) == 0x80) return 0;
  // i lies inside a text segment after its first character.
  uint32_t pa = i - 1;
  while (pa > 0 && (r.text[pa] & 0xC0) == 0x80) --pa;
  uint32_t len;
  const uint32_t a = ClassOfCp(tb.cls, DecodeAt(r.text + pa, &len));
  const uint32_t b = ClassOfCp(tb.cls, DecodeAt(r.text + i, &len));
  const bool has_c = r.kind[pa] != kTextStart;
  uint32_t c = 0;
  if (has_c) {
    uint32_t pc = pa - 1;
    while (pc > 0 && (r.text[pc] & 0xC0) == 0x80) --pc;
    c = ClassOfCp(tb.cls, DecodeAt(r.text + pc, &len));
  }
  return HardBoundary(tb.family, a, b, has_c, c) ? 1 : 0;
}

struct PieceMarker {
  uint8_t* flag;
  TT_HDI void operator()(uint32_t b) { flag[b] = 1; }
};

// Span k of `count` (starts[k] sorted): marks its pieces' starts.
TT_HDI void SplitSpanBody(const Request& r, const Tables& tb, const uint32_t* starts, uint32_t count, uint32_t k) {
  const uint32_t s = starts[k];
  const uint32_t e = k + 1 < count ? starts[k + 1] : r.n;
  if (r.kind[s] != kTextStart && r.kind[s] != kText) {  // an added token: one piece
    r.piece_flag[s] = 1;
    return;
  }
  PieceMarker m{r.piece_flag + s};
  const DText t{r.text + s, tb.cls};
  SplitSpan(tb.family, t, e - s, m);
}

struct TokenMarker {
  uint8_t* flag;
  uint32_t* tid;
  TT_HDI void operator()(uint32_t b, uint32_t id) {
    flag[b] = 1;
    tid[b] = id;
  }
};

// Piece k of `count`: marks its tokens' starts and ids. Returns 1 when the
// piece was left to the host (kLongPiece), else 0.
TT_HDI uint32_t BpePieceBody(const Request& r, const Tables& tb, const uint32_t* starts, uint32_t count,
                             uint32_t k) {
  const uint32_t s = starts[k];
  const uint32_t e = k + 1 < count ? starts[k + 1] : r.n;
  if (r.kind[s] == kAddedStart) {  // tid[s] holds the added token's id
    r.token_flag[s] = 1;
    return 0;
  }
  const uint32_t n = e - s;
  const uint32_t whole = FindWhole(tb.vocab, r.text + s, n);
  if (whole != kMissing) {
    r.token_flag[s] = 1;
    r.tid[s] = whole;
    return 0;
  }
  if (n > kMaxDevicePiece) {
    r.token_flag[s] = 1;
    r.tid[s] = kLongPiece;
    return 1;
  }
  TokenMarker m{r.token_flag + s, r.tid + s};
  BpeSmall(tb, r.text + s, n, m);
  return 0;
}

// Token k of `count`: its id and end offset (the next token's start).
TT_HDI void EmitTokenBody(const Request& r, const uint32_t* starts, uint32_t count, uint32_t k, uint32_t* ids,
                          uint32_t* ends) {
  ids[k] = r.tid[starts[k]];
  ends[k] = k + 1 < count ? starts[k + 1] : r.n;
}

}  // namespace toktier::gpu::logic
