// Issue 14: the device pipeline run on the host (GpuEncoder::HostReset, the
// kernels' bodies with the grid run serially) gives exactly what
// core::Repairer::Reset gives (ids, ends, added spans, version): Llama 3,
// Qwen3, o200k and DeepSeek-V3, with and without add_special_tokens, on the
// synthetic corpus (long pieces included: the host fallback), the shared
// workloads and the differential corpus (tools/gen_corpus.js) when node is
// there. Also: the class table equals core's per code point.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gpu/gpu.h"
#include "gpu/host_pipeline.h"
#include "gpu_test_support.h"
#include "test_support.h"

namespace core = toktier::core;
namespace gpu = toktier::gpu;

namespace {

std::vector<std::string> DifferentialCorpus() {
  static std::vector<std::string> texts = [] {
    std::vector<std::string> v;
    const std::string out =
        (std::filesystem::temp_directory_path() / ("toktier_gpu_corpus_" + std::to_string(::getpid()) + ".jsonl"))
            .string();
    if (!toktier::test::RunNodeTool("gen_corpus.js --only adv --long-len 20000 --out " + out, "")) return v;
    std::ifstream in(out);
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j["text"].is_string()) v.push_back(j["text"].get<std::string>());
    }
    std::filesystem::remove(out);
    return v;
  }();
  return texts;
}

void Run(const std::string& name) {
  auto tok = toktier::gpu_test::Tokenizer(name);
  if (!tok) {
    MESSAGE("tokenizer " << name << " not found: skipped");
    return;
  }
  gpu::GpuOptions o;
  auto enc = gpu::GpuEncoder::Create(tok, o);
  REQUIRE_MESSAGE(enc->supported(), name << ": " << enc->unsupported_reason());
  std::vector<std::string> texts = toktier::gpu_test::SyntheticTexts();
  for (auto& t : toktier::gpu_test::WorkloadTexts(8)) texts.push_back(std::move(t));
  const auto corpus = DifferentialCorpus();
  if (corpus.empty()) MESSAGE("node tools/gen_corpus.js unavailable: differential corpus skipped");
  texts.insert(texts.end(), corpus.begin(), corpus.end());
  size_t compared = 0, not_nfc = 0, bytes = 0;
  for (const std::string& text : texts) {
    if (core::FindInvalidUtf8(text) != std::string::npos) continue;
    for (bool add_special : {false, true}) {
      core::TokenState ref, got;
      core::Repairer::Reset(*tok, ref, text, add_special);
      gpu::Route why = gpu::Route::kDevice;
      if (!enc->HostReset(text, add_special, got, &why)) {
        REQUIRE(why == gpu::Route::kNotNfc);
        ++not_nfc;
        continue;
      }
      ++compared;
      bytes += text.size();
      const std::string d = toktier::gpu_test::Diff(got, ref);
      if (!d.empty()) {
        FAIL_CHECK(name << " add_special=" << add_special << " text of " << text.size() << " bytes: " << d
                        << "\n  text: " << text.substr(0, 200));
      }
    }
  }
  MESSAGE(name << ": " << compared << " texts (" << bytes << " bytes) equal; " << not_nfc << " not NFC");
  CHECK(compared > 0);
}

}  // namespace

TEST_CASE("HostReset == Repairer::Reset, Llama 3") { Run("llama3"); }
TEST_CASE("HostReset == Repairer::Reset, Qwen3") { Run("qwen3"); }
TEST_CASE("HostReset == Repairer::Reset, o200k") { Run("tiktoken:o200k_base"); }
TEST_CASE("HostReset == Repairer::Reset, DeepSeek-V3") { Run("deepseek_v3"); }
TEST_CASE("HostReset == Repairer::Reset, cl100k (tiktoken)") { Run("tiktoken:cl100k_base"); }

TEST_CASE("the device class table is core's class of every code point") {
  const core::DeviceClassTable t = core::ExportDeviceClassTable();
  REQUIRE(t.block_of.size() == 0x1100);
  size_t diffs = 0;
  for (char32_t cp = 0; cp < 0x110000; ++cp) {
    const uint16_t got = t.blocks[static_cast<size_t>(t.block_of[cp >> 8]) * 256 + (cp & 255)];
    diffs += got != core::DeviceClassOf(cp);
  }
  CHECK(diffs == 0);
  MESSAGE((t.blocks.size() / 256) << " distinct blocks");
}

TEST_CASE("the exported merge table is the whole of core's") {
  for (const char* name : {"llama3", "qwen3", "tiktoken:o200k_base", "deepseek_v3"}) {
    auto tok = toktier::gpu_test::Tokenizer(name);
    if (!tok) continue;
    const core::DeviceTables t = core::ExportDeviceTables(*tok);
    CHECK_MESSAGE(t.supported, name << ": " << t.unsupported_reason);
    CHECK(!t.merges.empty());
  }
}
