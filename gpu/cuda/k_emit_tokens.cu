// Kernel 5: the token list into the output: ids at out[0, ntok), each
// token's end byte offset (the next token's start) at out[ntok, 2 ntok).
#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

__global__ void EmitTokensKernel(Args a, uint32_t bucket) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = a.counts->ntok;
  if (k >= count || k >= bucket) return;
  const logic::Request r = RequestOf(a);
  logic::EmitTokenBody(r, a.tokens, count, k, a.out, a.out + count);
}

cudaError_t LaunchEmitTokens(const Args& a, size_t bucket, cudaStream_t s) {
  EmitTokensKernel<<<GridFor(bucket), kBlock, 0, s>>>(a, static_cast<uint32_t>(bucket));
  return cudaGetLastError();
}

}  // namespace toktier::gpu::cuda
