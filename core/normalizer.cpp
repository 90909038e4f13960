#include "core/normalizer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/unicode.h"
#include "core/unicode_norm.h"

namespace toktier::core {
namespace {

bool IsAscii(std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
  }
  return true;
}

unicode::Form UnicodeFormOf(NormalizerOp::Kind k) {
  switch (k) {
    case NormalizerOp::Kind::kNFD: return unicode::Form::kNFD;
    case NormalizerOp::Kind::kNFKC: return unicode::Form::kNFKC;
    case NormalizerOp::Kind::kNFKD: return unicode::Form::kNFKD;
    default: return unicode::Form::kNFC;
  }
}

bool IsUnicodeForm(NormalizerOp::Kind k) {
  return k == NormalizerOp::Kind::kNFC || k == NormalizerOp::Kind::kNFD ||
         k == NormalizerOp::Kind::kNFKC || k == NormalizerOp::Kind::kNFKD;
}

// Appends `piece` (source offsets [src_begin, src_end)) rewritten as `rewritten`.
void EmitRewritten(std::string_view rewritten, uint32_t src_begin, uint32_t src_end,
                   std::string& out, std::vector<uint32_t>& align) {
  for (size_t k = 0; k < rewritten.size(); ++k) align.push_back(k == 0 ? src_begin : src_end);
  out.append(rewritten);
}

void EmitIdentity(std::string_view s, uint32_t src_begin, std::string& out, std::vector<uint32_t>& align) {
  for (size_t k = 0; k < s.size(); ++k) align.push_back(src_begin + static_cast<uint32_t>(k));
  out.append(s);
}

// Unicode normalization forms in chunks that start at ASCII characters: an
// ASCII character never composes with what precedes it and has combining class
// 0, so nothing reorders or composes across the start of a chunk (asserted for
// the reference's tables by tools/gen_norm_tables.js). The forms follow the
// reference's Unicode data (core/unicode_norm.h), not utf8proc's.
void ApplyUnicodeForm(NormalizerOp::Kind kind, std::string_view in, std::string& out,
                      std::vector<uint32_t>& align) {
  if (IsAscii(in)) {
    EmitIdentity(in, 0, out, align);
    return;
  }
  size_t i = 0;
  while (i < in.size()) {
    // An ASCII run, copied as is (but its last char may start a chunk with marks).
    size_t j = i;
    while (j < in.size() && static_cast<unsigned char>(in[j]) < 0x80) ++j;
    size_t chunk_begin = j > i ? j - 1 : i;
    if (chunk_begin > i) EmitIdentity(in.substr(i, chunk_begin - i), static_cast<uint32_t>(i), out, align);
    if (j == in.size()) {
      EmitIdentity(in.substr(chunk_begin, j - chunk_begin), static_cast<uint32_t>(chunk_begin), out, align);
      break;
    }
    size_t k = j;
    while (k < in.size() && static_cast<unsigned char>(in[k]) >= 0x80) ++k;
    std::string_view chunk = in.substr(chunk_begin, k - chunk_begin);
    std::string res;
    if (unicode::IsNormalizedQuick(UnicodeFormOf(kind), chunk)) {
      EmitIdentity(chunk, static_cast<uint32_t>(chunk_begin), out, align);
    } else if (!unicode::NormalizeForm(UnicodeFormOf(kind), chunk, &res)) {
      // Only on invalid UTF-8, which callers reject before encoding.
      EmitIdentity(chunk, static_cast<uint32_t>(chunk_begin), out, align);
    } else if (res == chunk) {
      EmitIdentity(chunk, static_cast<uint32_t>(chunk_begin), out, align);
    } else {
      EmitRewritten(res, static_cast<uint32_t>(chunk_begin), static_cast<uint32_t>(k), out, align);
    }
    i = k;
  }
}

// The first chunk of `in` (ApplyUnicodeForm's chunks) that the form changes,
// as {begin, end}; {npos, npos} when every chunk maps to itself. Only a chunk
// that the quick check cannot vouch for is normalized to find out.
std::pair<size_t, size_t> UnicodeFormFirstChange(NormalizerOp::Kind kind, std::string_view in) {
  const unicode::Form form = UnicodeFormOf(kind);
  const size_t n = in.size();
  std::string res;
  auto non_ascii = [&](size_t k) { return static_cast<unsigned char>(in[k]) >= 0x80; };
  // `i` is 0 or the end of a chunk (an ASCII character or n): the quick
  // check restarts there with a clean class order.
  for (size_t i = 0; i < n;) {
    size_t f = unicode::FirstQuickCheckFailure(form, in.substr(i));
    if (f == std::string_view::npos) break;
    f += i;
    size_t run_begin = f, run_end = f;
    while (run_begin > i && non_ascii(run_begin - 1)) --run_begin;
    while (run_end < n && non_ascii(run_end)) ++run_end;
    const size_t chunk_begin = run_begin > 0 ? run_begin - 1 : 0;  // the ASCII char before may compose
    const std::string_view chunk = in.substr(chunk_begin, run_end - chunk_begin);
    res.clear();
    if (!unicode::NormalizeForm(form, chunk, &res) || res != chunk) return {chunk_begin, run_end};
    i = std::max(run_end, f + 1);
  }
  return {std::string_view::npos, std::string_view::npos};
}

void ApplyReplace(const NormalizerOp& op, std::string_view in, std::string& out, std::vector<uint32_t>& align) {
  size_t i = 0;
  while (i < in.size()) {
    size_t hit = op.pattern.empty() ? std::string_view::npos : in.find(op.pattern, i);
    if (hit == std::string_view::npos) {
      EmitIdentity(in.substr(i), static_cast<uint32_t>(i), out, align);
      break;
    }
    EmitIdentity(in.substr(i, hit - i), static_cast<uint32_t>(i), out, align);
    EmitRewritten(op.content, static_cast<uint32_t>(hit), static_cast<uint32_t>(hit + op.pattern.size()), out, align);
    i = hit + op.pattern.size();
  }
}

bool IsWhite(std::string_view s, size_t i, size_t* len) {
  char32_t cp = unicode::DecodeAt(s, i, len);
  return (unicode::Classes(cp) & unicode::kWhite) != 0;
}

void ApplyStrip(const NormalizerOp& op, std::string_view in, std::string& out, std::vector<uint32_t>& align) {
  size_t b = 0, e = in.size();
  if (op.strip_left) {
    size_t len = 0;
    while (b < e && IsWhite(in, b, &len)) b += len;
  }
  if (op.strip_right) {
    while (e > b) {
      size_t start = unicode::PrevStart(in, e), len = 0;
      if (!IsWhite(in, start, &len)) break;
      e = start;
    }
  }
  EmitIdentity(in.substr(b, e - b), static_cast<uint32_t>(b), out, align);
}

}  // namespace

void Normalizer::Apply(std::string_view seg, bool segment_start, bool at_text_start, std::string& out,
                       std::vector<uint32_t>& align) const {
  out.clear();
  align.clear();
  std::string cur(seg);
  std::vector<uint32_t> cur_align(seg.size() + 1);
  for (size_t k = 0; k <= seg.size(); ++k) cur_align[k] = static_cast<uint32_t>(k);
  std::string next;
  std::vector<uint32_t> step;
  for (const NormalizerOp& op : ops_) {
    next.clear();
    step.clear();
    if (IsUnicodeForm(op.kind)) {
      ApplyUnicodeForm(op.kind, cur, next, step);
    } else if (op.kind == NormalizerOp::Kind::kReplace) {
      ApplyReplace(op, cur, next, step);
    } else if (op.kind == NormalizerOp::Kind::kPrepend) {
      if (segment_start && !cur.empty()) {
        for (size_t k = 0; k < op.content.size(); ++k) step.push_back(0);
        next.append(op.content);
      }
      EmitIdentity(cur, 0, next, step);
    } else if (op.kind == NormalizerOp::Kind::kStrip) {
      ApplyStrip(op, cur, next, step);
    } else if (op.kind == NormalizerOp::Kind::kMetaspacePrepend) {
      // Like HF's NormalizedString::prepend, nothing is added to an empty
      // segment (e.g. one a Strip emptied).
      bool prepend = segment_start && !cur.empty() && (!op.first_only || at_text_start) &&
                     std::string_view(cur).substr(0, op.content.size()) != op.content;
      if (prepend) {
        for (size_t k = 0; k < op.content.size(); ++k) step.push_back(0);
        next.append(op.content);
      }
      EmitIdentity(cur, 0, next, step);
    }
    step.push_back(static_cast<uint32_t>(cur.size()));
    // Compose: output byte -> previous string offset -> source offset.
    for (auto& a : step) a = cur_align[a];
    cur.swap(next);
    cur_align.swap(step);
  }
  out = std::move(cur);
  align = std::move(cur_align);
}

bool Normalizer::unicode_forms_only() const {
  for (const NormalizerOp& op : ops_) {
    if (!IsUnicodeForm(op.kind)) return false;
  }
  return true;
}

bool Normalizer::LeavesUnchanged(std::string_view seg) const {
  return unicode_forms_only() && FirstChange(seg).first == std::string_view::npos;
}

std::pair<size_t, size_t> Normalizer::FirstChange(std::string_view seg) const {
  // Each op sees the text unchanged by the ops before it up to the earliest
  // change found so far, so the earliest change of any op is the chain's.
  std::pair<size_t, size_t> first{std::string_view::npos, std::string_view::npos};
  for (const NormalizerOp& op : ops_) {
    if (!IsUnicodeForm(op.kind)) return {0, seg.size()};
    const size_t limit = first.first == std::string_view::npos ? seg.size() : first.second;
    const std::pair<size_t, size_t> c = UnicodeFormFirstChange(op.kind, seg.substr(0, limit));
    if (c.first < first.first) first = c;
  }
  return first;
}

bool Normalizer::IsBoundary(std::string_view text, size_t p) const {
  if (p >= text.size()) return true;
  // A split point of the whole chain: each op must split the text IT sees at
  // the image of p. Prepend and Metaspace's prefix act at a segment start
  // only (the right side is a continuation); a one-character Replace is
  // pointwise; Strip depends on the segment end; a Unicode form splits
  // before an ASCII character (combining class 0, never the second element
  // of a composition), which must therefore be ASCII in that op's input.
  bool unicode_seen = false, replace_seen = false, chained = false;
  for (const NormalizerOp& op : ops_) {
    if (IsUnicodeForm(op.kind)) {
      if (unicode_seen || replace_seen) chained = true;
      unicode_seen = true;
    } else if (op.kind == NormalizerOp::Kind::kReplace) {
      // A longer pattern could straddle p; its matches depend on the text
      // before p as this op sees it. Not certified.
      if (op.pattern.empty()) continue;
      size_t len = 0;
      unicode::DecodeAt(op.pattern, 0, &len);
      if (len != op.pattern.size()) return false;
      replace_seen = true;
    } else if (op.kind == NormalizerOp::Kind::kStrip) {
      return false;
    }
  }
  if (!unicode_seen) return true;
  // One Unicode form, not preceded by a Replace: it sees the source text.
  if (!chained) return static_cast<unsigned char>(text[p]) < 0x80;
  return JunctionStaysAscii(text, p);
}

bool Normalizer::JunctionStaysAscii(std::string_view text, size_t p) const {
  // Run the chain on a short window of the right side (a continuation) and
  // check each Unicode form's first input character. `exact` counts the
  // leading bytes known to equal the true text at that stage: the window is
  // cut short, and a Unicode form's last chunk in it may normalize
  // differently once the rest follows. A chunk is complete when an ASCII
  // character follows it inside the exact part.
  constexpr size_t kWindowBytes = 64;
  size_t end = std::min(text.size(), p + kWindowBytes);
  while (end > p && end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  std::string cur(text.substr(p, end - p)), next, prefix_out;
  std::vector<uint32_t> align;
  size_t exact = cur.size();
  for (const NormalizerOp& op : ops_) {
    if (IsUnicodeForm(op.kind)) {
      if (exact == 0 || static_cast<unsigned char>(cur[0]) >= 0x80) return false;
      // The last ASCII character after the first one, inside the exact part:
      // every chunk before it is complete.
      size_t x = 0;
      for (size_t i = exact; i-- > 1;) {
        if (static_cast<unsigned char>(cur[i]) < 0x80) {
          x = i;
          break;
        }
      }
      next.clear();
      align.clear();
      ApplyUnicodeForm(op.kind, cur, next, align);
      prefix_out.clear();
      align.clear();
      ApplyUnicodeForm(op.kind, std::string_view(cur).substr(0, x), prefix_out, align);
      exact = prefix_out.size();
      cur.swap(next);
    } else if (op.kind == NormalizerOp::Kind::kReplace) {
      next.clear();
      align.clear();
      ApplyReplace(op, cur, next, align);
      prefix_out.clear();
      align.clear();
      ApplyReplace(op, std::string_view(cur).substr(0, exact), prefix_out, align);
      exact = prefix_out.size();
      cur.swap(next);
    }
  }
  return true;
}

std::string Normalizer::Describe() const {
  std::string s;
  for (const NormalizerOp& op : ops_) {
    if (!s.empty()) s += ",";
    switch (op.kind) {
      case NormalizerOp::Kind::kNFC: s += "NFC"; break;
      case NormalizerOp::Kind::kNFD: s += "NFD"; break;
      case NormalizerOp::Kind::kNFKC: s += "NFKC"; break;
      case NormalizerOp::Kind::kNFKD: s += "NFKD"; break;
      case NormalizerOp::Kind::kReplace: s += "Replace"; break;
      case NormalizerOp::Kind::kPrepend: s += "Prepend"; break;
      case NormalizerOp::Kind::kStrip: s += "Strip"; break;
      case NormalizerOp::Kind::kMetaspacePrepend: s += "MetaspacePrepend"; break;
    }
  }
  return s.empty() ? "none" : s;
}

}  // namespace toktier::core
