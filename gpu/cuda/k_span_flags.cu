// Kernel 2: per byte, whether a span starts there (a segment start, or a
// hard boundary of the family: no piece crosses it). Bytes past n get 0.
#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

__global__ void SpanFlagsKernel(Args a, uint32_t bucket) {
  const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= bucket) return;
  const logic::Request r = RequestOf(a);
  a.span_flag[i] = logic::SpanFlagBody(r, a.tables, i);
}

cudaError_t LaunchSpanFlags(const Args& a, size_t bucket, cudaStream_t s) {
  SpanFlagsKernel<<<GridFor(bucket), kBlock, 0, s>>>(a, static_cast<uint32_t>(bucket));
  return cudaGetLastError();
}

}  // namespace toktier::gpu::cuda
