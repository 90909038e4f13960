// Unescaping JSON string contents (the bytes between the quotes), with
// checkpoints that let the next request of a session skip the part of its
// prompt that did not change: the I/O thread only validates the body's
// structure and UTF-8 (simdjson stage 1); the worker unescapes, and for a
// continuation only from the last checkpoint inside the unchanged raw prefix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

namespace toktier::api {

// unescape(raw[0:raw_offset]) == text[0:text_offset], and raw_offset is not
// inside an escape sequence (so any raw string sharing raw[0:raw_offset]
// unescapes to the same text prefix).
struct JsonStringCheckpoint {
  size_t raw_offset = 0;
  size_t text_offset = 0;
};

// Raw bytes between checkpoints (about; one is set at the next escape-free
// position after each multiple).
inline constexpr size_t kJsonCheckpointSpacing = 4096;

// Appends the unescaped value of `raw` to *out. raw must be valid UTF-8 (the
// caller's JSON parser checked it) and hold no unescaped '"'. Checkpoints for
// raw positions are appended to *checkpoints (may be null), offset by
// raw_base and by out's size on entry. An error (its message names the byte
// offset) for an invalid escape, a lone UTF-16 surrogate, or a raw control
// character (< 0x20, which strict JSON forbids); *out is then partially
// written.
core::Status UnescapeJsonString(std::string_view raw, std::string* out, size_t raw_base,
                                std::vector<JsonStringCheckpoint>* checkpoints);

// Appends `text` escaped as the contents of a JSON string (no quotes): '"',
// '\\' and control characters escaped, everything else (UTF-8 included)
// byte for byte. The chat path writes its rendered prompt with it (a
// vectorized scan instead of nlohmann's byte loop).
void AppendEscapedJsonString(std::string_view text, std::string* out);

}  // namespace toktier::api
