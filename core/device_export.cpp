// The device export of core.h ("Device export (gpu/)"): core's tables as
// plain data for gpu/, which must reproduce the CPU path exactly. Everything
// here is copied from the structures the CPU path itself uses (the BPE
// vocabulary and merge map, the added-token matchers, the normalizer, the
// Unicode class tables), never re-derived from the tokenizer file.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/core.h"
#include "core/family_scanners.h"
#include "core/flat_maps.h"
#include "core/tokenizer_impl.h"
#include "core/unicode.h"

namespace toktier::core {

uint16_t DeviceClassOf(char32_t cp) {
  // The scanners' own classification (family_scanners.cpp static_asserts
  // that its bits are these).
  return static_cast<uint16_t>(ScannerClassOf(cp));
}

DeviceClassTable ExportDeviceClassTable() {
  DeviceClassTable t;
  t.block_of.assign(0x1100, 0);
  std::map<std::vector<uint16_t>, uint16_t> seen;
  std::vector<uint16_t> block(256);
  for (uint32_t hi = 0; hi < 0x1100; ++hi) {
    for (uint32_t lo = 0; lo < 256; ++lo) block[lo] = DeviceClassOf(static_cast<char32_t>((hi << 8) | lo));
    auto it = seen.find(block);
    if (it == seen.end()) {
      const auto index = static_cast<uint16_t>(seen.size());
      it = seen.emplace(block, index).first;
      t.blocks.insert(t.blocks.end(), block.begin(), block.end());
    }
    t.block_of[hi] = it->second;
  }
  return t;
}

namespace {

DeviceFamily FamilyOf(PatternFamily f) {
  switch (f) {
    case PatternFamily::kCl100k: return DeviceFamily::kCl100k;
    case PatternFamily::kQwen2: return DeviceFamily::kQwen2;
    case PatternFamily::kO200k: return DeviceFamily::kO200k;
    case PatternFamily::kDeepSeekV3: return DeviceFamily::kDeepSeekV3;
    case PatternFamily::kGpt2:
    case PatternFamily::kNone: break;
  }
  return DeviceFamily::kOther;
}

}  // namespace

DeviceTables ExportDeviceTables(const Tokenizer& tokenizer) {
  const TokenizerImpl& impl = tokenizer.impl();
  const BpeModel& bpe = impl.bpe();
  DeviceTables t;
  t.version_hash = impl.version_hash();
  t.tiktoken = impl.format_is_tiktoken();
  t.prefix_ids = impl.prefix_specials();
  t.suffix_ids = impl.suffix_specials();
  const PatternFamily pf = impl.fast_ ? DetectFamily(impl.steps_) : PatternFamily::kNone;
  t.family = FamilyOf(pf);
  const Normalizer& norm = impl.normalizer();
  if (norm.identity()) {
    t.normalizer = DeviceNormalizer::kIdentity;
  } else if (norm.ops().size() == 1 && norm.ops()[0].kind == NormalizerOp::Kind::kNFC) {
    t.normalizer = DeviceNormalizer::kNfc;
  } else {
    t.normalizer = DeviceNormalizer::kOther;
  }
  auto unsupported = [&](std::string why) {
    t.supported = false;
    t.unsupported_reason = std::move(why);
    return std::move(t);
  };
  if (t.family == DeviceFamily::kOther) {
    return unsupported("pre-tokenizer " + std::string(FamilyName(pf)) + " has no device scanner");
  }
  if (t.normalizer == DeviceNormalizer::kOther) return unsupported("normalizer " + norm.Describe());
  const BpeOptions& o = bpe.options();
  if (!o.byte_units) return unsupported("BPE units are characters, not bytes");
  if (!o.continuing_subword_prefix.empty() || !o.end_of_word_suffix.empty()) {
    return unsupported("BPE continuing_subword_prefix / end_of_word_suffix");
  }
  t.ignore_merges = o.ignore_merges;
  for (int b = 0; b < 256; ++b) {
    const uint32_t id = bpe.Find(std::string(1, static_cast<char>(b)));
    if (id == StringIdMap::kMissing) return unsupported("byte " + std::to_string(b) + " has no token");
    t.byte_ids[b] = id;
  }
  const size_t slots = bpe.vocab_slots();
  t.tokens.assign(slots, std::string());
  t.whole_piece.assign(slots, 0);
  for (size_t id = 0; id < slots; ++id) {
    const std::string& bytes = bpe.TokenBytes(static_cast<uint32_t>(id));
    if (bytes.empty() || bpe.Find(bytes) != id) continue;
    t.tokens[id] = bytes;
    // Computed once at load for the CPU path's whole-token lookup.
    t.whole_piece[id] = bpe.IsWholeToken(static_cast<uint32_t>(id));
  }
  // Every merge of core's map joins two tokens into their concatenation (HF:
  // AddMerge checks the merged token; tiktoken: derived from the splits of
  // each token), so probing every split of every token finds them all.
  const MergeMap& mm = bpe.merge_map();
  for (size_t id = 0; id < slots; ++id) {
    const std::string_view bytes = t.tokens[id];
    for (size_t k = 1; k < bytes.size(); ++k) {
      const uint32_t l = bpe.Find(bytes.substr(0, k));
      if (l == StringIdMap::kMissing) continue;
      const uint32_t r = bpe.Find(bytes.substr(k));
      if (r == StringIdMap::kMissing) continue;
      const MergeMap::Merge m = mm.Find(l, r);
      if (m.rank == MergeMap::kNoRank) continue;
      t.merges.push_back(DeviceMerge{l, r, m.rank, m.id});
    }
  }
  if (t.merges.size() != mm.size()) {
    return unsupported("merge table not recoverable (" + std::to_string(t.merges.size()) + " of " +
                       std::to_string(mm.size()) + ")");
  }
  t.supported = true;
  return t;
}

bool SplitDeviceSegments(const Tokenizer& tokenizer, std::string_view text, bool add_special_tokens,
                         std::vector<DeviceSegment>& out) {
  // Mirrors TokenizerImpl::EncodeFrom / EncodeTextSegment / EncodeNormalized
  // for a text whose every segment the normalizer leaves unchanged.
  const TokenizerImpl& impl = tokenizer.impl();
  out.clear();
  std::vector<Segment> segments;
  if (!impl.MatchesAddedTokens(add_special_tokens) || impl.raw_added().empty()) {
    if (!text.empty()) segments.push_back(Segment{0, static_cast<uint32_t>(text.size()), false, 0});
  } else {
    impl.raw_added().Split(text, 0, segments);
  }
  const Normalizer& norm = impl.normalizer();
  std::vector<Segment> parts;
  for (const Segment& s : segments) {
    if (s.is_added) {
      out.push_back(DeviceSegment{s.begin, s.end, true, s.id});
      continue;
    }
    const std::string_view seg = text.substr(s.begin, s.end - s.begin);
    if (!norm.identity() && !norm.LeavesUnchanged(seg)) return false;
    if (impl.normalized_added().empty()) {
      out.push_back(DeviceSegment{s.begin, s.end, false, 0});
      continue;
    }
    parts.clear();
    impl.normalized_added().Split(seg, 0, parts);
    for (const Segment& p : parts) out.push_back(DeviceSegment{s.begin + p.begin, s.begin + p.end, p.is_added, p.id});
  }
  return true;
}

bool IsNfcQuick(std::string_view text) {
  // Built once: this runs on every GPU-routed miss.
  static const Normalizer nfc = [] {
    Normalizer n;
    NormalizerOp op;
    op.kind = NormalizerOp::Kind::kNFC;
    n.Add(op);
    return n;
  }();
  return nfc.LeavesUnchanged(text);
}

void DeviceEncodePiece(const Tokenizer& tokenizer, std::string_view piece, std::vector<uint32_t>& ids,
                       std::vector<uint32_t>& lens) {
  tokenizer.impl().bpe().EncodePiece(piece, ids, &lens);
}

}  // namespace toktier::core
