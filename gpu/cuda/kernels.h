// gpu/cuda internal: what the kernels read, and their checked launchers (one
// kernel per .cu). Each launcher returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/device_logic.h"

namespace toktier::gpu::cuda {

constexpr int kBlock = 256;

// At the start of the input staging buffer; the text follows (at offset
// kTextOffset), then the segments at kTextOffset + RoundUp16(n).
struct DevHeader {
  uint32_t n;
  uint32_t nsegs;
  uint32_t pad[2];
};
constexpr size_t kTextOffset = 16;
TT_HDI size_t RoundUp16(size_t n) { return (n + 15) & ~size_t{15}; }

// Outputs of the compactions and the long-piece count (one D2H copy).
struct DevCounts {
  uint32_t nspans;
  uint32_t npieces;
  uint32_t ntok;
  uint32_t nlong;
};

// Everything one request's kernels read: fixed device pointers (a graph is
// captured once per size bucket) and the header with the request's size.
struct Args {
  const uint8_t* stage;  // DevHeader, text, segments
  uint8_t* kind;
  uint8_t* span_flag;
  uint8_t* piece_flag;
  uint8_t* token_flag;
  uint32_t* tid;
  uint32_t* spans;
  uint32_t* pieces;
  uint32_t* tokens;
  uint32_t* out;  // ids [0, ntok), ends [ntok, 2 ntok)
  DevCounts* counts;
  logic::Tables tables;
};

__device__ __forceinline__ logic::Request RequestOf(const Args& a) {
  const DevHeader* h = reinterpret_cast<const DevHeader*>(a.stage);
  return logic::Request{a.stage + kTextOffset, h->n, a.kind, a.span_flag, a.piece_flag, a.token_flag, a.tid};
}

inline unsigned GridFor(size_t items) { return static_cast<unsigned>((items + kBlock - 1) / kBlock); }

cudaError_t LaunchMarkSegments(const Args& a, size_t bucket, cudaStream_t s);
cudaError_t LaunchSpanFlags(const Args& a, size_t bucket, cudaStream_t s);
cudaError_t LaunchSplitSpans(const Args& a, size_t bucket, cudaStream_t s);
cudaError_t LaunchBpePieces(const Args& a, size_t bucket, cudaStream_t s);
cudaError_t LaunchEmitTokens(const Args& a, size_t bucket, cudaStream_t s);

// Flag -> list of positions (CUB DeviceSelect::Flagged over `bucket` items;
// *count gets the number). temp may be null to query temp_bytes.
cudaError_t Compact(void* temp, size_t& temp_bytes, const uint8_t* flags, uint32_t* out, uint32_t* count,
                    size_t bucket, cudaStream_t s);

}  // namespace toktier::gpu::cuda
