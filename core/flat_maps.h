// Open-addressing hash maps for the two lookups on BPE's hot path: token
// bytes -> id, and (left id, right id) -> merge. Built once at load time,
// read-only afterwards (so safe to share between threads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <xxhash.h>

namespace toktier::core {

inline uint64_t HashBytes(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }

class StringIdMap {
 public:
  static constexpr uint32_t kMissing = 0xFFFFFFFFu;

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Inserts or overwrites.
  void Insert(std::string_view key, uint32_t id) {
    if ((size_ + 1) * 2 > slots_.size()) Grow();
    uint64_t h = HashBytes(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.id == kMissing) {
        s.hash = h;
        s.offset = static_cast<uint32_t>(arena_.size());
        s.len = static_cast<uint32_t>(key.size());
        s.id = id;
        arena_.append(key);
        ++size_;
        return;
      }
      if (s.hash == h && KeyOf(s) == key) {
        s.id = id;
        return;
      }
    }
  }
  [[nodiscard]] uint32_t Find(std::string_view key) const { return FindHashed(key, HashBytes(key)); }
  [[nodiscard]] uint32_t FindHashed(std::string_view key, uint64_t h) const {
    if (slots_.empty()) return kMissing;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id == kMissing) return kMissing;
      if (s.hash == h && KeyOf(s) == key) return s.id;
    }
  }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t MemoryBytes() const { return slots_.size() * sizeof(Slot) + arena_.capacity(); }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t len = 0;
    uint32_t id = kMissing;
  };
  std::string_view KeyOf(const Slot& s) const { return std::string_view(arena_).substr(s.offset, s.len); }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    size_t cap = old.empty() ? 16 : old.size() * 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.id == kMissing) continue;
      for (size_t i = s.hash & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].id == kMissing) {
          slots_[i] = s;
          break;
        }
      }
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  std::string arena_;
};

// (left, right) -> (rank, merged id).
class MergeMap {
 public:
  struct Merge {
    uint32_t rank;
    uint32_t id;
  };
  static constexpr uint32_t kNoRank = 0xFFFFFFFFu;

  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  // Keeps the first (lowest-rank) entry when a pair is inserted twice, as HF does.
  void Insert(uint32_t left, uint32_t right, Merge m) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.empty() ? 16 : slots_.size() * 2);
    uint64_t key = Key(left, right);
    for (size_t i = Mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.merge.rank == kNoRank) {
        s.key = key;
        s.merge = m;
        ++size_;
        return;
      }
      if (s.key == key) {
        if (m.rank < s.merge.rank) s.merge = m;
        return;
      }
    }
  }
  [[nodiscard]] Merge Find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return Merge{kNoRank, 0};
    uint64_t key = Key(left, right);
    for (size_t i = Mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.merge.rank == kNoRank) return s.merge;
      if (s.key == key) return s.merge;
    }
  }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] size_t MemoryBytes() const { return slots_.size() * sizeof(Slot); }

 private:
  struct Slot {
    uint64_t key = 0;
    Merge merge{kNoRank, 0};
  };
  static uint64_t Key(uint32_t l, uint32_t r) { return (static_cast<uint64_t>(l) << 32) | r; }
  static uint64_t Mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return k;
  }
  void Rehash(size_t cap) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const Slot& s : old) {
      if (s.merge.rank == kNoRank) continue;
      for (size_t i = Mix(s.key) & mask_;; i = (i + 1) & mask_) {
        if (slots_[i].merge.rank == kNoRank) {
          slots_[i] = s;
          break;
        }
      }
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace toktier::core
