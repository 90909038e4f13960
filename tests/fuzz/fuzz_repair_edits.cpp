// Repair == full tokenization on fuzzed edit sequences. The input is an edit
// script: records separated by 0xFF, each `op position text...`; the first
// byte of the input picks the tokenizer (shipped families plus a synthetic
// NFKC + GPT-2 ByteLevel one, the normalizer shape of issue 15). Every step
// must give the IDs and token ends of a full tokenization, or the target
// aborts (libFuzzer / the standalone driver then report the input).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "fuzz_support.h"
#include "test_support.h"

namespace {

std::vector<std::shared_ptr<const toktier::core::Tokenizer>>& Tokenizers() {
  static std::vector<std::shared_ptr<const toktier::core::Tokenizer>> all;
  return all;
}

std::string ToUtf8(std::string s) {
  for (;;) {
    size_t bad = toktier::core::FindInvalidUtf8(s);
    if (bad == std::string::npos) return s;
    s[bad] = '?';
  }
}

size_t BackToChar(const std::string& s, size_t i) {
  while (i > 0 && i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Tokenizers() = toktier::fuzz::LoadTokenizers({"llama3", "qwen3", "deepseek_v3", "gptoss", "llama2", "gemma3", "tiktoken:cl100k_base",
                           "tiktoken:r50k_base"});
  if (auto llama3 = toktier::test::ReadFile(toktier::test::TokenizerPath("llama3"))) {
    auto j = nlohmann::json::parse(*llama3);
    j["normalizer"] = {{"type", "NFKC"}};
    j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
    toktier::core::Status st;
    auto t = toktier::core::Tokenizer::FromHuggingFaceJson(j.dump(), &st);
    if (t) Tokenizers().push_back(t);
  }
  if (Tokenizers().empty()) std::printf("fuzz_repair_edits: no tokenizer files (npm ci in tools/); nothing to do\n");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (Tokenizers().empty() || size == 0) return 0;
  const auto& tok = *Tokenizers()[data[0] % Tokenizers().size()];
  const bool special = (data[0] / Tokenizers().size()) % 2 == 1;
  std::string script(reinterpret_cast<const char*>(data) + 1, size - 1);
  toktier::core::TokenState state;
  std::string text;
  std::vector<uint32_t> ids, ends;
  size_t start = 0;
  int steps = 0;
  while (start <= script.size() && steps < 64) {
    size_t stop = script.find('\xFF', start);
    if (stop == std::string::npos) stop = script.size();
    std::string rec = script.substr(start, stop - start);
    start = stop + 1;
    if (rec.size() < 2) continue;
    const unsigned op = static_cast<unsigned char>(rec[0]) % 5;
    const size_t pos = BackToChar(text, text.size() * static_cast<unsigned char>(rec[1]) / 255);
    std::string frag = ToUtf8(rec.substr(2));
    switch (op) {
      case 0: text += frag; break;                                   // append
      case 1: text = text.substr(0, pos) + frag; break;              // replace the tail
      case 2: text.insert(pos, frag); break;                         // insert
      case 3: text.erase(pos, std::min(text.size() - pos, BackToChar(text, pos + frag.size()) - pos)); break;
      default: text = text.substr(0, pos); break;                    // truncate
    }
    text = ToUtf8(text);
    toktier::core::Repairer::Update(tok, state, text, special);
    tok.EncodeWithEnds(text, special, ids, ends);
    if (state.ids() != ids || state.ends() != ends) {
      std::fprintf(stderr, "repair != full for %s (special=%d) at step %d on %zu bytes\n", tok.Describe().c_str(),
                   special, steps, text.size());
      std::abort();
    }
    ++steps;
  }
  return 0;
}
