// Incremental repair: bring a token state to a new text by re-tokenizing only
// from a certified sync point. See docs/repair.md for the argument.
//
// A sync point p (0 < p <= L, L = common prefix of old and new text) is
// accepted when, in BOTH texts,
//   1. no added-token occurrence straddles p (so added-token matching of
//      text[:p] and text[p:] is independent),
//   2. p is the start of a segment (right after an added token), or a
//      content boundary inside its segment (normalizer boundary and
//      pre-tokenizer hard boundary, or an unmergeable unit pair when there
//      is no pre-tokenizer), or the end of that text,
//   3. a cached token ends exactly at p.
// Then tokens(new) = cached tokens ending <= p ++ EncodeFrom(new, p).
#include <algorithm>
#include <cassert>
#include <cstring>

#include "core/tokenizer_impl.h"
#include "core/unicode.h"

namespace toktier::core {
namespace {

using Path = TokenizerImpl::Path;


bool IsCharStart(std::string_view s, size_t i) {
  return i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
}

// Where the segment holding p ends in `text`, as far as the boundary rules
// can see: the first added-token occurrence starting at or after p within
// reach (later ones cannot influence the rules), else min(text end, p +
// reach). `real` tells whether that is the segment's true end. A normalizer
// needs a longer reach: its window extends to the next split point.
struct SegmentEnd {
  size_t limit;
  bool real;
};
SegmentEnd FindSegmentEnd(const TokenizerImpl& t, std::string_view text, size_t p, bool match_added,
                          bool normalizes) {
  const size_t reach = normalizes ? 320 : 64;
  SegmentEnd e{std::min(text.size(), p + reach), p + reach >= text.size()};
  if (!match_added) return e;
  for (const AddedTokenMatcher* m : {&t.raw_added(), &t.normalized_added()}) {
    if (m->empty()) continue;
    size_t first = m->FirstOccurrence(text, p, e.limit);
    if (first < e.limit) e = {first, true};
  }
  return e;
}

class SyncSearch {
 public:
  SyncSearch(const TokenizerImpl& t, const TokenState& state, std::string_view old_text,
             std::string_view new_text, bool match_added, size_t content_begin, size_t content_end)
      : t_(t), state_(state), old_(old_text), new_(new_text), match_added_(match_added),
        normalizes_(!t.normalizer().identity()), content_begin_(content_begin), content_end_(content_end) {}

  // Whether p is an acceptable sync point; *segment_start tells whether p
  // begins a segment (right after an added token).
  bool Accept(size_t p, bool* segment_start) const {
    if (p == 0) return false;
    // 3. a cached token ends at p.
    const auto& ends = state_.ends();
    auto first = ends.begin() + static_cast<std::ptrdiff_t>(content_begin_);
    auto last = ends.begin() + static_cast<std::ptrdiff_t>(content_end_);
    auto it = std::lower_bound(first, last, static_cast<uint32_t>(p));
    if (it == last || *it != p) return false;
    // Segment start from the recorded added-token spans.
    const auto& spans = state_.added_spans();
    auto sp = std::upper_bound(spans.begin(), spans.end(), static_cast<uint32_t>(p),
                               [](uint32_t v, const TextSpan& s) { return v < s.end; });
    // sp: first span ending after p. A span containing p blocks the cut.
    if (sp != spans.end() && sp->begin < p) return false;
    size_t seg_begin = sp == spans.begin() ? 0 : std::prev(sp)->end;
    *segment_start = seg_begin == p;
    // 1. no straddling occurrence in either text.
    if (match_added_ && (Straddles(new_, p) || (p < old_.size() && Straddles(old_, p)))) return false;
    if (*segment_start) return true;
    // 2. content boundary in both texts.
    return BoundaryIn(new_, seg_begin, p) && BoundaryIn(old_, seg_begin, p);
  }

 private:
  bool Straddles(std::string_view text, size_t p) const {
    return t_.raw_added().Straddles(text, p) || t_.normalized_added().Straddles(text, p);
  }
  bool BoundaryIn(std::string_view text, size_t seg_begin, size_t p) const {
    if (p == text.size()) return true;
    SegmentEnd e = FindSegmentEnd(t_, text, p, match_added_, normalizes_);
    if (e.limit == p) return true;  // an added token starts at p: the segment ends here
    return t_.IsContentBoundary(text.substr(seg_begin, e.limit - seg_begin), p - seg_begin, e.real);
  }

  const TokenizerImpl& t_;
  const TokenState& state_;
  std::string_view old_, new_;
  bool match_added_;
  bool normalizes_;
  size_t content_begin_, content_end_;
};

}  // namespace

std::string_view RepairPathName(RepairPath p) {
  switch (p) {
    case RepairPath::kUnchanged: return "unchanged";
    case RepairPath::kFirstTry: return "first_try";
    case RepairPath::kWidened: return "widened";
    case RepairPath::kFull: return "full";
  }
  return "unknown";
}

std::string_view FullReasonName(FullReason r) {
  switch (r) {
    case FullReason::kNone: return "none";
    case FullReason::kNoState: return "no_state";
    case FullReason::kVersionMismatch: return "version_mismatch";
    case FullReason::kSpecialsMismatch: return "specials_mismatch";
    case FullReason::kEditAtStart: return "edit_at_start";
    case FullReason::kNoCertificate: return "no_certificate";
    case FullReason::kUnsupported: return "unsupported";
    case FullReason::kQuarantined: return "quarantined";
  }
  return "unknown";
}

bool TokenState::Assign(std::string text, std::vector<uint32_t> ids, std::vector<uint32_t> ends,
                        std::vector<TextSpan> added, std::string version_hash, bool add_special_tokens) {
  if (ids.size() != ends.size() || version_hash.empty()) return false;
  if (!std::is_sorted(ends.begin(), ends.end())) return false;
  if (!ends.empty() && ends.back() > text.size()) return false;
  uint32_t prev_end = 0;
  for (const TextSpan& s : added) {
    if (s.begin > s.end || s.begin < prev_end || s.end > text.size()) return false;
    prev_end = s.end;
  }
  text_ = std::move(text);
  ids_ = std::move(ids);
  ends_ = std::move(ends);
  added_ = std::move(added);
  version_hash_ = std::move(version_hash);
  add_special_tokens_ = add_special_tokens;
  return true;
}

void Repairer::Reset(const Tokenizer& tokenizer, TokenState& state, std::string_view text, bool add_special_tokens,
                     bool generic_path, const EncodeOptions& options, EncodeOutcome* outcome) {
  const TokenizerImpl& t = tokenizer.impl();
  state.text_.assign(text);
  t.EncodeFull(text, add_special_tokens, generic_path ? Path::kGeneric : Path::kFast,
               {state.ids_, &state.ends_, &state.added_}, &options, outcome);
  state.version_hash_ = t.version_hash();
  state.add_special_tokens_ = add_special_tokens;
}

FullReason Repairer::StateMissReason(const Tokenizer& tokenizer, const TokenState& state, bool add_special_tokens) {
  if (state.empty()) return FullReason::kNoState;
  if (state.version_hash_ != tokenizer.version_hash()) return FullReason::kVersionMismatch;
  if (state.add_special_tokens_ != add_special_tokens) return FullReason::kSpecialsMismatch;
  return FullReason::kNone;
}

RepairOutcome Repairer::Update(const Tokenizer& tokenizer, TokenState& state, std::string_view new_text,
                               bool add_special_tokens, const RepairOptions& options) {
  const TokenizerImpl& t = tokenizer.impl();
  RepairOutcome out;
  auto full = [&](FullReason why) {
    Reset(tokenizer, state, new_text, add_special_tokens, /*generic_path=*/!options.allow_fast_path, options.encode,
          &out.encode);
    out.path = RepairPath::kFull;
    out.full_reason = why;
    out.sync_point = 0;
    out.kept_tokens = 0;
    out.fresh_tokens = state.ids_.size();
    return out;
  };
  if (!options.allow_fast_path) return full(FullReason::kQuarantined);
  if (const FullReason miss = StateMissReason(tokenizer, state, add_special_tokens); miss != FullReason::kNone) {
    return full(miss);
  }

  const std::string_view old_text = state.text_;
  const size_t known = std::min({options.known_common_prefix, old_text.size(), new_text.size()});
  assert(old_text.compare(0, known, new_text.substr(0, known)) == 0);
  size_t lcp = known + CommonPrefixLength(old_text.substr(known), new_text.substr(known));
  out.common_prefix = lcp;
  if (lcp == old_text.size() && lcp == new_text.size()) {
    out.path = RepairPath::kUnchanged;
    out.sync_point = lcp;
    out.kept_tokens = state.ids_.size();
    return out;
  }
  if (!t.repair_supported()) return full(FullReason::kUnsupported);
  // Back up to a character start (both texts agree before lcp).
  while (lcp > 0 && !(IsCharStart(old_text, lcp) && IsCharStart(new_text, lcp))) --lcp;
  if (lcp == 0) return full(FullReason::kEditAtStart);

  const bool specials = add_special_tokens && !t.format_is_tiktoken();
  const size_t n_prefix = specials ? t.prefix_specials().size() : 0;
  const size_t n_suffix = specials ? t.suffix_specials().size() : 0;
  if (state.ids_.size() < n_prefix + n_suffix) return full(FullReason::kNoState);
  const size_t content_end = state.ids_.size() - n_suffix;
  SyncSearch search(t, state, old_text, new_text, t.MatchesAddedTokens(add_special_tokens), n_prefix, content_end);

  // Scan candidates downward from lcp, widening the window x2 each time.
  size_t p = lcp;
  size_t window = options.window_chars;
  size_t chars_scanned = 0;
  bool found = false, segment_start = false;
  int widenings = 0;
  for (;;) {
    while (p > 0 && chars_scanned <= window) {
      if (search.Accept(p, &segment_start)) {
        found = true;
        break;
      }
      p = unicode::PrevStart(new_text, p);
      ++chars_scanned;
    }
    if (found || p == 0 || widenings == options.max_widenings) break;
    ++widenings;
    window *= 2;
  }
  if (!found) return full(FullReason::kNoCertificate);

  // Splice: keep the content tokens that lie before p, drop the rest. At a
  // segment start, tokens ending exactly at p are the added token and then
  // zero-width tokens of the next segment (a Prepend or Metaspace prefix
  // that no character joined maps to the segment's first source offset):
  // those belong after p and are re-encoded.
  auto first = state.ends_.begin() + static_cast<std::ptrdiff_t>(n_prefix);
  auto last = state.ends_.begin() + static_cast<std::ptrdiff_t>(content_end);
  size_t keep = segment_start
                    ? static_cast<size_t>(std::lower_bound(first, last, static_cast<uint32_t>(p)) - state.ends_.begin()) + 1
                    : static_cast<size_t>(std::upper_bound(first, last, static_cast<uint32_t>(p)) - state.ends_.begin());
  state.ids_.resize(keep);
  state.ends_.resize(keep);
  auto span_cut = std::upper_bound(state.added_.begin(), state.added_.end(), static_cast<uint32_t>(p),
                                   [](uint32_t v, const TextSpan& s) { return v < s.end; });
  state.added_.erase(span_cut, state.added_.end());
  state.text_.resize(p);
  state.text_.append(new_text.substr(p));
  t.EncodeFrom(state.text_, p, /*continue_segment=*/!segment_start, t.MatchesAddedTokens(add_special_tokens),
               Path::kFast, {state.ids_, &state.ends_, &state.added_});
  if (specials) {
    state.ids_.insert(state.ids_.end(), t.suffix_specials().begin(), t.suffix_specials().end());
    state.ends_.insert(state.ends_.end(), n_suffix, static_cast<uint32_t>(state.text_.size()));
  }
  out.path = widenings == 0 ? RepairPath::kFirstTry : RepairPath::kWidened;
  out.widenings = widenings;
  out.sync_point = p;
  out.kept_tokens = keep;
  out.fresh_tokens = state.ids_.size() - keep;
  return out;
}

size_t CommonPrefixLength(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  // memcmp skips equal blocks fast (the usual case: a long unchanged
  // prefix); words then find the byte (memcmp does not tell where).
  constexpr size_t kBlock = 4096;
  while (i + kBlock <= n && std::memcmp(a.data() + i, b.data() + i, kBlock) == 0) i += kBlock;
  while (i + 8 <= n) {
    uint64_t x, y;
    std::memcpy(&x, a.data() + i, 8);
    std::memcpy(&y, b.data() + i, 8);
    if (x != y) return i + static_cast<size_t>(__builtin_ctzll(x ^ y) / 8);
    i += 8;
  }
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace toktier::core
