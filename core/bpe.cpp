#include "core/bpe.h"

#include <algorithm>
#include <cassert>
#include <cstdio>

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

void BpeModel::MergeLarge(std::vector<Symbol>& syms) const {
  // A binary heap of candidate merges ordered by (rank, position). Entries go
  // stale when a neighbour merges; they are recognised by the ids they were
  // made for and skipped, as HF does.
  struct Candidate {
    uint32_t rank;
    int32_t pos;
    uint32_t left_id;
    uint32_t right_id;
    uint32_t merged_id;
  };
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  thread_local std::vector<Candidate> heap;
  heap.clear();
  heap.reserve(syms.size() * 2);
  for (size_t k = 0; k + 1 < syms.size(); ++k) {
    MergeMap::Merge m = merges_.Find(syms[k].id, syms[k + 1].id);
    if (m.rank != MergeMap::kNoRank) heap.push_back({m.rank, static_cast<int32_t>(k), syms[k].id, syms[k + 1].id, m.id});
  }
  std::make_heap(heap.begin(), heap.end(), later);
  auto push = [&](const Candidate& c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), later);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = syms[c.pos];
    if (left.len == 0 || left.next < 0 || left.id != c.left_id) continue;
    Symbol& right = syms[left.next];
    if (right.id != c.right_id) continue;
    left.id = c.merged_id;
    left.len += right.len;
    right.len = 0;
    int32_t after = right.next;
    left.next = after;
    if (after >= 0) syms[after].prev = c.pos;
    if (left.prev >= 0) {
      const Symbol& p = syms[left.prev];
      MergeMap::Merge pm = merges_.Find(p.id, left.id);
      if (pm.rank != MergeMap::kNoRank) push({pm.rank, left.prev, p.id, left.id, pm.id});
    }
    if (after >= 0) {
      MergeMap::Merge nm = merges_.Find(left.id, syms[after].id);
      if (nm.rank != MergeMap::kNoRank) push({nm.rank, c.pos, left.id, syms[after].id, nm.id});
    }
  }
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
}

}  // namespace toktier::core
