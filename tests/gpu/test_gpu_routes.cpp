// Every fallback route of GpuEncoder::TryReset, in its decision order, and
// that each leaves the state untouched and is counted. Without a device the
// last route is no_device; with one (gpu/check.sh) it is device.
#include <doctest/doctest.h>

#include "gpu/gpu.h"
#include "gpu_test_support.h"

namespace core = toktier::core;
namespace gpu = toktier::gpu;

namespace {

std::string BigText(size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += "The token tier keeps state; int x = 42;\n";
  return s;
}

core::TokenState Sentinel(const core::Tokenizer& tok) {
  core::TokenState s;
  core::Repairer::Reset(tok, s, "sentinel", false);
  return s;
}

void CheckUntouched(const core::TokenState& s, const core::TokenState& sentinel) {
  CHECK(toktier::gpu_test::Diff(s, sentinel).empty());
}

}  // namespace

TEST_CASE("route names") {
  CHECK(gpu::RouteName(gpu::Route::kDevice) == "device");
  CHECK(gpu::RouteName(gpu::Route::kDisabled) == "disabled");
  CHECK(gpu::RouteName(gpu::Route::kBelowThreshold) == "below_threshold");
  CHECK(gpu::RouteName(gpu::Route::kNoDevice) == "no_device");
  CHECK(gpu::RouteName(gpu::Route::kUnsupportedFamily) == "unsupported_family");
  CHECK(gpu::RouteName(gpu::Route::kNotNfc) == "not_nfc");
  CHECK(gpu::RouteName(gpu::Route::kTooLarge) == "too_large");
  CHECK(gpu::RouteName(gpu::Route::kQueueFull) == "queue_full");
  CHECK(gpu::RouteName(gpu::Route::kCudaError) == "cuda_error");
}

TEST_CASE("fallback routes in decision order, each counted, state untouched") {
  auto tok = toktier::gpu_test::Tokenizer("qwen3");
  if (!tok) {
    MESSAGE("qwen3 tokenizer not found: skipped");
    return;
  }
  const core::TokenState sentinel = Sentinel(*tok);
  const std::string big = BigText(4096);
  {
    gpu::GpuOptions o;
    o.enabled = false;
    auto e = gpu::GpuEncoder::Create(tok, o);
    core::TokenState s = sentinel;
    CHECK(e->TryReset(big, false, s) == gpu::Route::kDisabled);
    CheckUntouched(s, sentinel);
    CHECK(e->stats().routes[static_cast<size_t>(gpu::Route::kDisabled)] == 1);
  }
  gpu::GpuOptions o;
  o.max_bytes = 1 << 20;
  auto e = gpu::GpuEncoder::Create(tok, o);
  core::TokenState s = sentinel;
  CHECK(e->TryReset("short", false, s) == gpu::Route::kBelowThreshold);
  CheckUntouched(s, sentinel);
  CHECK(e->TryReset(BigText((1 << 20) + 1), false, s) == gpu::Route::kTooLarge);
  CheckUntouched(s, sentinel);
  // Qwen3 normalizes to NFC: "e" + U+0301 is not NFC.
  CHECK(e->TryReset(big + "e\u0301", false, s) == gpu::Route::kNotNfc);
  CheckUntouched(s, sentinel);
  core::TokenState host;
  gpu::Route why = gpu::Route::kDevice;
  CHECK_FALSE(e->HostReset(big + "e\u0301", false, host, &why));
  CHECK(why == gpu::Route::kNotNfc);
  // Already NFC ("\u00e9"): goes on to the device check.
  const gpu::Route last = e->TryReset(big + "\u00e9", true, s);
  if (gpu::CudaCompiled() && gpu::DevicePresent()) {
    CHECK(last == gpu::Route::kDevice);
    core::TokenState ref;
    core::Repairer::Reset(*tok, ref, big + "\u00e9", true);
    CHECK(toktier::gpu_test::Diff(s, ref).empty());
  } else {
    CHECK(last == gpu::Route::kNoDevice);
    CheckUntouched(s, sentinel);
  }
  const auto st = e->stats();
  CHECK(st.routes[static_cast<size_t>(gpu::Route::kBelowThreshold)] == 1);
  CHECK(st.routes[static_cast<size_t>(gpu::Route::kTooLarge)] == 1);
  CHECK(st.routes[static_cast<size_t>(gpu::Route::kNotNfc)] == 1);
  CHECK(st.routes[static_cast<size_t>(last)] == 1);
}

TEST_CASE("unsupported families: GPT-2, SentencePiece") {
  for (const char* name : {"tiktoken:gpt2", "tiktoken:r50k_base", "llama2", "gemma3"}) {
    auto tok = toktier::gpu_test::Tokenizer(name);
    if (!tok) {
      MESSAGE(std::string(name) << " not found: skipped");
      continue;
    }
    auto e = gpu::GpuEncoder::Create(tok, gpu::GpuOptions{});
    CHECK_FALSE(e->supported());
    MESSAGE(std::string(name) << ": " << e->unsupported_reason());
    core::TokenState s = Sentinel(*tok);
    const core::TokenState before = s;
    CHECK(e->TryReset(BigText(4096), false, s) == gpu::Route::kUnsupportedFamily);
    CheckUntouched(s, before);
    gpu::Route why = gpu::Route::kDevice;
    CHECK_FALSE(e->HostReset(BigText(4096), false, s, &why));
    CHECK(why == gpu::Route::kUnsupportedFamily);
  }
}

TEST_CASE("without CUDA: compiled and device flags agree") {
  if (!gpu::CudaCompiled()) CHECK_FALSE(gpu::DevicePresent());
  MESSAGE("cuda_compiled=" << gpu::CudaCompiled() << " device_present=" << gpu::DevicePresent());
}
