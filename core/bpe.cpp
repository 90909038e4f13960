#include "core/bpe.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <functional>

#include "core/unicode.h"

namespace toktier::core {
namespace {

// Up to this many initial symbols the quadratic scan over a rank array beats
// a heap (it touches one small array; merges found by 2 lookups each).
constexpr size_t kSmallPiece = 96;

size_t UnitLength(std::string_view s, size_t i, bool byte_units) {
  if (byte_units) return 1;
  unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

}  // namespace

Status BpeModel::Init(std::vector<std::string> tokens, std::vector<bool> present, BpeOptions options) {
  options_ = std::move(options);
  tokens_ = std::move(tokens);
  vocab_.Reserve(tokens_.size());
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (present[id]) vocab_.Insert(tokens_[id], static_cast<uint32_t>(id));
  }
  merges_.Reserve(tokens_.size() * 2);
  for (int b = 0; b < 256; ++b) {
    std::string one(1, static_cast<char>(b));
    byte_ids_[b] = vocab_.Find(one);
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    fallback_ids_[b] = vocab_.Find(hex);
  }
  is_fallback_.assign(tokens_.size(), false);
  for (uint32_t id : fallback_ids_) {
    if (id != StringIdMap::kMissing) is_fallback_[id] = true;
  }
  return Status::Ok();
}

Status BpeModel::AddMerge(std::string_view left, std::string_view right, uint32_t rank) {
  uint32_t l = vocab_.Find(left);
  uint32_t r = vocab_.Find(right);
  if (l == StringIdMap::kMissing || r == StringIdMap::kMissing) {
    return Status::Error("merge references a token missing from the vocab: '" + std::string(left) +
                         "' '" + std::string(right) + "'");
  }
  std::string merged(left);
  const std::string& prefix = options_.continuing_subword_prefix;
  if (!prefix.empty() && right.substr(0, prefix.size()) == prefix) {
    merged.append(right.substr(prefix.size()));
  } else {
    merged.append(right);
  }
  uint32_t m = vocab_.Find(merged);
  if (m == StringIdMap::kMissing) {
    return Status::Error("merge result missing from the vocab: '" + merged + "'");
  }
  if (is_fallback_[l] || is_fallback_[r]) merges_touch_fallback_ = true;
  merges_.Insert(l, r, MergeMap::Merge{rank, m});
  max_rank_ = std::max(max_rank_, rank);
  if (!options_.byte_units) {
    // Remember each adjacent unit pair inside the merged token; a position
    // between two units that never occur adjacent inside a token cannot be
    // spanned by any merge.
    std::string_view t = tokens_[m];
    size_t i = 0;
    size_t prev_len = 0;
    while (i < t.size()) {
      size_t len = UnitLength(t, i, false);
      if (i > 0) inner_pairs_.Insert(t.substr(i - prev_len, prev_len + len), 1);
      prev_len = len;
      i += len;
    }
  }
  return Status::Ok();
}

void BpeModel::DeriveMergesFromRanks() {
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    if (t.size() < 2 || vocab_.Find(t) != id) continue;
    for (size_t k = 1; k < t.size(); ++k) {
      uint32_t l = vocab_.Find(std::string_view(t).substr(0, k));
      if (l == StringIdMap::kMissing) continue;
      uint32_t r = vocab_.Find(std::string_view(t).substr(k));
      if (r == StringIdMap::kMissing) continue;
      merges_.Insert(l, r, MergeMap::Merge{static_cast<uint32_t>(id), static_cast<uint32_t>(id)});
      max_rank_ = std::max(max_rank_, static_cast<uint32_t>(id));
    }
  }
}

bool BpeModel::PairInsideSomeToken(std::string_view a, std::string_view b) const {
  std::string key;
  key.reserve(a.size() + b.size());
  key.append(a).append(b);
  return inner_pairs_.Find(key) != StringIdMap::kMissing;
}

void BpeModel::InitialSymbols(std::string_view piece, std::vector<Symbol>& syms) const {
  syms.clear();
  syms.reserve(piece.size());  // at most one symbol per byte (no regrowth copies)
  const bool bytes = options_.byte_units;
  const bool plain = options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
  std::string unit_buf;
  size_t i = 0;
  while (i < piece.size()) {
    size_t len = UnitLength(piece, i, bytes);
    uint32_t id;
    if (bytes && plain) {
      id = byte_ids_[static_cast<unsigned char>(piece[i])];
    } else if (plain) {
      id = vocab_.Find(piece.substr(i, len));
    } else {
      unit_buf.clear();
      if (i > 0) unit_buf.append(options_.continuing_subword_prefix);
      unit_buf.append(piece.substr(i, len));
      if (i + len == piece.size()) unit_buf.append(options_.end_of_word_suffix);
      id = vocab_.Find(unit_buf);
    }
    if (id != StringIdMap::kMissing) {
      syms.push_back(Symbol{id, 0, 0, static_cast<uint32_t>(len)});
    } else {
      bool fell_back = false;
      if (options_.byte_fallback) {
        bool all = true;
        for (size_t k = 0; k < len; ++k) all &= fallback_ids_[static_cast<unsigned char>(piece[i + k])] != StringIdMap::kMissing;
        if (all) {
          for (size_t k = 0; k < len; ++k) {
            syms.push_back(Symbol{fallback_ids_[static_cast<unsigned char>(piece[i + k])], 0, 0, 1});
          }
          fell_back = true;
        }
      }
      if (!fell_back && options_.unk_id) {
        if (options_.fuse_unk && !syms.empty() && syms.back().id == *options_.unk_id) {
          syms.back().len += static_cast<uint32_t>(len);
        } else {
          syms.push_back(Symbol{*options_.unk_id, 0, 0, static_cast<uint32_t>(len)});
        }
      }
      // No unk token: HF drops the character.
    }
    i += len;
  }
  for (size_t k = 0; k < syms.size(); ++k) {
    syms[k].prev = static_cast<int32_t>(k) - 1;
    syms[k].next = k + 1 < syms.size() ? static_cast<int32_t>(k + 1) : -1;
  }
}

void BpeModel::MergeSmall(std::vector<Symbol>& syms) const {
  // ranks[k]: rank of the pair (k, next(k)); kNoRank when none.
  size_t n = syms.size();
  uint32_t ranks[kSmallPiece];
  uint32_t merged_id[kSmallPiece];
  for (size_t k = 0; k + 1 < n; ++k) {
    MergeMap::Merge m = merges_.Find(syms[k].id, syms[k + 1].id);
    ranks[k] = m.rank;
    merged_id[k] = m.id;
  }
  ranks[n - 1] = MergeMap::kNoRank;
  for (;;) {
    uint32_t best = MergeMap::kNoRank;
    int32_t at = -1;
    for (int32_t k = 0; k >= 0; k = syms[k].next) {
      if (ranks[k] < best) {
        best = ranks[k];
        at = k;
      }
    }
    if (at < 0) break;
    int32_t right = syms[at].next;
    syms[at].id = merged_id[at];
    syms[at].len += syms[right].len;
    syms[right].len = 0;
    syms[at].next = syms[right].next;
    if (syms[right].next >= 0) syms[syms[right].next].prev = at;
    if (syms[at].next >= 0) {
      MergeMap::Merge m = merges_.Find(syms[at].id, syms[syms[at].next].id);
      ranks[at] = m.rank;
      merged_id[at] = m.id;
    } else {
      ranks[at] = MergeMap::kNoRank;
    }
    if (syms[at].prev >= 0) {
      int32_t p = syms[at].prev;
      MergeMap::Merge m = merges_.Find(syms[p].id, syms[at].id);
      ranks[p] = m.rank;
      merged_id[p] = m.id;
    }
  }
}

namespace {

// MergeLarge's working memory, kept per thread between calls (reused, so a
// typical long piece allocates nothing) but released after a piece that made
// it large (ReleaseIfLarge), so one huge prompt does not pin gigabytes.
struct MergeScratch {
  std::vector<int32_t> slot_of_rank;          // rank -> bucket slot, -1 = none
  std::vector<uint32_t> touched;              // ranks whose slot is set
  std::vector<std::vector<int32_t>> buckets;  // pool of position lists; [0, used) in use
  size_t used = 0;
  std::vector<uint32_t> rank_heap;            // ranks with a bucket, min-heap
  std::vector<uint64_t> urgent;               // (rank << 32 | pos), min-heap
  // A direct-mapped memo of merge lookups, valid for one call (gen): long
  // pieces repeat few pairs (one repeated character: a handful).
  struct Memo {
    uint64_t pair;
    uint32_t gen, rank, id;
  };
  static constexpr size_t kMemo = 1024;
  Memo memo[kMemo] = {};
  uint32_t gen = 0;
};

// Above this many elements a scratch vector is freed after use.
constexpr size_t kKeepElements = size_t{1} << 16;

template <typename V>
void ReleaseIfLarge(V& v) {
  if (v.capacity() > kKeepElements) V().swap(v);
}

uint64_t Key(uint32_t rank, int32_t pos) { return (uint64_t{rank} << 32) | static_cast<uint32_t>(pos); }

}  // namespace

void BpeModel::MergeLarge(std::vector<Symbol>& syms) const {
  // Candidates are applied in (rank, position) order, lowest first, exactly
  // as with one binary heap of every candidate (HF's order). A heap of a
  // multi-megabyte piece is hundreds of megabytes touched at random (about
  // 1 us per merge: one repeated character of 60 MB took 50 s), so the
  // candidates are kept in buckets by rank instead: the buckets are taken in
  // rank order, each sorted by position once and then read front to back.
  // A merge's new candidates almost always rank above the merge itself
  // (BPE builds tokens from earlier tokens) and go to their bucket; the rare
  // one that does not (tiktoken's derived merges allow it) goes to a small
  // heap that is always compared with the current bucket's head. Stale
  // entries (a side merged away meanwhile) are skipped by recomputing the
  // pair's rank: at one position a pair's byte span only grows, so an equal
  // rank means the same pair.
  thread_local MergeScratch q;
  if (++q.gen == 0) {  // wrapped: forget every entry
    for (auto& m : q.memo) m = MergeScratch::Memo{};
    q.gen = 1;
  }
  auto find = [&](uint32_t l, uint32_t r) {
    const uint64_t pair = (uint64_t{l} << 32) | r;
    MergeScratch::Memo& e = q.memo[(pair * 0x9E3779B97F4A7C15ULL) >> 54];
    if (e.gen != q.gen || e.pair != pair) {
      MergeMap::Merge m = merges_.Find(l, r);
      e = MergeScratch::Memo{pair, q.gen, m.rank, m.id};
    }
    return MergeMap::Merge{e.rank, e.id};
  };
  const size_t need = static_cast<size_t>(max_rank_) + 1;
  if (q.slot_of_rank.size() < need) q.slot_of_rank.resize(need, -1);
  int64_t cur = -1;  // rank of the bucket being read; -1 before the first
  size_t cur_slot = 0, head = 0;
  bool have_bucket = false;
  auto later = std::greater<>();
  auto push = [&](uint32_t rank, int32_t pos) {
    if (static_cast<int64_t>(rank) <= cur) {
      q.urgent.push_back(Key(rank, pos));
      std::push_heap(q.urgent.begin(), q.urgent.end(), later);
      return;
    }
    int32_t& slot = q.slot_of_rank[rank];
    if (slot < 0) {
      slot = static_cast<int32_t>(q.used++);
      if (q.used > q.buckets.size()) q.buckets.emplace_back();
      q.buckets[slot].clear();
      q.touched.push_back(rank);
      q.rank_heap.push_back(rank);
      std::push_heap(q.rank_heap.begin(), q.rank_heap.end(), later);
    }
    q.buckets[slot].push_back(pos);
  };
  for (size_t k = 0; k + 1 < syms.size(); ++k) {
    MergeMap::Merge m = find(syms[k].id, syms[k + 1].id);
    if (m.rank != MergeMap::kNoRank) push(m.rank, static_cast<int32_t>(k));
  }
  for (;;) {
    uint32_t rank;
    int32_t pos;
    const bool in_bucket = have_bucket && head < q.buckets[cur_slot].size();
    if (!q.urgent.empty() && (!in_bucket || q.urgent.front() < Key(static_cast<uint32_t>(cur), q.buckets[cur_slot][head]))) {
      std::pop_heap(q.urgent.begin(), q.urgent.end(), later);
      rank = static_cast<uint32_t>(q.urgent.back() >> 32);
      pos = static_cast<int32_t>(q.urgent.back() & 0xFFFFFFFFu);
      q.urgent.pop_back();
    } else if (in_bucket) {
      rank = static_cast<uint32_t>(cur);
      pos = q.buckets[cur_slot][head++];
    } else {
      // The current bucket is done and nothing ranks at or below it: take
      // the next bucket (a bucket's rank is always above every rank read so
      // far, so it never receives entries once it is current).
      if (have_bucket) ReleaseIfLarge(q.buckets[cur_slot]);
      if (q.rank_heap.empty()) break;
      std::pop_heap(q.rank_heap.begin(), q.rank_heap.end(), later);
      cur = q.rank_heap.back();
      q.rank_heap.pop_back();
      cur_slot = static_cast<size_t>(q.slot_of_rank[cur]);
      auto& b = q.buckets[cur_slot];
      if (!std::is_sorted(b.begin(), b.end())) std::sort(b.begin(), b.end());
      head = 0;
      have_bucket = true;
      continue;
    }
    Symbol& left = syms[pos];
    if (left.len == 0 || left.next < 0) continue;
    Symbol& right = syms[left.next];
    MergeMap::Merge m = find(left.id, right.id);
    if (m.rank != rank) continue;
    left.id = m.id;
    left.len += right.len;
    right.len = 0;
    int32_t after = right.next;
    left.next = after;
    if (after >= 0) syms[after].prev = pos;
    if (left.prev >= 0) {
      MergeMap::Merge pm = find(syms[left.prev].id, left.id);
      if (pm.rank != MergeMap::kNoRank) push(pm.rank, left.prev);
    }
    if (after >= 0) {
      MergeMap::Merge nm = find(left.id, syms[after].id);
      if (nm.rank != MergeMap::kNoRank) push(nm.rank, pos);
    }
  }
  for (uint32_t r : q.touched) q.slot_of_rank[r] = -1;
  q.touched.clear();
  q.used = 0;
  ReleaseIfLarge(q.touched);
  ReleaseIfLarge(q.rank_heap);
  ReleaseIfLarge(q.urgent);
  // Keep at most 4096 small lists (a few MB) for the next piece.
  if (q.buckets.size() > 4096) {
    q.buckets.resize(4096);
    q.buckets.shrink_to_fit();
  }
  for (auto& b : q.buckets) {
    if (b.capacity() > 256) std::vector<int32_t>().swap(b);
  }
}

void BpeModel::ComputeWholeTokens() {
  // Only where units are bytes and no prefix/suffix rewrites them: a piece
  // then is the token's bytes exactly.
  whole_.clear();
  if (!options_.byte_units || !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty()) {
    return;
  }
  std::vector<bool> whole(tokens_.size(), false);
  std::vector<uint32_t> ids;
  for (size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& t = tokens_[id];
    if (t.empty() || vocab_.Find(t) != id) continue;
    if (options_.ignore_merges) {
      whole[id] = true;
      continue;
    }
    ids.clear();
    EncodePiece(t, ids, nullptr);
    whole[id] = ids.size() == 1 && ids[0] == id;
  }
  whole_ = std::move(whole);
}

void BpeModel::EncodePiece(std::string_view piece, std::vector<uint32_t>& out,
                           std::vector<uint32_t>* lens) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    uint32_t id = vocab_.Find(piece);
    if (id != StringIdMap::kMissing) {
      out.push_back(id);
      if (lens) lens->push_back(static_cast<uint32_t>(piece.size()));
      return;
    }
  }
  thread_local std::vector<Symbol> syms;
  InitialSymbols(piece, syms);
  if (syms.empty()) return;
  if (syms.size() <= kSmallPiece) {
    MergeSmall(syms);
  } else {
    MergeLarge(syms);
  }
  for (int32_t k = 0; k >= 0; k = syms[k].next) {
    out.push_back(syms[k].id);
    if (lens) lens->push_back(syms[k].len);
  }
  ReleaseIfLarge(syms);
}

}  // namespace toktier::core
