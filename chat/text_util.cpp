#include "chat/text_util.h"

#include "chat/error.h"

namespace toktier::chat {

uint32_t DecodeUtf8(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) -> int {
    if (i + k >= s.size()) return -1;
    auto b = static_cast<unsigned char>(s[i + k]);
    return (b & 0xC0) == 0x80 ? (b & 0x3F) : -1;
  };
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0) {
    int c1 = cont(1);
    if (c1 >= 0) {
      *len = 2;
      return ((b0 & 0x1F) << 6) | c1;
    }
  } else if ((b0 & 0xF0) == 0xE0) {
    int c1 = cont(1), c2 = cont(2);
    if (c1 >= 0 && c2 >= 0) {
      *len = 3;
      return ((b0 & 0x0F) << 12) | (c1 << 6) | c2;
    }
  } else if ((b0 & 0xF8) == 0xF0) {
    int c1 = cont(1), c2 = cont(2), c3 = cont(3);
    if (c1 >= 0 && c2 >= 0 && c3 >= 0) {
      *len = 4;
      return ((b0 & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3;
    }
  }
  *len = 1;
  return 0xFFFD;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsJsWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20:
    case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
    case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

size_t WhitespaceRunFrom(std::string_view s, size_t i) {
  size_t start = i;
  while (i < s.size()) {
    size_t len;
    if (!IsJsWhitespace(DecodeUtf8(s, i, &len))) break;
    i += len;
  }
  return i - start;
}

size_t WhitespaceRunBefore(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    // Step back to the start of the previous character.
    size_t j = i - 1;
    while (j > 0 && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80 && i - j < 4) --j;
    size_t len;
    uint32_t cp = DecodeUtf8(s, j, &len);
    if (j + len != i || !IsJsWhitespace(cp)) break;
    i = j;
  }
  return end - i;
}

std::string_view TrimStartJs(std::string_view s) { return s.substr(WhitespaceRunFrom(s, 0)); }
std::string_view TrimEndJs(std::string_view s) { return s.substr(0, s.size() - WhitespaceRunBefore(s, s.size())); }
std::string_view TrimJs(std::string_view s) { return TrimEndJs(TrimStartJs(s)); }

size_t Utf16Length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    uint32_t cp = DecodeUtf8(s, i, &len);
    n += cp >= 0x10000 ? 2 : 1;
    i += len;
  }
  return n;
}

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    size_t len;
    DecodeUtf8(s, i, &len);
    ++n;
    i += len;
  }
  return n;
}

namespace {

// True for characters that certainly have no case mapping, so ASCII-only
// mapping is exact around them: CJK, kana, hangul, symbols, emoji, and the
// punctuation/format blocks. Anything else non-ASCII is refused.
bool CaselessNonAscii(uint32_t cp) {
  return (cp >= 0x2000 && cp <= 0x206F) ||   // general punctuation
         (cp >= 0x2190 && cp <= 0x23FF) ||   // arrows, math operators, technical
         (cp >= 0x2500 && cp <= 0x2BFF) ||   // boxes, shapes, symbols, dingbats
         (cp >= 0x3000 && cp <= 0x9FFF) ||   // CJK symbols, kana, CJK ideographs
         (cp >= 0xAC00 && cp <= 0xD7AF) ||   // hangul syllables
         (cp >= 0xF900 && cp <= 0xFAFF) ||   // CJK compatibility ideographs
         (cp >= 0xFE30 && cp <= 0xFE4F) ||   // CJK compatibility forms
         (cp >= 0x1F000 && cp <= 0x1FAFF) || // emoji and pictographs
         (cp >= 0x20000 && cp <= 0x3FFFF) || // CJK extensions
         cp == 0xA0 || cp == 0xFEFF || cp == 0xFFFD;
}

template <typename MapAscii>
std::string MapCase(std::string_view s, MapAscii map_ascii, const char* what) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(map_ascii(c));
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp = DecodeUtf8(s, i, &len);
    if (!CaselessNonAscii(cp)) FailUnsupported(std::string(what) + " of non-ASCII letters");
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace

std::string ToUpperJs(std::string_view s) {
  return MapCase(s, [](unsigned char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c); }, "upper-casing");
}
std::string ToLowerJs(std::string_view s) {
  return MapCase(s, [](unsigned char c) { return static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c); }, "lower-casing");
}

}  // namespace toktier::chat
