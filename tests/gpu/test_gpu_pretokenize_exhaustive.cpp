// The device pipeline's pre-tokenization (gpu/device_logic.h, run by the
// host driver): (a) its span starts are exactly the CPU scanners'
// hard-boundary positions (IsHardBoundary, proven by
// tests/core/test_split_exhaustive.cpp), and (b) its pieces (the family
// matcher run per span) are exactly the CPU scanner's pieces, on every string
// up to 5 characters over a representative alphabet per family, on random
// strings, and on the synthetic and workload corpora.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "core/pretokenizer.h"
#include "core/tokenizer_impl.h"
#include "gpu/host_pipeline.h"
#include "gpu_test_support.h"

namespace core = toktier::core;
namespace gpu = toktier::gpu;

namespace {

struct Checker {
  std::shared_ptr<const core::Tokenizer> tok;
  gpu::HostTables tables;
  const core::Splitter* cpu = nullptr;
  long long strings = 0, failures = 0;
  std::string example;

  explicit Checker(const std::string& name) : tok(toktier::gpu_test::Tokenizer(name)) {
    if (!tok) return;
    tables = gpu::HostTables::Build(*tok);
    cpu = tok->impl().fast_.get();
  }
  bool ok() const { return tok && cpu && tables.supported(); }

  void Check(const std::string& s) {
    ++strings;
    std::vector<core::Span> pieces;
    cpu->Split(s, pieces);
    std::vector<uint32_t> want, got, spans, hard;
    for (const auto& p : pieces) want.push_back(p.begin);
    gpu::HostPieceStarts(tables, s, got);
    gpu::HostSpanStarts(tables, s, spans);
    if (!s.empty()) hard.push_back(0);
    for (size_t p = 1; p < s.size(); ++p) {
      if (cpu->IsHardBoundary(s, p)) hard.push_back(static_cast<uint32_t>(p));
    }
    if (got != want || spans != hard) {
      if (++failures == 1) example = s;
    }
  }

  void Exhaustive(const std::vector<std::string>& alphabet, int max_len) {
    std::vector<size_t> idx;
    for (int len = 1; len <= max_len; ++len) {
      idx.assign(static_cast<size_t>(len), 0);
      for (;;) {
        std::string s;
        for (size_t i : idx) s += alphabet[i];
        Check(s);
        int k = len - 1;
        while (k >= 0 && ++idx[static_cast<size_t>(k)] == alphabet.size()) idx[static_cast<size_t>(k--)] = 0;
        if (k < 0) break;
      }
    }
  }
};

void Run(const std::string& name, const std::vector<std::string>& alphabet) {
  Checker c(name);
  if (!c.ok()) {
    MESSAGE("tokenizer " << name << " not found or not supported: skipped");
    return;
  }
  c.Exhaustive(alphabet, 5);
  std::mt19937_64 rng(1414);
  for (int k = 0; k < 3000; ++k) {
    std::string s;
    const size_t len = 1 + rng() % 64;
    for (size_t i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
    c.Check(s);
  }
  for (const auto& t : toktier::gpu_test::SyntheticTexts()) c.Check(t);
  for (const auto& t : toktier::gpu_test::WorkloadTexts(6)) c.Check(t);
  MESSAGE(name << ": " << c.strings << " strings");
  CHECK_MESSAGE(c.failures == 0, name << ": " << c.failures << " strings differ, e.g. '" << c.example << "'");
}

}  // namespace

TEST_CASE("pieces and hard-boundary spans: cl100k (Llama 3)") {
  Run("llama3", {"\u00e9", "1", " ", "\n", "\r", ".", "'", "S", "l", "\t", "\u0301", "\u0085"});
}

TEST_CASE("pieces and hard-boundary spans: qwen2 (Qwen3)") {
  Run("qwen3", {"a", "\u0661", "2", " ", "\n", "\r", ".", "'", "s", "\t", "\u0301", "\u00a0"});
}

TEST_CASE("pieces and hard-boundary spans: o200k") {
  Run("tiktoken:o200k_base", {"a", "\u01C5", "1", " ", "\t", "\n", "/", ".", "'", "\u02B0", "\u4e2d", "\u0301"});
}

TEST_CASE("pieces and hard-boundary spans: DeepSeek-V3") {
  Run("deepseek_v3", {"a", "1", " ", "\n", ".", "$", "\t", "\u4e2d", "\u309b", "\u0301", "\x01", "\u0085"});
}
