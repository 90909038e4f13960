#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/byte_level.h"
#include "core/regex_split.h"
#include "core/tokenizer_impl.h"
#include "core/unicode.h"

namespace toktier::core {
namespace {

// How many code points on each side of a cut a hard-boundary rule may inspect.
constexpr int kRuleReach = 8;

std::atomic<uint64_t> g_next_instance{1};

// Per-thread cache of short pieces' encodings. Keyed by the tokenizer's
// instance id (never reused), so a destroyed tokenizer's entries can never
// answer for another one.
class PieceCache {
 public:
  static constexpr size_t kMaxPiece = 48;
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

PieceCache& CacheFor(uint64_t instance) {
  thread_local uint64_t owner = 0;
  // Freed when the thread exits: servers that start and stop (tests, embedders)
  // would otherwise lose up to ~30 MiB per worker thread each time.
  thread_local std::unique_ptr<PieceCache> cache;
  if (!cache) cache = std::make_unique<PieceCache>();
  if (owner != instance) {
    cache->Clear();
    owner = instance;
  }
  return *cache;
}

}  // namespace

TokenizerImpl::TokenizerImpl() : instance_id_(g_next_instance.fetch_add(1)) {}

void TokenizerImpl::EncodePieces(std::string_view norm, const std::vector<uint32_t>* align, uint32_t base,
                                 uint32_t part_begin, uint32_t part_end, Path path,
                                 std::vector<uint32_t>& ids, std::vector<uint32_t>* ends) const {
  std::string_view part = norm.substr(part_begin, part_end - part_begin);
  if (part.empty()) return;
  std::vector<Span> pieces;  // relative to the part
  const Splitter* splitter = path == Path::kFast && fast_ ? fast_.get() : generic_.get();
  if (splitter == nullptr) {
    pieces.push_back(Span{0, static_cast<uint32_t>(part.size())});
  } else {
    splitter->Split(part, pieces);
  }
  PieceCache& cache = CacheFor(instance_id_);
  std::vector<uint32_t> lens;
  for (const Span& sp : pieces) {
    std::string_view piece = part.substr(sp.begin, sp.end - sp.begin);
    size_t first = ids.size();
    lens.clear();
    bool cacheable = piece.size() <= PieceCache::kMaxPiece;
    uint64_t h = cacheable ? HashBytes(piece) : 0;
    if (!cacheable || !cache.Lookup(piece, h, ids, &lens)) {
      bpe_.EncodePiece(piece, ids, &lens);
      if (cacheable) cache.Store(piece, h, ids.data() + first, lens.data(), ids.size() - first);
    }
    if (ends) {
      uint32_t pos = part_begin + sp.begin;
      for (uint32_t len : lens) {
        pos += len;
        ends->push_back(base + (align ? (*align)[pos] : pos));
      }
    }
  }
}

void TokenizerImpl::EncodeNormalized(std::string_view norm, const std::vector<uint32_t>* align, uint32_t base,
                                     Path path, const Sink& out) const {
  auto src = [&](uint32_t pos) { return base + (align ? (*align)[pos] : pos); };
  if (norm_added_.empty()) {
    EncodePieces(norm, align, base, 0, static_cast<uint32_t>(norm.size()), path, out.ids, out.ends);
    return;
  }
  std::vector<Segment> parts;
  norm_added_.Split(norm, 0, parts);
  for (const Segment& s : parts) {
    if (s.is_added) {
      out.ids.push_back(s.id);
      if (out.ends) out.ends->push_back(src(s.end));
      if (out.added) out.added->push_back(TextSpan{src(s.begin), src(s.end)});
    } else {
      EncodePieces(norm, align, base, s.begin, s.end, path, out.ids, out.ends);
    }
  }
}

void TokenizerImpl::EncodeTextSegment(std::string_view text, uint32_t seg_begin, uint32_t seg_end,
                                      bool segment_start, Path path, const Sink& out) const {
  std::string_view seg = text.substr(seg_begin, seg_end - seg_begin);
  if (normalizer_.identity() || normalizer_.LeavesUnchanged(seg)) {
    EncodeNormalized(seg, nullptr, seg_begin, path, out);
    return;
  }
  std::string norm;
  std::vector<uint32_t> align;
  normalizer_.Apply(seg, segment_start, seg_begin == 0, norm, align);
  EncodeNormalized(norm, &align, seg_begin, path, out);
}

void TokenizerImpl::EncodeFrom(std::string_view text, size_t begin, bool continue_segment, bool match_added,
                               Path path, const Sink& out) const {
  std::string_view rest = text.substr(begin);
  std::vector<Segment> segments;
  if (!match_added || raw_added_.empty()) {
    if (!rest.empty()) {
      segments.push_back(Segment{static_cast<uint32_t>(begin), static_cast<uint32_t>(text.size()), false, 0});
    }
  } else {
    raw_added_.Split(rest, static_cast<uint32_t>(begin), segments);
  }
  for (const Segment& s : segments) {
    if (s.is_added) {
      out.ids.push_back(s.id);
      if (out.ends) out.ends->push_back(s.end);
      if (out.added) out.added->push_back(TextSpan{s.begin, s.end});
      continue;
    }
    bool segment_start = !(continue_segment && s.begin == begin);
    EncodeTextSegment(text, s.begin, s.end, segment_start, path, out);
  }
}

void TokenizerImpl::EncodeFull(std::string_view text, bool add_special_tokens, Path path, const Sink& out) const {
  out.ids.clear();
  if (out.ends) out.ends->clear();
  if (out.added) out.added->clear();
  const bool specials = add_special_tokens && !tiktoken_;
  if (specials) {
    out.ids.insert(out.ids.end(), prefix_ids_.begin(), prefix_ids_.end());
    if (out.ends) out.ends->insert(out.ends->end(), prefix_ids_.size(), 0);
  }
  EncodeFrom(text, 0, false, MatchesAddedTokens(add_special_tokens), path, out);
  if (specials) {
    out.ids.insert(out.ids.end(), suffix_ids_.begin(), suffix_ids_.end());
    if (out.ends) out.ends->insert(out.ends->end(), suffix_ids_.size(), static_cast<uint32_t>(text.size()));
  }
}

bool TokenizerImpl::IsContentBoundary(std::string_view text, size_t p, bool text_ends_segment) const {
  if (p == 0 || p >= text.size()) return false;
  const Splitter* splitter = fast_ ? fast_.get() : generic_.get();
  if (normalizer_.identity()) {
    return splitter != nullptr ? splitter->IsHardBoundary(text, p) : UnitsCannotJoin(text, p);
  }
  // The rules hold for the text the pre-tokenizer (or BPE) sees, so they are
  // evaluated on the normalized text around the image of p, never on the
  // source characters (NFKC turns U+2000 into a space that " ?" absorbs).
  if (!normalizer_.IsBoundary(text, p)) return false;
  std::string norm;
  size_t q = 0;
  if (!NormalizeAround(text, p, text_ends_segment, &norm, &q)) return false;
  return splitter != nullptr ? splitter->IsHardBoundary(norm, q) : UnitsCannotJoin(norm, q);
}

bool TokenizerImpl::NormalizeAround(std::string_view text, size_t p, bool text_ends_segment, std::string* norm,
                                    size_t* q) const {
  // A window [a, b) whose ends are split points of the normalizer (or the
  // segment's true ends) normalizes to exactly the matching slice of the
  // normalized segment. Windows are bounded: without a split point close
  // enough, no certificate (the repair widens or falls back).
  constexpr size_t kMaxWindowBytes = 256;
  size_t a = p;
  for (int chars = 0; a > 0 && chars < kRuleReach; ++chars) a = unicode::PrevStart(text, a);
  while (a > 0 && !normalizer_.IsBoundary(text, a)) {
    a = unicode::PrevStart(text, a);
    if (p - a > kMaxWindowBytes) return false;
  }
  // A window reaching the segment start would need to know whether a
  // Metaspace "first" prefix applies there, which depends on where the
  // segment lies in the whole text.
  if (a == 0) {
    for (const NormalizerOp& op : normalizer_.ops()) {
      if (op.kind == NormalizerOp::Kind::kMetaspacePrepend && op.first_only) return false;
    }
  }
  size_t b = p;
  for (int chars = 0; b < text.size() && chars < kRuleReach; ++chars) {
    size_t len = 0;
    unicode::DecodeAt(text, b, &len);
    b += len;
  }
  while (b < text.size() && !normalizer_.IsBoundary(text, b)) {
    size_t len = 0;
    unicode::DecodeAt(text, b, &len);
    b += len;
    if (b - p > kMaxWindowBytes) return false;
  }
  // `text` cut short inside the segment: its last chunk may normalize
  // differently once the rest follows.
  if (b == text.size() && !text_ends_segment) return false;
  std::string right;
  std::vector<uint32_t> align;
  normalizer_.Apply(text.substr(a, p - a), /*segment_start=*/a == 0, /*at_text_start=*/false, *norm, align);
  normalizer_.Apply(text.substr(p, b - p), /*segment_start=*/false, /*at_text_start=*/false, right, align);
  *q = norm->size();
  if (*q == 0 || right.empty()) return false;
  norm->append(right);
  return true;
}

bool TokenizerImpl::UnitsCannotJoin(std::string_view text, size_t p) const {
  // No pre-tokenizer: the whole segment is one BPE word. A cut between two
  // units that never occur adjacent inside a token cannot be spanned.
  const BpeOptions& o = bpe_.options();
  if (o.ignore_merges || bpe_.merges_touch_fallback() || !o.continuing_subword_prefix.empty() ||
      !o.end_of_word_suffix.empty() || o.byte_units) {
    return false;
  }
  size_t lp = unicode::PrevStart(text, p), len = 0;
  unicode::DecodeAt(text, p, &len);
  std::string_view left = text.substr(lp, p - lp), right = text.substr(p, len);
  // Unknown units (unk, possibly fused) could join across the cut.
  if (bpe_.Find(left) == StringIdMap::kMissing || bpe_.Find(right) == StringIdMap::kMissing) return false;
  return !bpe_.PairInsideSomeToken(left, right);
}

std::string TokenizerImpl::TokenBytes(uint32_t id) const {
  if (id < added_token_text_.size() && !added_token_text_[id].empty()) return added_token_text_[id];
  if (id < bpe_.vocab_slots()) return bpe_.TokenBytes(id);
  return {};
}

std::string TokenizerImpl::Describe() const {
  std::string s = "format=";
  s += format_ == TokenizerFormat::kHuggingFaceJson ? "huggingface" : "tiktoken";
  s += " name=" + name_;
  s += " vocab=" + std::to_string(vocab_size_);
  s += " merges=" + std::to_string(bpe_.merge_count());
  s += " normalizer=" + normalizer_.Describe();
  s += " pretokenizer=";
  s += fast_ ? std::string(fast_->name()) : (generic_ ? std::string("generic") : std::string("none"));
  s += " byte_units=" + std::string(bpe_.options().byte_units ? "yes" : "no");
  s += " added_tokens=" + std::to_string(raw_added_.tokens().size() + norm_added_.tokens().size());
  s += " repair=" + (repair_supported_ ? std::string("yes") : "no (" + repair_unsupported_reason_ + ")");
  s += " version=" + version_hash_;
  return s;
}

Status TokenizerImpl::Finish() {
  std::string error;
  if (!steps_.empty()) {
    generic_ = MakeGenericSplitter(steps_, tables_, &error);
    if (!generic_) return Status::Error("pre-tokenizer: " + error);
    fast_ = MakeFamilyScanner(steps_);
  }
  if (!normalizer_.identity()) {
    for (const NormalizerOp& op : normalizer_.ops()) {
      if (op.kind == NormalizerOp::Kind::kStrip) {
        repair_supported_ = false;
        repair_unsupported_reason_ = "Strip normalizer depends on the segment end";
      }
    }
  }
  if (raw_added_.has_strip_rules() || norm_added_.has_strip_rules()) {
    repair_supported_ = false;
    repair_unsupported_reason_ = "added tokens with lstrip/rstrip/single_word";
  }
  if (!norm_added_.empty() && !normalizer_.identity()) {
    repair_supported_ = false;
    repair_unsupported_reason_ = "normalized added tokens under a normalizer";
  }
  return Status::Ok();
}

// ---- Public facade ----------------------------------------------------------

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}

std::shared_ptr<const Tokenizer> TokenizerImpl::Wrap(std::unique_ptr<TokenizerImpl> impl) {
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}
Tokenizer::~Tokenizer() = default;

void Tokenizer::Encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids) const {
  impl_->EncodeFull(text, add_special_tokens, TokenizerImpl::Path::kFast, {ids});
}

void Tokenizer::EncodeWithEnds(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids,
                               std::vector<uint32_t>& ends) const {
  impl_->EncodeFull(text, add_special_tokens, TokenizerImpl::Path::kFast, {ids, &ends});
}

const std::string& Tokenizer::version_hash() const { return impl_->version_hash(); }
TokenizerFormat Tokenizer::format() const { return impl_->format(); }
std::string Tokenizer::Describe() const { return impl_->Describe(); }
size_t Tokenizer::vocab_size() const { return impl_->vocab_size(); }
std::string Tokenizer::TokenBytes(uint32_t id) const { return impl_->TokenBytes(id); }

bool Tokenizer::IsSpecialToken(uint32_t id) const {
  return id < impl_->special_ids_.size() && impl_->special_ids_[id];
}

bool Tokenizer::DecodesByConcatenation() const { return impl_->concat_decoder_; }

void AppendUtf8(char32_t cp, std::string& out) { unicode::AppendUtf8(cp, out); }

size_t FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    char32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace toktier::core
