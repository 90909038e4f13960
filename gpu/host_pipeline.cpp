// The host driver of the device pipeline: the same bodies as the kernels
// (gpu/device_logic.h), each grid run as a loop, and the compactions as
// loops (on the device they are CUB's DeviceSelect::Flagged).
#include "gpu/host_pipeline.h"

#include <algorithm>

namespace toktier::gpu {
namespace {

size_t PowerOfTwoAtLeast(size_t n) {
  size_t cap = 16;
  while (cap < n) cap <<= 1;
  return cap;
}

const core::DeviceClassTable& ClassTable() {
  static const core::DeviceClassTable table = core::ExportDeviceClassTable();
  return table;
}

// Positions i in [0, n) with flag[i] != 0, in order.
void Compact(const uint8_t* flag, uint32_t n, std::vector<uint32_t>& out) {
  out.clear();
  for (uint32_t i = 0; i < n; ++i) {
    if (flag[i]) out.push_back(i);
  }
}

struct Scratch {
  std::vector<uint8_t> kind, span_flag, piece_flag, token_flag;
  std::vector<uint32_t> tid, spans, pieces, tokens;
  logic::Request Init(std::string_view text) {
    const size_t n = text.size();
    kind.assign(n, 0);
    span_flag.assign(n, 0);
    piece_flag.assign(n, 0);
    token_flag.assign(n, 0);
    tid.assign(n, 0);
    return logic::Request{reinterpret_cast<const uint8_t*>(text.data()), static_cast<uint32_t>(n), kind.data(),
                          span_flag.data(),  piece_flag.data(), token_flag.data(), tid.data()};
  }
};

// Kernels 1-3 (segments, span flags, spans split into pieces) and the two
// compactions between them.
void PreTokenize(const logic::Tables& tb, const logic::Request& r, const std::vector<logic::Segment>& segs,
                 Scratch& s) {
  for (const logic::Segment& seg : segs) logic::MarkSegmentBody(r, seg);
  for (uint32_t i = 0; i < r.n; ++i) r.span_flag[i] = logic::SpanFlagBody(r, tb, i);
  Compact(r.span_flag, r.n, s.spans);
  const auto nspans = static_cast<uint32_t>(s.spans.size());
  for (uint32_t k = 0; k < nspans; ++k) logic::SplitSpanBody(r, tb, s.spans.data(), nspans, k);
  Compact(r.piece_flag, r.n, s.pieces);
}

}  // namespace

HostTables HostTables::Build(const core::Tokenizer& tok) {
  HostTables t;
  t.export_ = core::ExportDeviceTables(tok);
  const core::DeviceClassTable& cls = ClassTable();
  t.block_of = cls.block_of;
  t.blocks = cls.blocks;
  if (!t.export_.supported) return t;
  std::copy(std::begin(t.export_.byte_ids), std::end(t.export_.byte_ids), t.byte_ids);
  // Merges: MergeMap's open addressing (hash, probing, lowest rank kept).
  const auto& merges = t.export_.merges;
  t.merge_slots.assign(PowerOfTwoAtLeast(merges.size() * 2), logic::MergeSlot{0, logic::kNoRank, 0});
  const uint64_t mmask = t.merge_slots.size() - 1;
  for (const core::DeviceMerge& m : merges) {
    const uint64_t key = (static_cast<uint64_t>(m.left) << 32) | m.right;
    for (uint64_t i = logic::MixKey(key) & mmask;; i = (i + 1) & mmask) {
      logic::MergeSlot& s = t.merge_slots[i];
      if (s.rank == logic::kNoRank) {
        s = logic::MergeSlot{key, m.rank, m.id};
        break;
      }
      if (s.key == key) {
        if (m.rank < s.rank) s = logic::MergeSlot{key, m.rank, m.id};
        break;
      }
    }
  }
  // Whole-piece tokens.
  size_t count = 0;
  for (uint8_t w : t.export_.whole_piece) count += w;
  t.vocab_slots.assign(PowerOfTwoAtLeast(count * 2), logic::VocabSlot{0, 0, 0, logic::kMissing, 0});
  const uint64_t vmask = t.vocab_slots.size() - 1;
  for (size_t id = 0; id < t.export_.tokens.size(); ++id) {
    if (!t.export_.whole_piece[id]) continue;
    const std::string& b = t.export_.tokens[id];
    const auto* p = reinterpret_cast<const uint8_t*>(b.data());
    const uint64_t h = logic::HashBytes(p, static_cast<uint32_t>(b.size()));
    for (uint64_t i = h & vmask;; i = (i + 1) & vmask) {
      logic::VocabSlot& s = t.vocab_slots[i];
      if (s.id == logic::kMissing) {
        s = logic::VocabSlot{h, static_cast<uint32_t>(t.arena.size()), static_cast<uint32_t>(b.size()),
                             static_cast<uint32_t>(id), 0};
        t.arena.insert(t.arena.end(), p, p + b.size());
        break;
      }
    }
    t.max_whole_len = std::max<uint32_t>(t.max_whole_len, static_cast<uint32_t>(b.size()));
  }
  if (t.arena.empty()) t.arena.push_back(0);
  return t;
}

logic::Tables HostTables::View() const {
  logic::Tables v{};
  v.cls = logic::ClassView{block_of.data(), blocks.data()};
  v.merges = logic::MergeView{merge_slots.data(), merge_slots.empty() ? 0 : merge_slots.size() - 1};
  v.vocab = logic::VocabView{vocab_slots.data(), vocab_slots.empty() ? 0 : vocab_slots.size() - 1, arena.data(),
                             max_whole_len};
  v.byte_ids = byte_ids;
  v.family = static_cast<uint8_t>(export_.family);
  return v;
}

std::vector<logic::Segment> PackSegments(const std::vector<core::DeviceSegment>& segs) {
  std::vector<logic::Segment> out;
  out.reserve(segs.size());
  for (const auto& s : segs) out.push_back(logic::Segment{s.begin, s.end, s.is_added ? 1u : 0u, s.id});
  return out;
}

size_t RunHostPipeline(const HostTables& t, std::string_view text, const std::vector<logic::Segment>& segs,
                       std::vector<uint32_t>& ids, std::vector<uint32_t>& ends) {
  const logic::Tables tb = t.View();
  Scratch s;
  const logic::Request r = s.Init(text);
  PreTokenize(tb, r, segs, s);
  const auto npieces = static_cast<uint32_t>(s.pieces.size());
  size_t long_pieces = 0;
  for (uint32_t k = 0; k < npieces; ++k) long_pieces += logic::BpePieceBody(r, tb, s.pieces.data(), npieces, k);
  Compact(r.token_flag, r.n, s.tokens);
  const auto ntok = static_cast<uint32_t>(s.tokens.size());
  ids.resize(ntok);
  ends.resize(ntok);
  for (uint32_t k = 0; k < ntok; ++k) logic::EmitTokenBody(r, s.tokens.data(), ntok, k, ids.data(), ends.data());
  return long_pieces;
}

namespace {
void OneSegment(const HostTables& t, std::string_view segment, Scratch& s) {
  const logic::Request r = s.Init(segment);
  std::vector<logic::Segment> segs;
  if (!segment.empty()) segs.push_back(logic::Segment{0, static_cast<uint32_t>(segment.size()), 0, 0});
  PreTokenize(t.View(), r, segs, s);
}
}  // namespace

void HostPieceStarts(const HostTables& t, std::string_view segment, std::vector<uint32_t>& starts) {
  Scratch s;
  OneSegment(t, segment, s);
  starts = s.pieces;
}

void HostSpanStarts(const HostTables& t, std::string_view segment, std::vector<uint32_t>& starts) {
  Scratch s;
  OneSegment(t, segment, s);
  starts = s.spans;
}

}  // namespace toktier::gpu
