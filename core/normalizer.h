// Normalizers (HF order, applied to each segment between added tokens), with
// an alignment from normalized bytes back to source bytes so that token ends
// can be reported in source offsets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/core.h"

namespace toktier::core {

struct NormalizerOp {
  enum class Kind {
    kNFC, kNFD, kNFKC, kNFKD, kReplace, kPrepend, kStrip,
    // Metaspace's prefix: `content` unless the segment already starts with
    // it; with first_only, only for the segment at the start of the text.
    kMetaspacePrepend,
  };
  Kind kind = Kind::kNFC;
  std::string pattern;  // kReplace: the string to find
  std::string content;  // kReplace: replacement; kPrepend: the prefix
  bool strip_left = false, strip_right = false;
  bool first_only = false;  // kMetaspacePrepend: prepend_scheme "first"
};

class Normalizer {
 public:
  void Add(NormalizerOp op) { ops_.push_back(std::move(op)); }
  [[nodiscard]] bool identity() const { return ops_.empty(); }
  [[nodiscard]] const std::vector<NormalizerOp>& ops() const { return ops_; }

  // Normalizes one segment. `segment_start` is false when `seg` continues a
  // segment whose beginning was normalized earlier (Prepend is skipped).
  // align (size out.size() + 1) gets, for each output byte, the source
  // offset (relative to seg) where the text it came from starts; the last
  // entry is seg.size(). Bytes of a rewritten run point to the run's end,
  // except its first byte, so reported ends never fall inside the run.
  // at_text_start: the segment begins at offset 0 of the whole text.
  void Apply(std::string_view seg, bool segment_start, bool at_text_start, std::string& out,
             std::vector<uint32_t>& align) const;

  // True if normalizing X equals normalizing X[:p] followed by normalizing
  // X[p:] as a continuation, for every X with the characters of `text` around
  // p (`text` is a slice of one segment, possibly cut short at its end).
  // Checked op by op on the text each op sees, not on the source alone.
  // Prepend only acts at a segment start, so it never blocks a boundary.
  [[nodiscard]] bool IsBoundary(std::string_view text, size_t p) const;

  // True when Apply would return `seg` unchanged: only Unicode forms, each
  // leaving every chunk as it is (ASCII is skipped 8 bytes at a time; a
  // non-ASCII run costs a table lookup per character when the quick check
  // vouches for it, a normalization otherwise; no output copy).
  [[nodiscard]] bool LeavesUnchanged(std::string_view seg) const;

  // For chains of Unicode forms only (unicode_forms_only()): the first
  // stretch [first, second) of seg that some form may change, a non-ASCII
  // run with the ASCII character before it; {npos, npos} when none does
  // (then LeavesUnchanged(seg)). Everything before `first` is unchanged.
  // With any other op in the chain: {0, seg.size()}.
  [[nodiscard]] std::pair<size_t, size_t> FirstChange(std::string_view seg) const;
  [[nodiscard]] bool unicode_forms_only() const;

  // A short description for Describe() / hashing.
  [[nodiscard]] std::string Describe() const;

 private:
  // IsBoundary for chains where a Unicode form sees text rewritten by an
  // earlier op: the junction character, traced through the ops.
  [[nodiscard]] bool JunctionStaysAscii(std::string_view text, size_t p) const;

  std::vector<NormalizerOp> ops_;
};

}  // namespace toktier::core
