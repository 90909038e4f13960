// Private to core/: the per-thread caches of pieces' encodings that full
// tokenization reads before any BPE (tokenizer.cpp).
//   HotPieceCache / LongPieceCache (InlinePieceCache): pieces of up to 16
//     (32) bytes with up to 3 (6) tokens, the key held inline as words, so
//     a hit is one cache line and a few compares.
//   PieceCache: pieces of up to 1024 bytes and any token count, keys and
//     values in arenas (a miss of the hot cache that is not a whole token).
// Both belong to one thread and one tokenizer instance (CachesFor).
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/flat_maps.h"

namespace toktier::core {

// Pieces of up to 8 * kWords bytes with up to kTokens tokens, the key held
// inline as words (zero-padded; the length tells "a" from "a\0"). kWays
// entries of a set share one cache line when 2 * sizeof(Entry) == 64.
template <int kWords, int kTokens, int kBits, int kWays>
class InlinePieceCache {
 public:
  static constexpr size_t kMaxPiece = 8 * kWords;
  static constexpr size_t kMaxTokens = kTokens;

  struct Key {
    uint64_t k[kWords];
    uint32_t len;
    uint32_t set;  // first entry of the key's set
  };
  struct Entry {
    uint64_t k[kWords] = {};
    uint8_t len = 0;    // piece bytes (0: empty slot)
    uint8_t count = 0;  // tokens
    uint8_t lens[kTokens - 1] = {};  // bytes of each token but the last (which takes the rest)
    uint32_t ids[kTokens] = {};
  };
  static_assert(sizeof(Entry) * kWays == 64 || sizeof(Entry) == 64, "an entry or a set fills one cache line");

  // The key of piece [p, p+len), len <= kMaxPiece. `limit` is the end of
  // the readable buffer: whole-word loads are used when they stay inside it.
  static Key MakeKey(const char* p, size_t len, const char* limit) {
    Key key;
    key.len = static_cast<uint32_t>(len);
    uint64_t words[kWords];
    if (static_cast<size_t>(limit - p) >= kMaxPiece) [[likely]] {
      std::memcpy(words, p, kMaxPiece);
    } else {
      char buf[kMaxPiece] = {};
      std::memcpy(buf, p, len);
      std::memcpy(words, buf, kMaxPiece);
    }
    // Branch-free masking through a table (piece lengths vary too much to
    // predict a branch on them). The set is the top bits of the XOR of the
    // words' multiplicative hashes: every bit of a word reaches the top bits
    // of its product, and the length needs no mixing in (the masked words
    // tell nearly all lengths apart; Matches compares it).
    const auto& masks = Masks().m[len];
    uint64_t h = 0;
    for (int w = 0; w < kWords; ++w) {
      key.k[w] = words[w] & masks[w];
      h ^= key.k[w] * (0x9E3779B97F4A7C15ULL + 2 * static_cast<uint64_t>(w));
    }
    key.set = static_cast<uint32_t>(h >> (64 - kBits)) & ~static_cast<uint32_t>(kWays - 1);
    return key;
  }
  // Starts loading the key's line (callers look a batch of pieces up after
  // prefetching them all, so the cache misses overlap).
  void Prefetch(const Key& k) const { __builtin_prefetch(&slots_[k.set]); }
  // The differences of the length and the words OR-ed: one test per key.
  static bool Matches(const Entry& e, const Key& k) {
    uint64_t diff = e.len ^ k.len;
    for (int w = 0; w < kWords; ++w) diff |= e.k[w] ^ k.k[w];
    return diff == 0;
  }
  // Both ways of a 2-way set are compared and the hit chosen without a
  // branch: which way holds a piece is unpredictable, a hit or miss is not.
  const Entry* Find(const Key& k) const {
    const Entry* set = &slots_[k.set];
    if constexpr (kWays == 2) {
      const uintptr_t m0 = Matches(set[0], k), m1 = Matches(set[1], k);
      const uintptr_t way1 = reinterpret_cast<uintptr_t>(&set[1]) & (uintptr_t{0} - m1);
      const uintptr_t way0 = reinterpret_cast<uintptr_t>(&set[0]) & (uintptr_t{0} - m0);
      return reinterpret_cast<const Entry*>(way0 | (way1 & (m0 - 1)));
    } else {
      for (int w = 0; w < kWays; ++w) {
        if (Matches(set[w], k)) return &set[w];
      }
      return nullptr;
    }
  }
  // Puts the key in way 0 and shifts the others down (the oldest goes: a
  // set is kept in most-recently-stored order).
  void Store(const Key& k, const uint32_t* ids, const uint32_t* lens, size_t count) {
    if (count == 0 || count > kMaxTokens) return;
    Entry* set = &slots_[k.set];
    for (int w = kWays - 1; w > 0; --w) set[w] = set[w - 1];
    Entry& e = set[0];
    for (int w = 0; w < kWords; ++w) e.k[w] = k.k[w];
    e.len = static_cast<uint8_t>(k.len);
    e.count = static_cast<uint8_t>(count);
    for (size_t i = 0; i < count; ++i) e.ids[i] = ids[i];
    for (size_t i = 0; i + 1 < static_cast<size_t>(kTokens); ++i) e.lens[i] = i + 1 < count ? static_cast<uint8_t>(lens[i]) : 0;
  }
  void Clear() { std::fill(slots_.begin(), slots_.end(), Entry{}); }
  InlinePieceCache() : slots_(size_t{1} << kBits) {}

 private:
  // m[len][w]: the bytes of word w that a piece of len bytes covers.
  struct MaskTable {
    uint64_t m[kMaxPiece + 1][kWords];
  };
  static const MaskTable& Masks() {
    static constexpr MaskTable table = [] {
      MaskTable t{};
      for (size_t len = 0; len <= kMaxPiece; ++len) {
        for (size_t w = 0; w < static_cast<size_t>(kWords); ++w) {
          const size_t lo = 8 * w;
          t.m[len][w] = len >= lo + 8 ? ~uint64_t{0} : len <= lo ? 0 : (uint64_t{1} << (8 * (len - lo))) - 1;
        }
      }
      return t;
    }();
    return table;
  }
  struct alignas(64) Aligned {
    Entry e;
  };
  // Line-aligned storage (the vector's buffer is 64-byte aligned: C++17
  // aligned new), viewed as entries.
  struct Slots {
    explicit Slots(size_t n) : lines((n * sizeof(Entry) + 63) / 64) {}
    Entry& operator[](size_t i) { return reinterpret_cast<Entry*>(lines.data())[i]; }
    const Entry& operator[](size_t i) const { return reinterpret_cast<const Entry*>(lines.data())[i]; }
    Entry* begin() { return reinterpret_cast<Entry*>(lines.data()); }
    Entry* end() { return begin() + lines.size() * 64 / sizeof(Entry); }
    struct alignas(64) Line {
      unsigned char b[64];
    };
    std::vector<Line> lines;
  };
  Slots slots_;
};

// Short pieces: 2-way, 2^16 entries of 32 bytes (2 MiB, the size of an L2),
// both ways of a set in one line. Long ones (17-32 bytes, up to 6 tokens):
// direct-mapped, 2^14 lines (1 MiB).
using HotPieceCache = InlinePieceCache<2, 3, 16, 2>;
using LongPieceCache = InlinePieceCache<4, 6, 14, 1>;

class PieceCache {
 public:
  // Long pieces repeat too (rules of dashes, runs of spaces), and BPE is
  // quadratic in the piece length up to 96 units: they are cached as well.
  static constexpr size_t kMaxPiece = 1024;
  static constexpr size_t kSlots = 1u << 18;

  // Returns true and appends ids/lens when the piece is cached.
  bool Lookup(std::string_view piece, uint64_t h, std::vector<uint32_t>& ids, std::vector<uint32_t>* lens) const {
    const Slot& s = slots_[h & (kSlots - 1)];
    if (s.hash != h || s.key_len != piece.size() || s.count == 0) return false;
    if (std::memcmp(keys_.data() + s.key_off, piece.data(), piece.size()) != 0) return false;
    ids.insert(ids.end(), vals_.begin() + s.val_off, vals_.begin() + s.val_off + s.count);
    if (lens) lens->insert(lens->end(), lens_.begin() + s.val_off, lens_.begin() + s.val_off + s.count);
    return true;
  }
  // Bounds of the arenas (about 24 MiB per thread at most, plus 6 MiB of
  // slots): past them the cache starts over and gives the memory back, so a
  // long-lived worker does not keep a peak's worth of pieces.
  static constexpr size_t kMaxKeyBytes = size_t{8} << 20;
  static constexpr size_t kMaxValues = size_t{2} << 20;

  void Store(std::string_view piece, uint64_t h, const uint32_t* ids, const uint32_t* lens, size_t count) {
    if (keys_.size() > kMaxKeyBytes || vals_.size() > kMaxValues) Release();
    Slot& s = slots_[h & (kSlots - 1)];
    s.hash = h;
    s.key_off = static_cast<uint32_t>(keys_.size());
    s.key_len = static_cast<uint32_t>(piece.size());
    s.val_off = static_cast<uint32_t>(vals_.size());
    s.count = static_cast<uint32_t>(count);
    keys_.append(piece);
    vals_.insert(vals_.end(), ids, ids + count);
    lens_.insert(lens_.end(), lens, lens + count);
  }
  void Clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    vals_.clear();
    lens_.clear();
  }
  void Release() {
    Clear();
    std::string().swap(keys_);
    std::vector<uint32_t>().swap(vals_);
    std::vector<uint32_t>().swap(lens_);
  }
  PieceCache() : slots_(kSlots) {}

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0, val_off = 0, count = 0;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> vals_, lens_;
};

struct PieceCaches {
  HotPieceCache hot;
  LongPieceCache long_hot;
  PieceCache wide;
};

// This thread's caches for tokenizer `instance` (ids are never reused, so a
// destroyed tokenizer's entries can never answer for another one). Freed when
// the thread exits: servers that start and stop (tests, embedders) would
// otherwise lose up to ~33 MiB per worker thread each time.
inline PieceCaches& CachesFor(uint64_t instance) {
  thread_local uint64_t owner = 0;
  thread_local std::unique_ptr<PieceCaches> caches;
  if (!caches) caches = std::make_unique<PieceCaches>();
  if (owner != instance) {
    caches->hot.Clear();
    caches->long_hot.Clear();
    caches->wide.Clear();
    owner = instance;
  }
  return *caches;
}

}  // namespace toktier::core
