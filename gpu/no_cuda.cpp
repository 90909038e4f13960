// The host-only build of gpu/ (no CUDA compiler found, or TOKTIER_ENABLE_CUDA
// OFF): no device, so GpuEncoder::TryReset returns Route::kNoDevice after its
// checks; HostReset works as everywhere.
#include "gpu/device_backend.h"

namespace toktier::gpu {

bool BackendCompiled() { return false; }
bool BackendDevicePresent() { return false; }

struct DeviceBackend::Impl {};

std::unique_ptr<DeviceBackend> DeviceBackend::Create(const HostTables&, const GpuOptions&, std::string* error) {
  if (error) *error = "built without CUDA";
  return nullptr;
}

DeviceBackend::DeviceBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceBackend::~DeviceBackend() = default;

Route DeviceBackend::Run(std::string_view, const std::vector<logic::Segment>&, std::vector<uint32_t>&,
                         std::vector<uint32_t>&, size_t*, std::string* error) {
  if (error) *error = "built without CUDA";
  return Route::kNoDevice;
}

float DeviceBackend::last_graph_ms() const { return 0.0f; }

}  // namespace toktier::gpu
