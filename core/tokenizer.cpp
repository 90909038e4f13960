#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/byte_level.h"
#include "core/piece_cache.h"
#include "core/regex_split.h"
#include "core/tokenizer_impl.h"
#include "core/unicode.h"

namespace toktier::core {
namespace {

// How many code points on each side of a cut a hard-boundary rule may inspect.
constexpr int kRuleReach = 8;

std::atomic<uint64_t> g_next_instance{1};

}  // namespace

TokenizerImpl::TokenizerImpl() : instance_id_(g_next_instance.fetch_add(1)) {}

void TokenizerImpl::EncodePieces(std::string_view norm, const std::vector<uint32_t>* align, uint32_t base,
                                 uint32_t part_begin, uint32_t part_end, Path path,
                                 std::vector<uint32_t>& ids, std::vector<uint32_t>* ends) const {
  std::string_view part = norm.substr(part_begin, part_end - part_begin);
  if (part.empty()) return;
  // Kept between calls (a chunk's pieces fit in L2); released after a huge one.
  // Its size is its high-water mark (SplitReusing); the first n_pieces are this part's.
  thread_local std::vector<Span> pieces;
  const Splitter* splitter = path == Path::kFast && fast_ ? fast_.get() : generic_.get();
  size_t n_pieces = 1;
  if (splitter == nullptr) {
    pieces.assign(1, Span{0, static_cast<uint32_t>(part.size())});
  } else {
    n_pieces = splitter->SplitReusing(part, pieces);
  }
  PieceCaches& caches = CachesFor(instance_id_);
  // About a token per 4 bytes of text; growth past that doubles (states
  // keep these vectors, so reserving the worst case of a token per byte
  // would hold 4x the memory).
  auto reserve = [&](std::vector<uint32_t>& v) {
    const size_t need = v.size() + part.size() / 4 + 16;
    if (v.capacity() < need) v.reserve(std::max(need, v.capacity() * 2));
  };
  reserve(ids);
  if (ends) reserve(*ends);
  auto emit_end = [&](uint32_t pos) { ends->push_back(base + (align ? (*align)[pos] : pos)); };
  const char* limit = part.data() + part.size();
  std::vector<uint32_t> lens;
  // Pieces are looked up in batches, one batch ahead: the keys of the next
  // batch are made and their lines prefetched before this batch is read,
  // so the cache misses overlap with work.
  constexpr size_t kBatch = 16;
  HotPieceCache::Key short_keys[2][kBatch];
  LongPieceCache::Key long_keys[2][kBatch];
  auto prepare = [&](size_t b0, size_t ring) {
    const size_t b1 = std::min(n_pieces, b0 + kBatch);
    for (size_t k = b0; k < b1; ++k) {
      const uint32_t len = pieces[k].end - pieces[k].begin;
      const char* p = part.data() + pieces[k].begin;
      if (len <= HotPieceCache::kMaxPiece) {
        short_keys[ring][k - b0] = HotPieceCache::MakeKey(p, len, limit);
        caches.hot.Prefetch(short_keys[ring][k - b0]);
      } else if (len <= LongPieceCache::kMaxPiece) {
        long_keys[ring][k - b0] = LongPieceCache::MakeKey(p, len, limit);
        caches.long_hot.Prefetch(long_keys[ring][k - b0]);
      }
    }
  };
  // Cache hits are staged in fixed arrays and appended a batch at a time
  // (one capacity check per batch, not per token); a hot entry's ids and
  // ends are copied without a branch on its token count (slots past the
  // count are overwritten by the next piece). Ends are staged as positions
  // in `norm` and mapped when appended.
  constexpr size_t kStage = kBatch * LongPieceCache::kMaxTokens;
  uint32_t stage_ids[kStage];
  uint32_t stage_pos[kStage];
  size_t staged = 0;
  auto flush = [&] {
    ids.insert(ids.end(), stage_ids, stage_ids + staged);
    if (ends) {
      for (size_t t = 0; t < staged; ++t) emit_end(stage_pos[t]);
    }
    staged = 0;
  };
  static_assert(HotPieceCache::kMaxTokens == 3, "the hot copy below moves three slots");
  prepare(0, 0);
  for (size_t b0 = 0, batch = 0; b0 < n_pieces; b0 += kBatch, ++batch) {
    const size_t b1 = std::min(n_pieces, b0 + kBatch);
    const size_t ring = batch & 1;
    if (b1 < n_pieces) prepare(b1, ring ^ 1);
    for (size_t k = b0; k < b1; ++k) {
      const Span sp = pieces[k];
      const uint32_t len = sp.end - sp.begin;
      const char* p = part.data() + sp.begin;
      const uint32_t at = part_begin + sp.begin;
      const LongPieceCache::Entry* long_hit = nullptr;
      if (len <= HotPieceCache::kMaxPiece) {
        if (const HotPieceCache::Entry* e = caches.hot.Find(short_keys[ring][k - b0])) {
          uint32_t* o = stage_ids + staged;
          o[0] = e->ids[0];
          o[1] = e->ids[1];
          o[2] = e->ids[2];
          if (ends) {
            uint32_t* q = stage_pos + staged;
            q[0] = at + e->lens[0];
            q[1] = q[0] + e->lens[1];
            q[e->count - 1] = at + len;
          }
          staged += e->count;
          continue;
        }
        // A short piece of more tokens than a short entry holds lives in the
        // long cache.
        long_hit = caches.long_hot.Find(LongPieceCache::MakeKey(p, len, limit));
      } else if (len <= LongPieceCache::kMaxPiece) {
        long_hit = caches.long_hot.Find(long_keys[ring][k - b0]);
      }
      if (long_hit != nullptr) {
        const uint32_t count = long_hit->count;
        for (uint32_t t = 0; t < count; ++t) stage_ids[staged + t] = long_hit->ids[t];
        if (ends) {
          uint32_t pos = at;
          for (uint32_t t = 0; t + 1 < count; ++t) stage_pos[staged + t] = pos += long_hit->lens[t];
          stage_pos[staged + count - 1] = at + len;
        }
        staged += count;
        continue;
      }
      // A miss: what is staged goes first, then this piece straight to ids.
      flush();
      std::string_view piece(p, len);
      const size_t first = ids.size();
      lens.clear();
      // A whole token first: one vocab lookup instead of BPE.
      const uint32_t whole = bpe_.WholePieceId(piece);
      if (whole != StringIdMap::kMissing) {
        ids.push_back(whole);
        lens.push_back(len);
      } else {
        const bool cacheable = len <= PieceCache::kMaxPiece;
        const uint64_t h = cacheable ? HashBytes(piece) : 0;
        if (!cacheable || !caches.wide.Lookup(piece, h, ids, &lens)) {
          bpe_.EncodePiece(piece, ids, &lens);
          if (cacheable) caches.wide.Store(piece, h, ids.data() + first, lens.data(), ids.size() - first);
        }
      }
      const size_t count = ids.size() - first;
      if (len <= HotPieceCache::kMaxPiece && count <= HotPieceCache::kMaxTokens) {
        caches.hot.Store(short_keys[ring][k - b0], ids.data() + first, lens.data(), count);
      } else if (len <= HotPieceCache::kMaxPiece) {
        caches.long_hot.Store(LongPieceCache::MakeKey(p, len, limit), ids.data() + first, lens.data(), count);
      } else if (len <= LongPieceCache::kMaxPiece) {
        caches.long_hot.Store(long_keys[ring][k - b0], ids.data() + first, lens.data(), count);
      }
      if (ends) {
        uint32_t pos = at;
        for (uint32_t l : lens) {
          pos += l;
          emit_end(pos);
        }
      }
    }
    flush();
  }
  if (pieces.capacity() > (size_t{1} << 20)) std::vector<Span>().swap(pieces);
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

bool TokenizerImpl::CanCutSegments() const {
  // Repair's conditions: a Strip normalizer or strip rules of added tokens
  // make a segment's encoding depend on its far end; normalized added
  // tokens under a normalizer are matched on text the cut rule cannot see.
  return repair_supported_ && (norm_added_.empty() || normalizer_.identity());
}

size_t TokenizerImpl::FindCut(std::string_view text, size_t seg_begin, size_t seg_end, size_t from,
                              size_t max_search) const {
  const std::string_view seg = text.substr(seg_begin, seg_end - seg_begin);
  size_t p = from - seg_begin;
  while (p < seg.size() && (static_cast<unsigned char>(seg[p]) & 0xC0) == 0x80) ++p;
  const size_t stop = std::min(seg.size(), p + max_search);
  while (p < stop) {
    if (IsContentBoundary(seg, p, /*text_ends_segment=*/true) && !norm_added_.Straddles(seg, p)) {
      return seg_begin + p;
    }
    size_t len = 0;
    unicode::DecodeAt(seg, p, &len);
    p += len;
  }
  return seg_end;
}

size_t TokenizerImpl::FindRegionSplit(std::string_view text, size_t from, size_t max_search, bool match_added) const {
  const size_t n = text.size();
  if (!CanCutSegments()) return std::string_view::npos;
  const AddedTokenMatcher* matchers[2] = {nullptr, nullptr};
  size_t token_len = 0;  // longest added token that is matched
  if (match_added && !raw_added_.empty()) {
    matchers[0] = &raw_added_;
    token_len = raw_added_.max_length();
  }
  // Normalized added tokens split segments whatever match_added says
  // (EncodeNormalized); with cuts allowed, the normalizer is the identity
  // and they are matched on these very bytes.
  if (!norm_added_.empty()) {
    matchers[1] = &norm_added_;
    token_len = std::max(token_len, norm_added_.max_length());
  }
  // p needs no occurrence starting in [lo(p), hi(p)): lo(p) = p - reach -
  // token_len + 1 (an earlier one ends before the window), hi(p) = p + reach.
  // `occurrence` is the first start at or after `scanned_from`, or
  // `scanned_to` when there is none below it; the scan only moves forward.
  const size_t stop = std::min(n, from + max_search);
  size_t scanned_from = 0, scanned_to = 0, occurrence = 0;
  auto first_occurrence = [&](size_t lo, size_t hi) {
    if (lo < scanned_from || occurrence < lo || hi > scanned_to) {
      scanned_from = lo;
      scanned_to = std::min(n, std::max(hi, stop + kRegionReach));
      occurrence = scanned_to;
      for (const AddedTokenMatcher* m : matchers) {
        if (m != nullptr) occurrence = std::min(occurrence, m->FirstOccurrence(text, lo, occurrence));
      }
    }
    return occurrence;
  };
  // The other kind of split: the start of a raw added token that no
  // occurrence straddles. The whole text's leftmost-longest scan reaches
  // such a point (every match before it ends at or before it) and matches
  // there what a scan of text[p:] matches, so a segment ends at p on both
  // sides. Its first candidate bounds the search for the first kind.
  size_t token_start = stop;
  if (matchers[0] != nullptr) {
    for (size_t q = raw_added_.FirstOccurrence(text, std::max<size_t>(from, 1), stop); q < stop;
         q = raw_added_.FirstOccurrence(text, q + 1, stop)) {
      if (!raw_added_.Straddles(text, q)) {
        token_start = q;
        break;
      }
    }
  }
  size_t p = from;
  while (p < token_start) {
    if (p == 0 || (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) {
      ++p;
      continue;
    }
    const size_t a = p > kRegionReach ? p - kRegionReach : 0, b = std::min(n, p + kRegionReach);
    if (token_len > 0) {
      const size_t lo = a + 1 > token_len ? a + 1 - token_len : 0;
      const size_t q = first_occurrence(lo, b);
      if (q < b) {
        // Every point up to q's reach fails the same way.
        p = std::max(p + 1, q + kRegionReach + token_len);
        continue;
      }
    }
    if (IsContentBoundary(text.substr(a, b - a), p - a, /*text_ends_segment=*/b == n)) return p;
    ++p;
  }
  return token_start < stop ? token_start : std::string_view::npos;
}

void TokenizerImpl::PlanWork(std::string_view text, size_t begin, bool continue_segment, bool match_added,
                             Path path, size_t chunk_bytes, std::vector<WorkItem>& items) const {
  std::string_view rest = text.substr(begin);
  thread_local std::vector<Segment> segments;
  segments.clear();
  if (!match_added || raw_added_.empty()) {
    if (!rest.empty()) {
      segments.push_back(Segment{static_cast<uint32_t>(begin), static_cast<uint32_t>(text.size()), false, 0});
    }
  } else {
    raw_added_.Split(rest, static_cast<uint32_t>(begin), segments);
  }
  // The generic path is the in-project reference (the shadow verifier's): it
  // encodes every segment whole, so it also checks the cut rule.
  const bool cut = chunk_bytes > 0 && path == Path::kFast && CanCutSegments();
  // A cut point is looked for in a short window past each chunk's nominal
  // end (text has one every few bytes); a window without one (a long piece)
  // moves on a chunk, so an uncuttable text costs few boundary tests.
  const size_t search = std::clamp<size_t>(chunk_bytes / 4, 64, 256);
  // Cuts [b, e), a stretch that the pre-tokenizer sees whole, into chunks.
  auto cut_stretch = [&](size_t b, size_t e, bool segment_start) {
    size_t at = b;
    if (cut && e - b > 2 * chunk_bytes) {
      size_t from = at + chunk_bytes;
      while (from + chunk_bytes < e) {
        const size_t p = FindCut(text, b, e, from, search);
        if (p >= e) {
          // No cut point in this window (a long piece): try the next one.
          from += chunk_bytes;
          continue;
        }
        items.push_back(WorkItem{static_cast<uint32_t>(at), static_cast<uint32_t>(p), false, 0,
                                 segment_start && at == b});
        at = p;
        from = p + chunk_bytes;
      }
    }
    items.push_back(WorkItem{static_cast<uint32_t>(at), static_cast<uint32_t>(e), false, 0, segment_start && at == b});
  };
  thread_local std::vector<Segment> inner;
  for (const Segment& s : segments) {
    if (s.is_added) {
      items.push_back(WorkItem{s.begin, s.end, true, s.id, false});
      continue;
    }
    const bool segment_start = !(continue_segment && s.begin == begin);
    if (!cut || s.end - s.begin <= 2 * chunk_bytes || norm_added_.empty()) {
      cut_stretch(s.begin, s.end, segment_start);
      continue;
    }
    // Normalized added tokens split the segment further before the
    // pre-tokenizer runs; with an identity normalizer (CanCutSegments
    // holds) they are matched on these very bytes, so they become items of
    // their own and the cut rule sees the stretches between them, as
    // EncodeNormalized's pre-tokenizer does. No occurrence starts inside a
    // stretch (the leftmost-longest scan visited every position of it), so
    // encoding a chunk of one finds none again.
    inner.clear();
    norm_added_.Split(text.substr(s.begin, s.end - s.begin), s.begin, inner);
    for (const Segment& t : inner) {
      if (t.is_added) {
        items.push_back(WorkItem{t.begin, t.end, true, t.id, false});
      } else {
        cut_stretch(t.begin, t.end, segment_start && t.begin == s.begin);
      }
    }
  }
  if (segments.capacity() > 4096) std::vector<Segment>().swap(segments);
}

void TokenizerImpl::EncodeWork(std::string_view text, const WorkItem* first, const WorkItem* last, Path path,
                               const Sink& out) const {
  for (const WorkItem* w = first; w != last; ++w) {
    if (w->is_added) {
      out.ids.push_back(w->id);
      if (out.ends) out.ends->push_back(w->end);
      if (out.added) out.added->push_back(TextSpan{w->begin, w->end});
      continue;
    }
    EncodeChunk(text, w->begin, w->end, w->segment_start, path, out);
  }
}

void TokenizerImpl::EncodeChunk(std::string_view text, uint32_t begin, uint32_t end, bool segment_start, Path path,
                                const Sink& out) const {
  std::string_view chunk = text.substr(begin, end - begin);
  if (normalizer_.identity()) {
    EncodeNormalized(chunk, nullptr, begin, path, out);
    return;
  }
  constexpr size_t kSmall = 1024;
  if (path == Path::kFast && CanCutSegments() && normalizer_.unicode_forms_only()) {
    // Normalize only around what changes: each stretch that a form may
    // change gets a part from a cut point before it to one after it; the
    // text between parts is encoded as it is. The chunk's ends are cut
    // points of its segment, so a boundary inside the chunk is one of the
    // segment too, and the text after a part normalizes on its own.
    uint32_t at = begin;  // start of the text not encoded yet (a cut point)
    while (at < end) {
      const std::pair<size_t, size_t> change = normalizer_.FirstChange(text.substr(at, end - at));
      if (change.first == std::string_view::npos) break;
      const size_t change_begin = at + change.first, change_end = at + change.second;
      // A cut in the stretch just before the change, else the part starts at `at`.
      const size_t from = change_begin - std::min<size_t>(change_begin - at, kSmall / 4);
      size_t cut_before = FindCut(text, begin, end, from, change_begin - from);
      if (cut_before >= change_begin) cut_before = at;
      size_t cut_after = end;
      for (size_t from_after = change_end; from_after < end; from_after += kSmall / 4) {
        cut_after = FindCut(text, begin, end, from_after, kSmall / 4);
        if (cut_after < end) break;
      }
      if (cut_before > at) EncodeNormalized(text.substr(at, cut_before - at), nullptr, at, path, out);
      EncodeNormalizing(text, static_cast<uint32_t>(cut_before), static_cast<uint32_t>(cut_after),
                        segment_start && cut_before == begin, path, out);
      at = static_cast<uint32_t>(cut_after);
    }
    if (at < end) EncodeNormalized(text.substr(at, end - at), nullptr, at, path, out);
    return;
  }
  if (normalizer_.LeavesUnchanged(chunk)) {
    EncodeNormalized(chunk, nullptr, begin, path, out);
    return;
  }
  // Other normalizers: cut the chunk at content boundaries (normalizer
  // split points) into small parts first, each normalized on its own.
  if (path == Path::kFast && CanCutSegments() && chunk.size() > 2 * kSmall) {
    uint32_t at = begin;
    size_t from = begin + kSmall;
    while (from + kSmall < end) {
      const size_t p = FindCut(text, begin, end, from, kSmall / 4);
      if (p >= end) {
        from += kSmall;
        continue;
      }
      EncodeNormalizing(text, at, static_cast<uint32_t>(p), segment_start && at == begin, path, out);
      at = static_cast<uint32_t>(p);
      from = p + kSmall;
    }
    if (at != begin) {
      EncodeNormalizing(text, at, end, false, path, out);
      return;
    }
  }
  EncodeNormalizing(text, begin, end, segment_start, path, out);
}

void TokenizerImpl::EncodeNormalizing(std::string_view text, uint32_t begin, uint32_t end, bool segment_start,
                                      Path path, const Sink& out) const {
  std::string norm;
  std::vector<uint32_t> align;
  normalizer_.Apply(text.substr(begin, end - begin), segment_start, begin == 0, norm, align);
  EncodeNormalized(norm, &align, begin, path, out);
}

void TokenizerImpl::EncodeFrom(std::string_view text, size_t begin, bool continue_segment, bool match_added,
                               Path path, const Sink& out) const {
  std::vector<WorkItem> items;
  PlanWork(text, begin, continue_segment, match_added, path, kChunkBytes, items);
  EncodeWork(text, items.data(), items.data() + items.size(), path, out);
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
  size_t a = 0, b = 0;
  if (!NormalizationWindow(text, p, text_ends_segment, &a, &b)) return false;
  const std::string_view left = text.substr(a, p - a), right = text.substr(p, b - p);
  if (left.empty() || right.empty()) return false;
  // Unicode forms that leave both sides as they are (text already in the
  // form, all ASCII included): the normalized window is the source window,
  // tested as it is. Normalizing it cost about 1 us per cut (PlanWork and
  // the parallel path's region splits test many).
  if (normalizer_.LeavesUnchanged(left) && normalizer_.LeavesUnchanged(right)) {
    const std::string_view window = text.substr(a, b - a);
    return splitter != nullptr ? splitter->IsHardBoundary(window, p - a) : UnitsCannotJoin(window, p - a);
  }
  std::string norm, norm_right;
  std::vector<uint32_t> align;
  normalizer_.Apply(left, /*segment_start=*/a == 0, /*at_text_start=*/false, norm, align);
  normalizer_.Apply(right, /*segment_start=*/false, /*at_text_start=*/false, norm_right, align);
  const size_t q = norm.size();
  if (q == 0 || norm_right.empty()) return false;
  norm.append(norm_right);
  return splitter != nullptr ? splitter->IsHardBoundary(norm, q) : UnitsCannotJoin(norm, q);
}

bool TokenizerImpl::NormalizationWindow(std::string_view text, size_t p, bool text_ends_segment, size_t* window_begin,
                                        size_t* window_end) const {
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
  *window_begin = a;
  *window_end = b;
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
  bpe_.ComputeWholeTokens();
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
    size_t len;
    char32_t cp;
    if (!unicode::DecodeStrict(s, n, i, &cp, &len)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace toktier::core
