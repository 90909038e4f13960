#include "api/json_string.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "core/core.h"

namespace toktier::api {
namespace {

// Index of the first byte at or after i that is a backslash or a control
// character (< 0x20), or a double quote when kQuote, or raw.size().
template <bool kQuote = false>
size_t FindSpecial(std::string_view raw, size_t i) {
  const size_t n = raw.size();
  const char* p = raw.data();
#if defined(__SSE2__)
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i max_control = _mm_set1_epi8(0x1F);
  const __m128i quote = _mm_set1_epi8('"');
  while (i + 16 <= n) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    __m128i special = _mm_or_si128(_mm_cmpeq_epi8(v, backslash), _mm_cmpeq_epi8(_mm_min_epu8(v, max_control), v));
    if constexpr (kQuote) special = _mm_or_si128(special, _mm_cmpeq_epi8(v, quote));
    int mask = _mm_movemask_epi8(special);
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    i += 16;
  }
#else
  // SWAR: the lowest flagged byte of each test is exact (borrows only run
  // upwards from a true match), so the lowest bit of the union is too.
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  while (i + 8 <= n) {
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    uint64_t y = x ^ (kOnes * '\\');
    uint64_t m = ((x - kOnes * 0x20) & ~x & kHigh) | ((y - kOnes) & ~y & kHigh);
    if constexpr (kQuote) {
      uint64_t q = x ^ (kOnes * '"');
      m |= (q - kOnes) & ~q & kHigh;
    }
    if (m != 0) return i + static_cast<size_t>(__builtin_ctzll(m) / 8);
    i += 8;
  }
#endif
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '\\' || c < 0x20 || (kQuote && c == '"')) return i;
    ++i;
  }
  return n;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Four hex digits at raw[i:i+4], or -1.
int32_t Hex4(std::string_view raw, size_t i) {
  if (i + 4 > raw.size()) return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    int h = HexValue(raw[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

core::Status Fail(const char* what, size_t offset) {
  return core::Status::Error(std::string(what) + " at byte " + std::to_string(offset) + " of the prompt string");
}

}  // namespace

core::Status UnescapeJsonString(std::string_view raw, std::string* out, size_t raw_base,
                                std::vector<JsonStringCheckpoint>* checkpoints) {
  out->reserve(out->size() + raw.size());  // unescaping never grows the text
  const size_t n = raw.size();
  size_t next_checkpoint = kJsonCheckpointSpacing;
  size_t i = 0;
  for (;;) {
    const size_t j = FindSpecial(raw, i);
    // Every position in the plain run [i, j] is escape-free and maps byte
    // for byte, so checkpoints fall exactly on their multiples.
    if (checkpoints) {
      while (next_checkpoint <= j) {
        checkpoints->push_back({raw_base + next_checkpoint, out->size() + (next_checkpoint - i)});
        next_checkpoint += kJsonCheckpointSpacing;
      }
    }
    out->append(raw.data() + i, j - i);
    if (j == n) return core::Status::Ok();
    if (static_cast<unsigned char>(raw[j]) < 0x20) return Fail("unescaped control character", raw_base + j);
    if (j + 1 >= n) return Fail("truncated escape", raw_base + j);
    char e = raw[j + 1];
    i = j + 2;
    switch (e) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        int32_t u = Hex4(raw, j + 2);
        if (u < 0) return Fail("invalid \\u escape", raw_base + j);
        i = j + 6;
        uint32_t cp = static_cast<uint32_t>(u);
        if (cp >= 0xDC00 && cp <= 0xDFFF) return Fail("lone UTF-16 low surrogate", raw_base + j);
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          int32_t lo = (i + 1 < n && raw[i] == '\\' && raw[i + 1] == 'u') ? Hex4(raw, i + 2) : -1;
          if (lo < 0xDC00 || lo > 0xDFFF) return Fail("lone UTF-16 high surrogate", raw_base + j);
          cp = 0x10000 + ((cp - 0xD800) << 10) + (static_cast<uint32_t>(lo) - 0xDC00);
          i += 6;
        }
        core::AppendUtf8(cp, *out);
        break;
      }
      default:
        return Fail("invalid escape", raw_base + j);
    }
    // A checkpoint due inside the escape lands right after it.
    if (checkpoints && next_checkpoint <= i && next_checkpoint > j) {
      checkpoints->push_back({raw_base + i, out->size()});
      while (next_checkpoint <= i) next_checkpoint += kJsonCheckpointSpacing;
    }
  }
}

void AppendEscapedJsonString(std::string_view text, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->reserve(out->size() + text.size() + text.size() / 16 + 16);
  size_t i = 0;
  for (;;) {
    const size_t j = FindSpecial</*kQuote=*/true>(text, i);
    out->append(text.data() + i, j - i);
    if (j == text.size()) return;
    const unsigned char c = static_cast<unsigned char>(text[j]);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\b': out->append("\\b"); break;
      case '\f': out->append("\\f"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default: {
        const char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(u, 6);
      }
    }
    i = j + 1;
  }
}

}  // namespace toktier::api
