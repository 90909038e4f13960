// GPT-2's byte-level alphabet: each byte is shown as one printable code point
// in vocabulary files. toktier works on raw bytes, so vocab keys of byte-level
// models are mapped back through this table when loading.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace toktier::core::byte_level {

// Code point that stands for byte b.
inline char32_t ByteToCodePoint(uint8_t b) {
  if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
  // The remaining 68 bytes map, in order, to U+0100.. .
  int n = 0;
  for (int x = 0; x < b; ++x) {
    bool printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE);
    if (!printable) ++n;
  }
  return 0x100 + n;
}

// Decodes a vocabulary string written in the byte-level alphabet to raw bytes;
// nullopt if it contains a code point outside the alphabet.
std::optional<std::string> DecodeVocabString(std::string_view s);

}  // namespace toktier::core::byte_level
