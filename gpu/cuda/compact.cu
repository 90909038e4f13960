// The flat compactions between the kernels: positions whose flag is set, in
// order, and their count (left in device memory for the next kernel).
#include <cub/device/device_select.cuh>
#include <thrust/iterator/counting_iterator.h>

#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

cudaError_t Compact(void* temp, size_t& temp_bytes, const uint8_t* flags, uint32_t* out, uint32_t* count,
                    size_t bucket, cudaStream_t s) {
  thrust::counting_iterator<uint32_t> positions(0);
  return cub::DeviceSelect::Flagged(temp, temp_bytes, positions, flags, out, count, static_cast<int64_t>(bucket),
                                    s);
}

}  // namespace toktier::gpu::cuda
