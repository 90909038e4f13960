// Byte-pair encoding with Hugging Face semantics: the lowest-rank adjacent
// pair merges first, leftmost on ties; ignore_merges; byte fallback all or
// nothing per character; unknown handling with fuse_unk. tiktoken encodings
// are the same algorithm with "every split of a token into two tokens" as the
// merges and the merged token's rank as the merge rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"
#include "core/flat_maps.h"

namespace toktier::core {

struct BpeOptions {
  // Initial symbols are single bytes (byte-level / tiktoken) rather than
  // UTF-8 characters (SentencePiece-style vocabularies).
  bool byte_units = true;
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<uint32_t> unk_id;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel {
 public:
  // `tokens[id]` are the token bytes (raw bytes for byte-units models). Ids
  // without a token are empty strings. Merges come later through AddMerge.
  Status Init(std::vector<std::string> tokens, std::vector<bool> present, BpeOptions options);
  // HF merge "left right" at `rank`: the merged token must be in the vocab.
  Status AddMerge(std::string_view left, std::string_view right, uint32_t rank);
  // tiktoken: every token of 2+ bytes that splits into two tokens yields
  // merges ranked by its own rank (= id).
  void DeriveMergesFromRanks();

  // Appends the ids of one piece (bytes in the model's alphabet) and, if
  // lens is non-null, the number of piece bytes each token covers.
  void EncodePiece(std::string_view piece, std::vector<uint32_t>& out,
                   std::vector<uint32_t>* lens) const;

  // Called once the merges are in: marks the tokens that EncodePiece of
  // their own bytes gives back whole, so WholePieceId can answer a piece
  // with one vocab lookup and no BPE (with ignore_merges every token is).
  void ComputeWholeTokens();
  // The id EncodePiece(piece) would give as its only token, or kMissing
  // when that is not known without running BPE.
  [[nodiscard]] uint32_t WholePieceId(std::string_view piece) const {
    if (whole_.empty()) return StringIdMap::kMissing;
    const uint32_t id = vocab_.Find(piece);
    return id != StringIdMap::kMissing && whole_[id] ? id : StringIdMap::kMissing;
  }
  // Whether EncodePiece of token `id`'s own bytes is exactly [id] (what
  // ComputeWholeTokens found; false where it does not apply).
  [[nodiscard]] bool IsWholeToken(uint32_t id) const { return id < whole_.size() && whole_[id]; }

  [[nodiscard]] uint32_t Find(std::string_view token) const { return vocab_.Find(token); }
  [[nodiscard]] const std::string& TokenBytes(uint32_t id) const { return tokens_[id]; }
  [[nodiscard]] size_t vocab_slots() const { return tokens_.size(); }
  [[nodiscard]] const BpeOptions& options() const { return options_; }
  [[nodiscard]] size_t merge_count() const { return merges_.size(); }
  // The merge table (core/device_export.cpp copies it for gpu/).
  [[nodiscard]] const MergeMap& merge_map() const { return merges_; }
  // True if some token of 2+ units (reachable by merges) contains the units
  // a|b adjacent: a merge could then span a boundary between them.
  [[nodiscard]] bool PairInsideSomeToken(std::string_view a, std::string_view b) const;
  // Whether any merge involves a byte-fallback token (disables the pair rule).
  [[nodiscard]] bool merges_touch_fallback() const { return merges_touch_fallback_; }

 private:
  struct Symbol {
    uint32_t id;
    int32_t prev;
    int32_t next;
    uint32_t len;  // piece bytes covered (0 once merged away)
  };
  void InitialSymbols(std::string_view piece, std::vector<Symbol>& syms) const;
  void MergeSmall(std::vector<Symbol>& syms) const;
  // Pieces of more than kSmallPiece units: buckets by rank, linear memory
  // and sequential access (a repeated character of 60 MB is one piece).
  void MergeLarge(std::vector<Symbol>& syms) const;

  BpeOptions options_;
  std::vector<std::string> tokens_;
  StringIdMap vocab_;
  MergeMap merges_;
  uint32_t max_rank_ = 0;  // highest merge rank (sizes MergeLarge's rank index)
  uint32_t byte_ids_[256];
  uint32_t fallback_ids_[256];
  std::vector<bool> is_fallback_;  // by id: a <0xXX> byte-fallback token
  bool merges_touch_fallback_ = false;
  // Adjacent-unit pairs occurring inside multi-unit tokens, keyed by the
  // concatenation of the two units.
  StringIdMap inner_pairs_;
  // By id: EncodePiece of the token's bytes is exactly [id] (ComputeWholeTokens).
  std::vector<bool> whole_;
};

}  // namespace toktier::core
