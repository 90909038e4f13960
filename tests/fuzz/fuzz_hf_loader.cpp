// tokenizer.json loader: any bytes load or fail with a Status, never crash;
// what loads can encode.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  toktier::core::Status st;
  auto t = toktier::core::Tokenizer::FromHuggingFaceJson(in, &st);
  if (t) {
    std::vector<uint32_t> ids;
    t->Encode("hello world ab", true, ids);
  }
  // Also as a tiktoken rank file with a known encoding.
  auto r = toktier::core::Tokenizer::FromTiktokenRanks(in, "r50k_base", &st);
  if (r) {
    std::vector<uint32_t> ids;
    r->Encode("hello world", false, ids);
  }
  return 0;
}
