// Shared by the fuzz targets: the invariant check and the tokenizer files.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"
#include "test_support.h"

namespace toktier::fuzz {

// Aborts with `what` when an invariant fails (libFuzzer and the standalone
// driver then report the input).
inline void Check(bool ok, const char* target, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: invariant failed: %s\n", target, what);
    std::abort();
  }
}

// The shipped tokenizers among `names` that are present (npm ci in tools/).
inline std::vector<std::shared_ptr<const core::Tokenizer>> LoadTokenizers(std::initializer_list<const char*> names) {
  std::vector<std::shared_ptr<const core::Tokenizer>> out;
  for (const char* name : names) {
    auto bytes = test::ReadFile(test::TokenizerPath(name));
    if (!bytes) continue;
    core::Status st;
    if (auto t = core::Tokenizer::FromBytes(*bytes, "", &st)) out.push_back(t);
  }
  return out;
}

// Deep nesting in a few input bytes (issue 34: inputs of a few KB never
// nested deep enough to find the stack overflow in the chat path). In a JSON
// target's input, "\x01" k stands for k*k+1 nested arrays ("[[...]]"),
// "\x02" k for k*k+1 nested objects ({"a":{"a":...1}}), "\x03" k for exactly
// k nested arrays (depths around limits.json_max_depth); every other byte
// is itself. Any mutation engine reaches 65,000 levels with two bytes, and
// the dictionary (tests/fuzz/json.dict) carries the markers.
inline std::string ExpandNesting(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(in[i]);
    if (c < 1 || c > 3 || i + 1 == in.size()) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    const size_t k = static_cast<unsigned char>(in[++i]);
    const size_t n = c == 3 ? k : k * k + 1;
    if (c == 2) {
      for (size_t d = 0; d < n; ++d) out += "{\"a\":";
      out += '1';
      out.append(n, '}');
    } else {
      out.append(n, '[');
      out.append(n, ']');
    }
  }
  return out;
}

}  // namespace toktier::fuzz
