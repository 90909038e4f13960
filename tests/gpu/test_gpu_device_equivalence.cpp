// On a CUDA device (gpu/check.sh on a lent machine): TryReset takes the
// device route and its state equals core::Repairer::Reset and HostReset, for
// each supported tokenizer, on the synthetic and workload corpora made large
// (over min_bytes), including texts at bucket edges and with long pieces;
// the queue-full route under concurrent callers. The binary's main exits 77
// without a device (ctest: skipped); each case is also skip-decorated.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>

#include "gpu/gpu.h"
#include "gpu_test_support.h"

namespace core = toktier::core;
namespace gpu = toktier::gpu;

namespace {

bool NoDevice() { return !gpu::CudaCompiled() || !gpu::DevicePresent(); }

void Run(const std::string& name) {
  auto tok = toktier::gpu_test::Tokenizer(name);
  if (!tok) {
    MESSAGE(name << " not found: skipped");
    return;
  }
  gpu::GpuOptions o;
  o.min_bytes = 0;
  auto enc = gpu::GpuEncoder::Create(tok, o);
  REQUIRE(enc->supported());
  std::vector<std::string> texts = toktier::gpu_test::SyntheticTexts();
  for (auto& t : toktier::gpu_test::WorkloadTexts(8)) texts.push_back(std::move(t));
  std::string all;
  for (const auto& t : texts) all += t;
  for (size_t cut : {size_t{4095}, size_t{4096}, size_t{4097}, size_t{65536}, size_t{1} << 20}) {
    std::string t = all;
    while (t.size() < cut) t += all;
    t.resize(cut);
    while (!t.empty() && core::FindInvalidUtf8(t) != std::string::npos) t.pop_back();
    texts.push_back(t);
  }
  size_t device = 0;
  for (const auto& text : texts) {
    for (bool add_special : {false, true}) {
      core::TokenState ref, dev, host;
      core::Repairer::Reset(*tok, ref, text, add_special);
      const gpu::Route r = enc->TryReset(text, add_special, dev);
      if (r == gpu::Route::kNotNfc) continue;
      REQUIRE_MESSAGE(r == gpu::Route::kDevice, gpu::RouteName(r));
      ++device;
      const std::string d = toktier::gpu_test::Diff(dev, ref);
      if (!d.empty()) FAIL_CHECK(name << " " << text.size() << " bytes: " << d);
      gpu::Route why;
      REQUIRE(enc->HostReset(text, add_special, host, &why));
      CHECK(toktier::gpu_test::Diff(host, dev).empty());
    }
  }
  MESSAGE(name << ": " << device << " device results equal; long pieces on the host: " << enc->stats().long_pieces);
}

}  // namespace

TEST_CASE("device == CPU: Llama 3" * doctest::skip(NoDevice())) { Run("llama3"); }
TEST_CASE("device == CPU: Qwen3" * doctest::skip(NoDevice())) { Run("qwen3"); }
TEST_CASE("device == CPU: o200k" * doctest::skip(NoDevice())) { Run("tiktoken:o200k_base"); }
TEST_CASE("device == CPU: DeepSeek-V3" * doctest::skip(NoDevice())) { Run("deepseek_v3"); }

TEST_CASE("device: queue_full under concurrent callers" * doctest::skip(NoDevice())) {
  auto tok = toktier::gpu_test::Tokenizer("llama3");
  if (!tok) return;
  gpu::GpuOptions o;
  o.queue_capacity = 0;  // only the caller on the device
  auto enc = gpu::GpuEncoder::Create(tok, o);
  std::string text;
  while (text.size() < (size_t{4} << 20)) text += "queue full test, words and 1234 numbers\n";
  std::atomic<int> full{0}, dev{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      core::TokenState s;
      const gpu::Route r = enc->TryReset(text, false, s);
      if (r == gpu::Route::kQueueFull) ++full;
      if (r == gpu::Route::kDevice) ++dev;
    });
  }
  for (auto& th : threads) th.join();
  CHECK(dev >= 1);
  MESSAGE("device " << dev << ", queue_full " << full);
}
