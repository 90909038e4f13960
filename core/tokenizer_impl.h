// The loaded tokenizer model (immutable) and its encoding pipeline:
//   added-token split -> normalize each segment -> pre-tokenize -> BPE per
//   piece -> post-processor specials.
// Encoding can start in the middle of a text at a certified boundary, which
// is what incremental repair builds on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/added_tokens.h"
#include "core/bpe.h"
#include "core/core.h"
#include "core/normalizer.h"
#include "core/pretokenizer.h"
#include "core/unicode.h"

namespace toktier::core {

class TokenizerImpl {
 public:
  TokenizerImpl();

  // --- Encoding -----------------------------------------------------------
  // Which splitter to use: the hand-written scanner when one applies, or the
  // generic regex path (the in-project reference, used by the shadow verifier).
  enum class Path { kFast, kGeneric };

  // Where encoding results go: ids always; token ends and added-token spans
  // (source offsets) when requested.
  struct Sink {
    std::vector<uint32_t>& ids;
    std::vector<uint32_t>* ends = nullptr;
    std::vector<TextSpan>* added = nullptr;
  };

  // Encodes text[begin:] assuming text[:begin] was encoded already and begin
  // is a certified boundary. `continue_segment`: begin lies inside a segment
  // (not right after an added token / at the start), so segment-start rules
  // (Prepend, add_prefix_space) do not apply. Appends ids and, if ends is
  // non-null, each token's end offset in text. No post-processor specials.
  // match_added: whether added tokens are recognized (MatchesAddedTokens).
  void EncodeFrom(std::string_view text, size_t begin, bool continue_segment, bool match_added,
                  Path path, const Sink& out) const;

  // Full encoding with the post-processor (clears the sink's vectors first).
  // With options.pool, long texts are encoded in chunks on its threads
  // (parallel_encode.cpp); the result is the same.
  void EncodeFull(std::string_view text, bool add_special_tokens, Path path, const Sink& out,
                  const EncodeOptions* options = nullptr, EncodeOutcome* outcome = nullptr) const;

  // One unit of encoding work: an added token, or a chunk of a segment
  // [begin, end) whose ends are cut points no piece can cross.
  struct WorkItem {
    uint32_t begin = 0, end = 0;
    bool is_added = false;
    uint32_t id = 0;             // the added token
    bool segment_start = false;  // the chunk begins its segment (Prepend etc. apply)
  };
  // The items of text[begin:] (as EncodeFrom would encode it), segments cut
  // into chunks of about chunk_bytes at content boundaries where allowed
  // (chunk_bytes 0: segments whole).
  void PlanWork(std::string_view text, size_t begin, bool continue_segment, bool match_added, Path path,
                size_t chunk_bytes, std::vector<WorkItem>& items) const;
  void EncodeWork(std::string_view text, const WorkItem* first, const WorkItem* last, Path path,
                  const Sink& out) const;
  // Whether segments may be cut at content boundaries (what repair proves).
  [[nodiscard]] bool CanCutSegments() const;
  // A region split: a point p where the whole text's encoding is the
  // encoding of text[:p] followed by EncodeFrom(text, p, continuing its
  // segment), decided from the bytes near p alone. Either no added token
  // (raw ones when match_added; normalized ones always) occurs overlapping
  // [p - kRegionReach, p + kRegionReach), so p lies inside a segment that
  // contains the window, and p is a content boundary of that window; or
  // (when match_added) a raw added token starts at p and no occurrence
  // straddles p, so a segment ends there. A pure function of (text, p):
  // threads that each test the same point agree without talking. The
  // parallel path cuts a text into regions at such points, found near
  // nominal offsets, instead of planning it first.
  [[nodiscard]] bool IsRegionSplit(std::string_view text, size_t p, bool match_added) const {
    return FindRegionSplit(text, p, 1, match_added) == p;
  }
  // The first region split in [from, from + max_search); npos if none.
  [[nodiscard]] size_t FindRegionSplit(std::string_view text, size_t from, size_t max_search, bool match_added) const;
  // Covers what IsContentBoundary may read around p: a normalization window
  // (at most 256 bytes plus 8 code points) and the cut rules' 4 code points.
  static constexpr size_t kRegionReach = 512;
  // Chunks of a plan made for a single thread: small enough that a chunk's
  // pieces, IDs and normalizer output stay in L2, and that a text which is
  // not NFC in one place normalizes only that chunk.
  static constexpr size_t kChunkBytes = size_t{32} << 10;

  // --- Facts that incremental repair needs ---------------------------------
  // Specials the post-processor puts before / after the content.
  [[nodiscard]] const std::vector<uint32_t>& prefix_specials() const { return prefix_ids_; }
  [[nodiscard]] const std::vector<uint32_t>& suffix_specials() const { return suffix_ids_; }
  // Whether added tokens are matched at all for this add_special setting.
  [[nodiscard]] bool MatchesAddedTokens(bool add_special_tokens) const {
    return !(tiktoken_ && !add_special_tokens);
  }
  // `text` is one segment (between added tokens), possibly cut short some
  // bytes after p (`text_ends_segment` false then). True when segment[:p]
  // and segment[p:] encode independently: a normalizer split point and a
  // pre-tokenizer hard boundary on the normalized text, or (with no
  // pre-tokenizer split) a pair of normalized units no merge can join. See
  // repair.cpp for the other conditions.
  [[nodiscard]] bool IsContentBoundary(std::string_view text, size_t p, bool text_ends_segment) const;
  [[nodiscard]] const Normalizer& normalizer() const { return normalizer_; }
  [[nodiscard]] const AddedTokenMatcher& raw_added() const { return raw_added_; }
  [[nodiscard]] const AddedTokenMatcher& normalized_added() const { return norm_added_; }
  [[nodiscard]] bool format_is_tiktoken() const { return tiktoken_; }
  [[nodiscard]] bool repair_supported() const { return repair_supported_; }

  // --- Description ----------------------------------------------------------
  [[nodiscard]] const std::string& version_hash() const { return version_hash_; }
  [[nodiscard]] TokenizerFormat format() const { return format_; }
  [[nodiscard]] std::string Describe() const;
  [[nodiscard]] const BpeModel& bpe() const { return bpe_; }
  [[nodiscard]] size_t vocab_size() const { return vocab_size_; }
  [[nodiscard]] std::string TokenBytes(uint32_t id) const;

  // --- Construction (loaders) ------------------------------------------------
  TokenizerFormat format_ = TokenizerFormat::kHuggingFaceJson;
  std::string version_hash_;
  std::string name_;  // e.g. "tiktoken:cl100k_base" or the model type
  BpeModel bpe_;
  size_t vocab_size_ = 0;
  Normalizer normalizer_;
  AddedTokenMatcher raw_added_;   // matched on the source text
  AddedTokenMatcher norm_added_;  // matched on normalized segments
  std::vector<PreTokenizerStep> steps_;
  std::unique_ptr<Splitter> fast_;     // null when no scanner applies
  std::unique_ptr<Splitter> generic_;  // null when there is no pre-tokenizer
  unicode::Tables tables_ = unicode::Tables::kHuggingFace;  // whose Unicode classes the regexes use
  std::vector<uint32_t> prefix_ids_, suffix_ids_;
  bool tiktoken_ = false;
  bool metaspace_ = false;  // a Metaspace pre-tokenizer became normalizer ops + a split
  std::vector<std::string> added_token_text_;  // id -> content, for TokenBytes
  std::vector<bool> special_ids_;              // id -> special added token
  bool concat_decoder_ = false;                // see Tokenizer::DecodesByConcatenation
  bool repair_supported_ = true;
  std::string repair_unsupported_reason_;
  uint64_t instance_id_ = 0;

  // Hands a finished model to the public facade.
  static std::shared_ptr<const Tokenizer> Wrap(std::unique_ptr<TokenizerImpl> impl);

  // Called by loaders once everything is set: chooses splitters and decides
  // what repair may rely on.
  Status Finish();

 private:
  // A window [begin, end) around source position p of a segment slice whose
  // ends are split points of the normalizer (or the segment's true ends), so
  // that normalizing text[begin:p] and text[p:end] gives exactly the
  // normalized text around p's image; false when none is close enough.
  bool NormalizationWindow(std::string_view text, size_t p, bool text_ends_segment, size_t* window_begin,
                           size_t* window_end) const;
  // With no pre-tokenizer: no merge can join the units on both sides of p.
  [[nodiscard]] bool UnitsCannotJoin(std::string_view text, size_t p) const;
  // The first content boundary of segment text[seg_begin, seg_end) in
  // [from, from + max_search) where no normalized added token straddles;
  // seg_end when there is none.
  size_t FindCut(std::string_view text, size_t seg_begin, size_t seg_end, size_t from, size_t max_search) const;
  // Encodes chunk text[begin, end) of a segment (its ends are cut points):
  // normalized only when the normalizer changes it; a chunk that must be
  // normalized is cut smaller first, so only the parts that change pay.
  void EncodeChunk(std::string_view text, uint32_t begin, uint32_t end, bool segment_start, Path path,
                   const Sink& out) const;
  // Normalizes text[begin, end) (a chunk or part of one) and encodes the result.
  void EncodeNormalizing(std::string_view text, uint32_t begin, uint32_t end, bool segment_start, Path path,
                         const Sink& out) const;
  void EncodeNormalized(std::string_view norm, const std::vector<uint32_t>* align, uint32_t base,
                        Path path, const Sink& out) const;
  void EncodePieces(std::string_view norm, const std::vector<uint32_t>* align, uint32_t base,
                    uint32_t part_begin, uint32_t part_end, Path path,
                    std::vector<uint32_t>& ids, std::vector<uint32_t>* ends) const;
};

}  // namespace toktier::core
