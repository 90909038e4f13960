// Bounds on untrusted JSON: client bodies, engine answers, and the model's
// own output (tool-call arguments). nlohmann's parser is iterative, but
// copying, dumping, comparing and rendering a parsed value recurse once per
// level of nesting, so a 100 KB body of 50,000 nested brackets overflows an
// I/O thread's stack long after the parse succeeded. Every nlohmann parse of
// such JSON goes through ParseBoundedJson; the simdjson completions parser,
// which does not recurse, checks the same bound (JsonNestingExceeds) so that
// every API answers a too-deep body the same way (docs/security.md).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace toktier::api {

// limits.json_max_depth's default: far deeper than any tool schema or
// request seen in agent traffic (they stay under 20), far shallower than what
// a thread's stack can take in the template renderer (tests check 4x this
// under ASan).
inline constexpr size_t kDefaultJsonMaxDepth = 128;
// The range --check-config accepts: a body's own object and the messages
// array already take two levels; the template renderer takes input nested
// up to 256 deep (chat/interpreter.cpp ConvertJson), so a body within the bound
// always reaches it.
inline constexpr size_t kMinJsonMaxDepth = 16;
inline constexpr size_t kMaxJsonMaxDepth = 256;

// Why `max_depth` cannot be limits.json_max_depth ("" when it can): outside
// [kMinJsonMaxDepth, kMaxJsonMaxDepth]. --check-config and Server::Start both ask.
std::string JsonMaxDepthProblem(size_t max_depth);

// True when arrays and objects in `text` nest deeper than `max_depth` (the
// top-level object is depth 1). Brackets inside strings do not count;
// escapes are followed. The text need not be valid JSON: for valid JSON the
// answer is exact, and a parser that accepts `text` never goes deeper than
// the depth seen here.
[[nodiscard]] bool JsonNestingExceeds(std::string_view text, size_t max_depth);

// The 400 message for a body nested deeper than `max_depth`.
std::string TooDeepMessage(size_t max_depth);

enum class JsonParseOutcome {
  kOk,
  kMalformed,  // not one JSON value (invalid UTF-8 included), or trailing bytes
  kTooDeep,    // nested deeper than max_depth: not parsed at all
};

// Parses one JSON value (whitespace around it only) into *out, or leaves *out
// discarded and says why not. Never throws.
[[nodiscard]] JsonParseOutcome ParseBoundedJson(std::string_view text, size_t max_depth,
                                                nlohmann::ordered_json* out);
[[nodiscard]] JsonParseOutcome ParseBoundedJson(std::string_view text, size_t max_depth, nlohmann::json* out);

}  // namespace toktier::api
