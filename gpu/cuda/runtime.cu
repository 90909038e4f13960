// The CUDA side of GpuEncoder (gpu/device_backend.h): the tables uploaded
// once, every buffer preallocated for max_bytes, one pinned staging buffer
// each way, and the pipeline captured as one CUDA graph per power-of-two
// size bucket (kernels read the request's size from the staged header, so
// a graph serves every size in its bucket). A request is one H2D copy, one
// graph launch (whose last node copies the counts to pinned memory) and one
// D2H copy of exactly the ids and ends. Every CUDA call is checked; an error
// becomes Route::kCudaError with the failing call named.
#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <string>

#include "gpu/cuda/kernels.h"
#include "gpu/device_backend.h"

namespace toktier::gpu {

using cuda::Args;
using cuda::DevCounts;
using cuda::DevHeader;

namespace {

#define TT_CUDA_TRY(call)                                                            \
  do {                                                                               \
    const cudaError_t tt_err_ = (call);                                              \
    if (tt_err_ != cudaSuccess) {                                                    \
      if (error) *error = std::string(#call) + ": " + cudaGetErrorString(tt_err_);   \
      return false;                                                                  \
    }                                                                                \
  } while (0)

template <typename T>
bool Upload(const T* host, size_t count, T** dev, std::string* error) {
  const size_t bytes = count * sizeof(T) > 0 ? count * sizeof(T) : sizeof(T);
  TT_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(dev), bytes));
  if (count > 0) TT_CUDA_TRY(cudaMemcpy(*dev, host, count * sizeof(T), cudaMemcpyHostToDevice));
  return true;
}

size_t BucketFor(size_t n) {
  size_t b = 4096;
  while (b < n) b <<= 1;
  return b;
}

}  // namespace

bool BackendCompiled() { return true; }

bool BackendDevicePresent() {
  static const bool present = [] {
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  }();
  return present;
}

struct DeviceBackend::Impl {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  size_t cap = 0;       // bucket of max_bytes: every per-byte buffer's size
  size_t max_segs = 0;  // segments the staging buffer holds
  size_t stage_bytes = 0;
  // Tables.
  uint16_t* d_block_of = nullptr;
  uint16_t* d_blocks = nullptr;
  logic::MergeSlot* d_merges = nullptr;
  logic::VocabSlot* d_vocab = nullptr;
  uint8_t* d_arena = nullptr;
  uint32_t* d_byte_ids = nullptr;
  // Buffers.
  uint8_t* d_stage = nullptr;
  uint8_t* h_stage = nullptr;  // pinned
  uint8_t *d_kind = nullptr, *d_span = nullptr, *d_piece = nullptr, *d_token = nullptr;
  uint32_t *d_tid = nullptr, *d_spans = nullptr, *d_pieces = nullptr, *d_tokens = nullptr, *d_out = nullptr;
  uint32_t* h_out = nullptr;  // pinned
  DevCounts* d_counts = nullptr;
  DevCounts* h_counts = nullptr;  // pinned
  void* d_temp = nullptr;
  size_t temp_bytes = 0;
  Args args{};
  std::map<size_t, cudaGraphExec_t> graphs;
  float last_ms = 0.0f;

  ~Impl() {
    for (auto& [bucket, exec] : graphs) cudaGraphExecDestroy(exec);
    void* dev[] = {d_block_of, d_blocks, d_merges, d_vocab, d_arena, d_byte_ids, d_stage, d_kind, d_span,
                   d_piece, d_token, d_tid, d_spans, d_pieces, d_tokens, d_out, d_counts, d_temp};
    for (void* p : dev) {
      if (p) cudaFree(p);
    }
    if (h_stage) cudaFreeHost(h_stage);
    if (h_out) cudaFreeHost(h_out);
    if (h_counts) cudaFreeHost(h_counts);
    if (ev0) cudaEventDestroy(ev0);
    if (ev1) cudaEventDestroy(ev1);
    if (stream) cudaStreamDestroy(stream);
  }

  bool Init(const HostTables& t, const GpuOptions& o, std::string* error) {
    device = o.device;
    TT_CUDA_TRY(cudaSetDevice(device));
    TT_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TT_CUDA_TRY(cudaEventCreate(&ev0));
    TT_CUDA_TRY(cudaEventCreate(&ev1));
    if (!Upload(t.block_of.data(), t.block_of.size(), &d_block_of, error)) return false;
    if (!Upload(t.blocks.data(), t.blocks.size(), &d_blocks, error)) return false;
    if (!Upload(t.merge_slots.data(), t.merge_slots.size(), &d_merges, error)) return false;
    if (!Upload(t.vocab_slots.data(), t.vocab_slots.size(), &d_vocab, error)) return false;
    if (!Upload(t.arena.data(), t.arena.size(), &d_arena, error)) return false;
    if (!Upload(t.byte_ids, 256, &d_byte_ids, error)) return false;
    cap = BucketFor(o.max_bytes);
    max_segs = cap / 16 + 1024;
    stage_bytes = cuda::kTextOffset + cuda::RoundUp16(cap) + max_segs * sizeof(logic::Segment);
    TT_CUDA_TRY(cudaMalloc(&d_stage, stage_bytes));
    TT_CUDA_TRY(cudaMallocHost(&h_stage, stage_bytes));
    TT_CUDA_TRY(cudaMalloc(&d_kind, cap));
    TT_CUDA_TRY(cudaMalloc(&d_span, cap));
    TT_CUDA_TRY(cudaMalloc(&d_piece, cap));
    TT_CUDA_TRY(cudaMalloc(&d_token, cap));
    TT_CUDA_TRY(cudaMalloc(&d_tid, cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMalloc(&d_spans, cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMalloc(&d_pieces, cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMalloc(&d_tokens, cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMalloc(&d_out, 2 * cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMallocHost(&h_out, 2 * cap * sizeof(uint32_t)));
    TT_CUDA_TRY(cudaMalloc(&d_counts, sizeof(DevCounts)));
    TT_CUDA_TRY(cudaMallocHost(&h_counts, sizeof(DevCounts)));
    // CUB's temporary storage for the largest bucket (the smaller ones need no more).
    TT_CUDA_TRY(cuda::Compact(nullptr, temp_bytes, d_span, d_spans, &d_counts->nspans, cap, stream));
    TT_CUDA_TRY(cudaMalloc(&d_temp, temp_bytes > 0 ? temp_bytes : 16));
    args.stage = d_stage;
    args.kind = d_kind;
    args.span_flag = d_span;
    args.piece_flag = d_piece;
    args.token_flag = d_token;
    args.tid = d_tid;
    args.spans = d_spans;
    args.pieces = d_pieces;
    args.tokens = d_tokens;
    args.out = d_out;
    args.counts = d_counts;
    logic::Tables tv = t.View();
    tv.cls = logic::ClassView{d_block_of, d_blocks};
    tv.merges.slots = d_merges;
    tv.vocab.slots = d_vocab;
    tv.vocab.arena = d_arena;
    tv.byte_ids = d_byte_ids;
    args.tables = tv;
    return true;
  }

  // Records the pipeline for one bucket on the stream being captured.
  bool Record(size_t bucket, std::string* error) {
    TT_CUDA_TRY(cudaMemsetAsync(d_counts, 0, sizeof(DevCounts), stream));
    TT_CUDA_TRY(cudaMemsetAsync(d_kind, 0, bucket, stream));
    TT_CUDA_TRY(cudaMemsetAsync(d_piece, 0, bucket, stream));
    TT_CUDA_TRY(cudaMemsetAsync(d_token, 0, bucket, stream));
    TT_CUDA_TRY(cuda::LaunchMarkSegments(args, bucket, stream));
    TT_CUDA_TRY(cuda::LaunchSpanFlags(args, bucket, stream));
    size_t tb = temp_bytes;
    TT_CUDA_TRY(cuda::Compact(d_temp, tb, d_span, d_spans, &d_counts->nspans, bucket, stream));
    TT_CUDA_TRY(cuda::LaunchSplitSpans(args, bucket, stream));
    tb = temp_bytes;
    TT_CUDA_TRY(cuda::Compact(d_temp, tb, d_piece, d_pieces, &d_counts->npieces, bucket, stream));
    TT_CUDA_TRY(cuda::LaunchBpePieces(args, bucket, stream));
    tb = temp_bytes;
    TT_CUDA_TRY(cuda::Compact(d_temp, tb, d_token, d_tokens, &d_counts->ntok, bucket, stream));
    TT_CUDA_TRY(cuda::LaunchEmitTokens(args, bucket, stream));
    TT_CUDA_TRY(cudaMemcpyAsync(h_counts, d_counts, sizeof(DevCounts), cudaMemcpyDeviceToHost, stream));
    return true;
  }

  bool GraphFor(size_t bucket, cudaGraphExec_t* exec, std::string* error) {
    auto it = graphs.find(bucket);
    if (it != graphs.end()) {
      *exec = it->second;
      return true;
    }
    size_t need = 0;
    TT_CUDA_TRY(cuda::Compact(nullptr, need, d_span, d_spans, &d_counts->nspans, bucket, stream));
    if (need > temp_bytes) {
      if (error) *error = "CUB temporary storage grew for a smaller bucket";
      return false;
    }
    TT_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const bool recorded = Record(bucket, error);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    if (!recorded) {
      if (graph) cudaGraphDestroy(graph);
      return false;
    }
    if (end != cudaSuccess) {
      if (error) *error = std::string("cudaStreamEndCapture: ") + cudaGetErrorString(end);
      return false;
    }
    const cudaError_t inst = cudaGraphInstantiate(exec, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) {
      if (error) *error = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
      return false;
    }
    graphs.emplace(bucket, *exec);
    return true;
  }

  bool Run(std::string_view text, const std::vector<logic::Segment>& segs, std::vector<uint32_t>& ids,
           std::vector<uint32_t>& ends, size_t* long_pieces, std::string* error) {
    const size_t n = text.size();
    const size_t bucket = BucketFor(n);
    TT_CUDA_TRY(cudaSetDevice(device));
    cudaGraphExec_t exec = nullptr;
    if (!GraphFor(bucket, &exec, error)) return false;
    DevHeader h{static_cast<uint32_t>(n), static_cast<uint32_t>(segs.size()), {0, 0}};
    std::memcpy(h_stage, &h, sizeof h);
    std::memcpy(h_stage + cuda::kTextOffset, text.data(), n);
    const size_t seg_off = cuda::kTextOffset + cuda::RoundUp16(n);
    std::memcpy(h_stage + seg_off, segs.data(), segs.size() * sizeof(logic::Segment));
    const size_t in_bytes = seg_off + segs.size() * sizeof(logic::Segment);
    TT_CUDA_TRY(cudaMemcpyAsync(d_stage, h_stage, in_bytes, cudaMemcpyHostToDevice, stream));
    TT_CUDA_TRY(cudaEventRecord(ev0, stream));
    TT_CUDA_TRY(cudaGraphLaunch(exec, stream));
    TT_CUDA_TRY(cudaEventRecord(ev1, stream));
    TT_CUDA_TRY(cudaStreamSynchronize(stream));
    const uint32_t ntok = h_counts->ntok;
    if (ntok > cap) {
      if (error) *error = "token count out of range";
      return false;
    }
    TT_CUDA_TRY(cudaMemcpyAsync(h_out, d_out, size_t{2} * ntok * sizeof(uint32_t), cudaMemcpyDeviceToHost, stream));
    TT_CUDA_TRY(cudaStreamSynchronize(stream));
    TT_CUDA_TRY(cudaEventElapsedTime(&last_ms, ev0, ev1));
    ids.assign(h_out, h_out + ntok);
    ends.assign(h_out + ntok, h_out + 2 * size_t{ntok});
    *long_pieces = h_counts->nlong;
    return true;
  }
};

#undef TT_CUDA_TRY

DeviceBackend::DeviceBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceBackend::~DeviceBackend() = default;

std::unique_ptr<DeviceBackend> DeviceBackend::Create(const HostTables& tables, const GpuOptions& o,
                                                     std::string* error) {
  auto impl = std::make_unique<Impl>();
  if (!impl->Init(tables, o, error)) return nullptr;
  return std::unique_ptr<DeviceBackend>(new DeviceBackend(std::move(impl)));
}

Route DeviceBackend::Run(std::string_view text, const std::vector<logic::Segment>& segs, std::vector<uint32_t>& ids,
                         std::vector<uint32_t>& ends, size_t* long_pieces, std::string* error) {
  if (text.size() > impl_->cap || segs.size() > impl_->max_segs) return Route::kTooLarge;
  return impl_->Run(text, segs, ids, ends, long_pieces, error) ? Route::kDevice : Route::kCudaError;
}

float DeviceBackend::last_graph_ms() const { return impl_->last_ms; }

}  // namespace toktier::gpu
