// toktier gpu: exact full tokenization on a CUDA device for large state
// misses (docs/gpu.md). The one interface header of gpu/.
//
// TryReset either fills the state exactly as core::Repairer::Reset would (the
// device route) or leaves it untouched and says why (every other route); the
// caller then takes the CPU path and counts the route
// (toktier_gpu_route_total{route}). Without CUDA (host-only build, or no
// device) every call is a counted fallback.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/core.h"

namespace toktier::gpu {

struct GpuOptions {
  bool enabled = true;                 // false: every call returns Route::kDisabled
  size_t min_bytes = 2048;             // smaller texts: Route::kBelowThreshold (the CPU is faster)
  size_t max_bytes = size_t{8} << 20;  // staging buffer size; larger: Route::kTooLarge
  size_t queue_capacity = 2;           // callers waiting for the device; more: Route::kQueueFull
  int device = 0;
};

enum class Route : uint8_t {
  kDevice,
  kDisabled,
  kBelowThreshold,
  kNoDevice,
  kUnsupportedFamily,
  kNotNfc,
  kTooLarge,
  kQueueFull,
  kCudaError,
};
inline constexpr size_t kRouteCount = 9;

// "device", "disabled", "below_threshold", "no_device", "unsupported_family",
// "not_nfc", "too_large", "queue_full", "cuda_error".
std::string_view RouteName(Route r);

bool CudaCompiled();   // built with nvcc
bool DevicePresent();  // a CUDA device can be used now (false without CUDA)

class DeviceBackend;  // gpu/ internal (device_backend.h)
struct HostTables;    // gpu/ internal (host_pipeline.h)

class GpuEncoder {  // one per model; thread-safe
 public:
  static std::unique_ptr<GpuEncoder> Create(std::shared_ptr<const core::Tokenizer> tok, const GpuOptions& o);

  // kDevice: `state` now holds exactly what core::Repairer::Reset(tok, state,
  // text, add_special_tokens) gives (ids, ends, added spans, version). Any
  // other route: state untouched, the caller takes the CPU path and counts
  // the route. `text` must be valid UTF-8 (as for core).
  [[nodiscard]] Route TryReset(std::string_view text, bool add_special_tokens, core::TokenState& state);

  // The same pipeline run on the host (the kernels' logic, grid run
  // serially); for tests and gpu/check.sh comparisons. Returns false with
  // *why when the family is unsupported or the text not NFC (for an NFC
  // normalizer). No size limit.
  [[nodiscard]] bool HostReset(std::string_view text, bool add_special_tokens, core::TokenState& state,
                               Route* why) const;

  // Why the tokenizer is not supported ("" when it is).
  [[nodiscard]] const std::string& unsupported_reason() const;
  [[nodiscard]] bool supported() const;

  struct Stats {
    uint64_t routes[kRouteCount] = {};  // TryReset calls by route
    uint64_t long_pieces = 0;           // pieces BPE'd on the host (longer than the device bound)
  };
  [[nodiscard]] Stats stats() const;
  // Device time (CUDA events) of the last request's graph, ms; 0 without a device.
  [[nodiscard]] float last_device_ms() const;

  ~GpuEncoder();
  GpuEncoder(const GpuEncoder&) = delete;
  GpuEncoder& operator=(const GpuEncoder&) = delete;

 private:
  GpuEncoder();
  Route Count(Route r);

  std::shared_ptr<const core::Tokenizer> tok_;
  GpuOptions opt_;
  std::unique_ptr<HostTables> tables_;
  std::unique_ptr<DeviceBackend> backend_;  // null without CUDA / device / support
  bool backend_failed_ = false;             // a device was there but setting it up failed
  std::mutex device_mu_;
  std::atomic<size_t> waiting_{0};
  mutable std::atomic<uint64_t> routes_[kRouteCount] = {};
  mutable std::atomic<uint64_t> long_pieces_{0};
};

}  // namespace toktier::gpu
