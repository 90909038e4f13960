#include "api/json_limits.h"

#include <cstring>
#include <type_traits>

#include "api/json_tree.h"

namespace toktier::api {

bool JsonNestingExceeds(std::string_view text, size_t max_depth) {
  const char* p = text.data();
  const char* const end = p + text.size();
  size_t depth = 0;
  while (p < end) {
    // Outside strings: only brackets and quotes matter.
    const char c = *p++;
    if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    } else if (c == '"') {
      // Inside a string: jump to the next quote or backslash (memchr is
      // vectorized; prompts are most of a body's bytes).
      for (;;) {
        const char* q = static_cast<const char*>(std::memchr(p, '"', static_cast<size_t>(end - p)));
        if (!q) return false;
        const char* b = static_cast<const char*>(std::memchr(p, '\\', static_cast<size_t>(q - p)));
        if (!b) {
          p = q + 1;
          break;
        }
        p = b + 2;  // the escaped byte is never a closing quote
        if (p >= end) return false;
      }
    }
  }
  return false;
}

std::string JsonMaxDepthProblem(size_t max_depth) {
  if (max_depth >= kMinJsonMaxDepth && max_depth <= kMaxJsonMaxDepth) return "";
  return "limits.json_max_depth: must be within [" + std::to_string(kMinJsonMaxDepth) + ", " +
         std::to_string(kMaxJsonMaxDepth) + "] (the template renderer recurses once per level)";
}

std::string TooDeepMessage(size_t max_depth) {
  return "The request body nests arrays and objects more than " + std::to_string(max_depth) +
         " levels deep (limits.json_max_depth).";
}

namespace {

template <class Json>
JsonParseOutcome Parse(std::string_view text, size_t max_depth, Json* out) {
  if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
    // Client bodies: the fast walk (which checks the depth as it goes), or
    // the scan and nlohmann where it does not vouch.
    switch (ParseJsonTreeFast(text, max_depth, out)) {
      case FastTree::kBuilt: return JsonParseOutcome::kOk;
      case FastTree::kTooDeep:
        *out = Json(nlohmann::detail::value_t::discarded);
        return JsonParseOutcome::kTooDeep;
      case FastTree::kNotVouched: break;
    }
  }
  if (JsonNestingExceeds(text, max_depth)) {
    *out = Json(nlohmann::detail::value_t::discarded);
    return JsonParseOutcome::kTooDeep;
  }
  *out = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  return out->is_discarded() ? JsonParseOutcome::kMalformed : JsonParseOutcome::kOk;
}

}  // namespace

JsonParseOutcome ParseBoundedJson(std::string_view text, size_t max_depth, nlohmann::ordered_json* out) {
  return Parse(text, max_depth, out);
}

JsonParseOutcome ParseBoundedJson(std::string_view text, size_t max_depth, nlohmann::json* out) {
  return Parse(text, max_depth, out);
}

}  // namespace toktier::api
