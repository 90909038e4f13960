// Kernel 4: one thread per piece: the whole-piece lookup, else BPE (lowest
// rank first, leftmost on ties) with the ranks in the device merge table;
// pieces longer than logic::kMaxDevicePiece are left to the host (counted).
#include "gpu/cuda/kernels.h"

namespace toktier::gpu::cuda {

__global__ void BpePiecesKernel(Args a, uint32_t bucket) {
  const uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t count = a.counts->npieces;
  if (k >= count || k >= bucket) return;
  const logic::Request r = RequestOf(a);
  if (logic::BpePieceBody(r, a.tables, a.pieces, count, k)) atomicAdd(&a.counts->nlong, 1u);
}

cudaError_t LaunchBpePieces(const Args& a, size_t bucket, cudaStream_t s) {
  BpePiecesKernel<<<GridFor(bucket), kBlock, 0, s>>>(a, static_cast<uint32_t>(bucket));
  return cudaGetLastError();
}

}  // namespace toktier::gpu::cuda
