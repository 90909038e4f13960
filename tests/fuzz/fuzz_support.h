// Shared by the fuzz targets: the invariant check and the tokenizer files.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
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

}  // namespace toktier::fuzz
