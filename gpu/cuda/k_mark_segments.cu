// Kernel 1: the segment structure (added tokens and text segments) into the
// per-byte kinds; an added token's id at its first byte.
#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

__global__ void MarkSegmentsKernel(Args a) {
  const DevHeader* h = reinterpret_cast<const DevHeader*>(a.stage);
  const logic::Request r = RequestOf(a);
  const auto* segs = reinterpret_cast<const logic::Segment*>(a.stage + kTextOffset + RoundUp16(h->n));
  const uint32_t count = h->nsegs;
  for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x) {
    logic::MarkSegmentBody(r, segs[k]);
  }
}

cudaError_t LaunchMarkSegments(const Args& a, size_t bucket, cudaStream_t s) {
  // Grid-stride: segments are far fewer than bytes.
  const unsigned grid = GridFor(bucket / 64 + 1);
  MarkSegmentsKernel<<<grid, kBlock, 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace toktier::gpu::cuda
