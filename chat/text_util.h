// Private: the JavaScript string semantics the reference renderer has
// (it runs on JS strings): whitespace as /\s/ and String.prototype.trim see
// it, UTF-16 lengths, ASCII-only \w.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace toktier::chat {

// Decodes the UTF-8 character at s[i]; *len gets its byte length (1 for an
// invalid byte, which then decodes as U+FFFD).
uint32_t DecodeUtf8(std::string_view s, size_t i, size_t* len);
void AppendUtf8(uint32_t cp, std::string* out);

// JS /\s/ and trim(): ASCII whitespace, NBSP, U+1680, U+2000-200A, line and
// paragraph separators, U+202F, U+205F, U+3000, BOM.
bool IsJsWhitespace(uint32_t cp);
// Byte length of the JS whitespace run starting at / ending at i.
size_t WhitespaceRunFrom(std::string_view s, size_t i);
size_t WhitespaceRunBefore(std::string_view s, size_t end);

std::string_view TrimJs(std::string_view s);
std::string_view TrimStartJs(std::string_view s);
std::string_view TrimEndJs(std::string_view s);

inline bool IsAsciiWord(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
inline bool IsAsciiDigit(unsigned char c) { return c >= '0' && c <= '9'; }

// String.prototype.length: UTF-16 code units.
size_t Utf16Length(std::string_view s);
// Code-point boundaries (Array.from(string) splits a string this way).
size_t CountCodePoints(std::string_view s);

// JS toUpperCase/toLowerCase. Only ASCII letters are mapped here; any other
// character that has a case mapping would need Unicode tables, so a string
// containing a non-ASCII letter is reported as unsupported (never a wrong
// prompt).
std::string ToUpperJs(std::string_view s);
std::string ToLowerJs(std::string_view s);

}  // namespace toktier::chat
