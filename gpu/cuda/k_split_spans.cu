// Kernel 3: one thread per span runs the family's matcher over it and marks
// its pieces' starts (exact: the hard-boundary rule guarantees
// Split(X) = Split(X[:p]) ++ Split(X[p:]) at every span start p).
#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

__global__ void SplitSpansKernel(Args a, uint32_t bucket) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = a.counts->nspans;
  if (k >= count || k >= bucket) return;
  const logic::Request r = RequestOf(a);
  logic::SplitSpanBody(r, a.tables, a.spans, count, k);
}

cudaError_t LaunchSplitSpans(const Args& a, size_t bucket, cudaStream_t s) {
  SplitSpansKernel<<<GridFor(bucket), kBlock, 0, s>>>(a, static_cast<uint32_t>(bucket));
  return cudaGetLastError();
}

}  // namespace toktier::gpu::cuda
