// Private to core/: which known pre-tokenizer family a step list is, for the
// hand-written scanners in family_scanners.cpp (MakeFamilyScanner is the
// public entry, in pretokenizer.h). Exposed for tests and diagnostics.
#pragma once

#include <string_view>
#include <vector>

#include "core/pretokenizer.h"

namespace toktier::core {

enum class PatternFamily { kNone, kGpt2, kCl100k, kQwen2, kO200k, kDeepSeekV3 };

// The family that `steps` are exactly (pattern strings compared verbatim,
// behaviours checked); kNone otherwise. ByteLevel steps with use_regex=false
// do not split and are ignored.
PatternFamily DetectFamily(const std::vector<PreTokenizerStep>& steps);

std::string_view FamilyName(PatternFamily f);

// The scanners' class bits of a code point (the same bits as core.h's
// DeviceClassBits, which core/device_export.cpp exports from this function).
uint32_t ScannerClassOf(char32_t cp);

// The exact pattern strings of the known families (as tokenizer.json holds
// them after JSON decoding; DeepSeek-V3's third pattern has literal CR/LF in
// its character classes there).
namespace family_patterns {
inline constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kCl100k =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kDeepSeekDigits = R"(\p{N}{1,3})";
// [一-龥぀-ゟ゠-ヿ]+ : U+4E00-U+9FA5, U+3040-U+309F, U+30A0-U+30FF.
inline constexpr std::string_view kDeepSeekCjk =
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+";
inline constexpr std::string_view kDeepSeekMain =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}"
    "\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";
}  // namespace family_patterns

}  // namespace toktier::core
