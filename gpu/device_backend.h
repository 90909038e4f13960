// gpu/ internal: the CUDA side (gpu/cuda/runtime.cu), or its host-only stand-in
// (gpu/no_cuda.cpp) when the build has no CUDA compiler.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/gpu.h"
#include "gpu/host_pipeline.h"

namespace toktier::gpu {

bool BackendCompiled();
bool BackendDevicePresent();

class DeviceBackend {
 public:
  // Uploads the tables and preallocates every buffer for o.max_bytes;
  // nullptr (and *error) on a CUDA error.
  static std::unique_ptr<DeviceBackend> Create(const HostTables& tables, const GpuOptions& o, std::string* error);
  ~DeviceBackend();

  // One request (not thread-safe: GpuEncoder serializes). kDevice: ids/ends
  // hold the content tokens (long pieces marked logic::kLongPiece) and
  // *long_pieces their count; kTooLarge: too many segments for the staging
  // buffer; kCudaError: *error says which call failed.
  Route Run(std::string_view text, const std::vector<logic::Segment>& segs, std::vector<uint32_t>& ids,
            std::vector<uint32_t>& ends, size_t* long_pieces, std::string* error);

  // Device time of the last Run's graph (CUDA events), milliseconds.
  [[nodiscard]] float last_graph_ms() const;

  struct Impl;

 private:
  explicit DeviceBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace toktier::gpu
