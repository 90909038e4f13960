// Lookup of the probed reference Unicode classes (see unicode.h and
// tools/gen_unicode_tables.js). Layout: ASCII is a direct table; everything
// else is a two-stage table (block index per 128 code points, then one palette
// index byte per code point), so a lookup is three dependent loads.
#include "core/unicode.h"

#include <array>
#include <cstring>
#include <map>
#include <vector>

namespace toktier::core::unicode {
namespace {

#include "core/unicode_tables.inc"

constexpr uint32_t kMaxCp = 0x10FFFF;
constexpr uint32_t kBlockShift = 7;
constexpr uint32_t kBlockSize = 1u << kBlockShift;
constexpr uint32_t kNumBlocks = (kMaxCp + 1) >> kBlockShift;

template <size_t N>
constexpr std::array<uint16_t, 128> AsciiTable(const UnicodeRange (&r)[N]) {
  std::array<uint16_t, 128> t{};
  for (const auto& e : r) {
    for (uint32_t c = e.first; c <= e.last && c < 128; ++c) t[c] = e.bits;
  }
  return t;
}

constexpr auto kHfAscii = AsciiTable(kHfRanges);
constexpr auto kTtAscii = AsciiTable(kTiktokenRanges);

class Lookup {
 public:
  explicit Lookup(std::span<const UnicodeRange> ranges) {
    std::vector<uint16_t> bits(kMaxCp + 1, 0);
    for (const auto& e : ranges) {
      for (uint32_t c = e.first; c <= e.last; ++c) bits[c] = e.bits;
    }
    std::map<uint16_t, uint8_t> pal_index;
    palette_.push_back(0);
    pal_index[0] = 0;
    std::map<std::vector<uint8_t>, uint16_t> block_index;
    std::vector<uint8_t> block(kBlockSize);
    stage1_.resize(kNumBlocks);
    for (uint32_t b = 0; b < kNumBlocks; ++b) {
      for (uint32_t i = 0; i < kBlockSize; ++i) {
        uint16_t v = bits[(b << kBlockShift) | i];
        auto it = pal_index.find(v);
        if (it == pal_index.end()) {
          it = pal_index.emplace(v, static_cast<uint8_t>(palette_.size())).first;
          palette_.push_back(v);
        }
        block[i] = it->second;
      }
      auto it = block_index.find(block);
      if (it == block_index.end()) {
        it = block_index.emplace(block, static_cast<uint16_t>(stage2_.size() / kBlockSize)).first;
        stage2_.insert(stage2_.end(), block.begin(), block.end());
      }
      stage1_[b] = it->second;
    }
    // The palette must fit in a byte (it does by a wide margin: ~60 masks).
    if (palette_.size() > 256) __builtin_trap();
  }

  uint16_t Get(char32_t cp) const {
    if (cp > kMaxCp) return 0;
    return palette_[stage2_[(static_cast<uint32_t>(stage1_[cp >> kBlockShift]) << kBlockShift) |
                            (cp & (kBlockSize - 1))]];
  }

 private:
  std::vector<uint16_t> stage1_;
  std::vector<uint8_t> stage2_;
  std::vector<uint16_t> palette_;
};

const Lookup& HfLookup() {
  static const Lookup l(kHfRanges);
  return l;
}
const Lookup& TtLookup() {
  static const Lookup l(kTiktokenRanges);
  return l;
}

}  // namespace

uint16_t Classes(char32_t cp) {
  if (cp < 128) return kHfAscii[cp];
  return HfLookup().Get(cp);
}

uint16_t Classes(char32_t cp, Tables tables) {
  if (tables == Tables::kHuggingFace) return Classes(cp);
  if (cp < 128) return kTtAscii[cp];
  return TtLookup().Get(cp);
}

std::span<const UnicodeRange> Ranges(Tables tables) {
  if (tables == Tables::kHuggingFace) return kHfRanges;
  return kTiktokenRanges;
}

}  // namespace toktier::core::unicode
