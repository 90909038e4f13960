#include "store/record_format.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace toktier::store::format {
namespace {

void PutU8(std::string& s, uint8_t v) { s.push_back(static_cast<char>(v)); }
void PutU32(std::string& s, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);  // little-endian hosts only (x86-64, aarch64)
  s.append(b, 4);
}
void PutU64(std::string& s, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  s.append(b, 8);
}
void PutBE32(std::string& s, uint32_t v) {
  for (int sh = 24; sh >= 0; sh -= 8) s.push_back(static_cast<char>((v >> sh) & 0xff));
}
void PutVarint(std::string& s, uint32_t v) {
  while (v >= 0x80) {
    s.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  s.push_back(static_cast<char>(v));
}

struct Reader {
  const unsigned char* p;
  const unsigned char* end;
  bool ok = true;
  size_t left() const { return static_cast<size_t>(end - p); }
  uint8_t U8() {
    if (left() < 1) return ok = false, 0;
    return *p++;
  }
  uint32_t U32() {
    if (left() < 4) return ok = false, 0;
    uint32_t v;
    std::memcpy(&v, p, 4);
    p += 4;
    return v;
  }
  uint64_t U64() {
    if (left() < 8) return ok = false, 0;
    uint64_t v;
    std::memcpy(&v, p, 8);
    p += 8;
    return v;
  }
  uint32_t Varint() {
    uint32_t v = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
      if (p >= end) return ok = false, 0;
      uint8_t b = *p++;
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
};

constexpr uint8_t kMagic = 'T';
constexpr uint8_t kFormat = 1;      // chunks; metas without a tag
constexpr uint8_t kMetaFormat = 2;  // metas with a tag

// Checks the trailing checksum (seeded) and returns the body without it.
bool SplitChecksum(std::string_view value, uint64_t seed, std::string_view* body) {
  if (value.size() < 8) return false;
  uint64_t stored;
  std::memcpy(&stored, value.data() + value.size() - 8, 8);
  *body = value.substr(0, value.size() - 8);
  return XXH3_64bits_withSeed(body->data(), body->size(), seed) == stored;
}

}  // namespace

std::string StorageKey(std::string_view session_key) {
  if (session_key.size() <= kMaxRawKey) return std::string(session_key);
  XXH128_hash_t h = XXH3_128bits(session_key.data(), session_key.size());
  std::string k(1, '\x01');
  PutU64(k, h.high64);
  PutU64(k, h.low64);
  return k;
}

std::string MetaKey(std::string_view k) {
  std::string s;
  s.reserve(1 + k.size());
  s.push_back('M');
  s.append(k);
  return s;
}

bool ParseMetaKey(std::string_view meta_key, std::string* k) {
  if (meta_key.empty() || meta_key[0] != 'M') return false;
  k->assign(meta_key.substr(1));
  return true;
}

std::string ChunkRangeBegin(std::string_view k) { return ChunkKey(k, 0); }

std::string ChunkKey(std::string_view k, uint32_t index) {
  std::string s;
  s.reserve(7 + k.size());
  s.push_back('C');
  s.push_back(static_cast<char>((k.size() >> 8) & 0xff));
  s.push_back(static_cast<char>(k.size() & 0xff));
  s.append(k);
  PutBE32(s, index);
  return s;
}

std::string ChunkRangeEnd(std::string_view k) {
  std::string s = ChunkKey(k, 0);
  s.resize(s.size() - 4);
  s.append(5, '\xff');  // sorts after every 4-byte index
  return s;
}

uint64_t ChainSeed(std::string_view k) { return XXH3_64bits_withSeed(k.data(), k.size(), 0x746f6b74696572ull); }

std::string EncodeMeta(std::string_view k, const Meta& m) {
  std::string s;
  const size_t tag_len = std::min(m.tag.size(), kMaxTag);
  s.reserve(64 + m.version_hash.size() + tag_len);
  PutU8(s, kMagic);
  PutU8(s, 'M');
  PutU8(s, kMetaFormat);
  PutU8(s, m.add_special ? 1 : 0);
  PutU32(s, m.n_chunks);
  PutU32(s, m.n_tokens);
  PutU32(s, m.n_text);
  PutU32(s, m.n_spans);
  PutU64(s, m.stored_bytes);
  PutU64(s, static_cast<uint64_t>(m.write_time_ms));
  PutU64(s, m.last_chain);
  PutU8(s, static_cast<uint8_t>(std::min<size_t>(m.version_hash.size(), 255)));
  s.append(m.version_hash.data(), std::min<size_t>(m.version_hash.size(), 255));
  PutU32(s, static_cast<uint32_t>(tag_len));
  s.append(m.tag.data(), tag_len);
  PutU64(s, XXH3_64bits_withSeed(s.data(), s.size(), ChainSeed(k)));
  return s;
}

bool DecodeMeta(std::string_view k, std::string_view value, Meta* m) {
  std::string_view body;
  if (!SplitChecksum(value, ChainSeed(k), &body)) return false;
  Reader r{reinterpret_cast<const unsigned char*>(body.data()),
           reinterpret_cast<const unsigned char*>(body.data() + body.size())};
  if (r.U8() != kMagic || r.U8() != 'M') return false;
  const uint8_t format = r.U8();
  if (format != kFormat && format != kMetaFormat) return false;
  uint8_t flags = r.U8();
  if (flags > 1) return false;
  m->add_special = flags & 1;
  m->n_chunks = r.U32();
  m->n_tokens = r.U32();
  m->n_text = r.U32();
  m->n_spans = r.U32();
  m->stored_bytes = r.U64();
  m->write_time_ms = static_cast<int64_t>(r.U64());
  m->last_chain = r.U64();
  uint8_t vlen = r.U8();
  m->tag.clear();
  if (format == kFormat) {
    if (!r.ok || r.left() != vlen) return false;
    m->version_hash.assign(reinterpret_cast<const char*>(r.p), vlen);
    return true;
  }
  if (!r.ok || r.left() < vlen) return false;
  m->version_hash.assign(reinterpret_cast<const char*>(r.p), vlen);
  r.p += vlen;
  uint32_t tlen = r.U32();
  if (!r.ok || tlen > kMaxTag || r.left() != tlen) return false;
  m->tag.assign(reinterpret_cast<const char*>(r.p), tlen);
  return true;
}

size_t EncodeDelta(std::string_view k, const core::TokenState& state, size_t first_token, size_t chunk_bytes,
                   uint32_t* next_index, uint64_t* chain, std::vector<EncodedChunk>* out) {
  const auto& ids = state.ids();
  const auto& ends = state.ends();
  const auto& spans = state.added_spans();
  const std::string& text = state.text();
  const size_t n = ids.size();
  first_token = std::min(first_token, n);
  if (chunk_bytes == 0) chunk_bytes = 1;
  size_t tok = first_token;
  uint32_t text_pos = tok ? ends[tok - 1] : 0;
  // Spans ending before text_pos are untouched by the edit; the rest follow.
  size_t span = static_cast<size_t>(
      std::lower_bound(spans.begin(), spans.end(), text_pos,
                       [](const core::TextSpan& s, uint32_t v) { return s.end < v; }) -
      spans.begin());
  size_t stored = 0;
  bool first = true;
  while (first || tok < n) {
    first = false;
    // Tokens of this chunk: at least one, until chunk_bytes of text.
    size_t end_tok = tok;
    while (end_tok < n && (end_tok == tok || ends[end_tok] - text_pos < chunk_bytes)) ++end_tok;
    bool last = end_tok == n;
    uint32_t text_end = last ? static_cast<uint32_t>(text.size()) : ends[end_tok - 1];
    size_t end_span = span;
    while (end_span < spans.size() && (last || spans[end_span].end < text_end)) ++end_span;

    std::string v;
    v.reserve(48 + (end_tok - tok) * 4 + (text_end - text_pos) + (end_span - span) * 6);
    PutU8(v, kMagic);
    PutU8(v, 'C');
    PutU8(v, kFormat);
    PutU8(v, 0);
    PutU32(v, *next_index);
    PutU32(v, static_cast<uint32_t>(tok));
    PutU32(v, text_pos);
    PutU32(v, static_cast<uint32_t>(span));
    PutU32(v, static_cast<uint32_t>(end_tok - tok));
    PutU32(v, text_end - text_pos);
    PutU32(v, static_cast<uint32_t>(end_span - span));
    for (size_t i = tok; i < end_tok; ++i) PutVarint(v, ids[i]);
    uint32_t prev = text_pos;
    for (size_t i = tok; i < end_tok; ++i) {
      PutVarint(v, ends[i] - prev);
      prev = ends[i];
    }
    for (size_t i = span; i < end_span; ++i) {
      PutVarint(v, spans[i].begin);
      PutVarint(v, spans[i].end - spans[i].begin);
    }
    v.append(text, text_pos, text_end - text_pos);
    uint64_t sum = XXH3_64bits_withSeed(v.data(), v.size(), *chain);
    PutU64(v, sum);
    *chain = sum;
    out->push_back({*next_index, std::move(v)});
    ++*next_index;
    stored += text_end - text_pos;
    tok = end_tok;
    text_pos = text_end;
    span = end_span;
  }
  return stored;
}

bool ApplyChunk(std::string_view k, uint32_t index, std::string_view value, Accumulator* acc) {
  std::string_view body;
  if (!SplitChecksum(value, acc->chain, &body)) return false;
  Reader r{reinterpret_cast<const unsigned char*>(body.data()),
           reinterpret_cast<const unsigned char*>(body.data() + body.size())};
  if (r.U8() != kMagic || r.U8() != 'C' || r.U8() != kFormat) return false;
  r.U8();
  if (r.U32() != index) return false;
  uint32_t base_tok = r.U32(), base_text = r.U32(), base_span = r.U32();
  uint32_t n_tok = r.U32(), n_text = r.U32(), n_span = r.U32();
  if (!r.ok) return false;
  if (base_tok > acc->ids.size() || base_text > acc->text.size() || base_span > acc->spans.size()) return false;
  if (base_text != (base_tok ? acc->ends[base_tok - 1] : 0u)) return false;
  // Each token needs at least two bytes (id + end varints), each span two.
  if (static_cast<uint64_t>(n_tok) * 2 + static_cast<uint64_t>(n_span) * 2 + n_text > r.left()) return false;
  acc->ids.resize(base_tok);
  acc->ends.resize(base_tok);
  acc->text.resize(base_text);
  acc->spans.resize(base_span);
  acc->ids.reserve(base_tok + n_tok);
  acc->ends.reserve(base_tok + n_tok);
  for (uint32_t i = 0; i < n_tok; ++i) acc->ids.push_back(r.Varint());
  uint64_t pos = base_text;
  const uint64_t limit = static_cast<uint64_t>(base_text) + n_text;
  for (uint32_t i = 0; i < n_tok; ++i) {
    pos += r.Varint();
    if (pos > limit) return false;
    acc->ends.push_back(static_cast<uint32_t>(pos));
  }
  for (uint32_t i = 0; i < n_span; ++i) {
    uint32_t b = r.Varint();
    uint64_t e = static_cast<uint64_t>(b) + r.Varint();
    if (e > limit) return false;
    acc->spans.push_back({b, static_cast<uint32_t>(e)});
  }
  if (!r.ok || r.left() != n_text) return false;
  acc->text.append(reinterpret_cast<const char*>(r.p), n_text);
  acc->stored_bytes += n_text;
  uint64_t sum;
  std::memcpy(&sum, value.data() + value.size() - 8, 8);
  acc->chain = sum;
  return true;
}

}  // namespace toktier::store::format
