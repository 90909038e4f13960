#include "core/byte_level.h"

#include "core/unicode.h"

namespace toktier::core::byte_level {
namespace {

// Inverse map from code point (< 0x144) to byte; -1 where not in the alphabet.
struct InverseTable {
  std::array<int16_t, 0x144> byte_of{};
  InverseTable() {
    byte_of.fill(-1);
    for (int b = 0; b < 256; ++b) byte_of[ByteToCodePoint(static_cast<uint8_t>(b))] = static_cast<int16_t>(b);
  }
};

const InverseTable& Inverse() {
  static const InverseTable table;
  return table;
}

}  // namespace

std::optional<std::string> DecodeVocabString(std::string_view s) {
  const auto& inv = Inverse();
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    char32_t cp = unicode::DecodeAt(s, i, &len);
    if (cp >= inv.byte_of.size() || inv.byte_of[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(inv.byte_of[cp]));
    i += len;
  }
  return out;
}

}  // namespace toktier::core::byte_level
