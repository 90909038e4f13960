#include <algorithm>
#include <cstring>

#include "gpu/device_backend.h"
#include "gpu/gpu.h"
#include "gpu/host_pipeline.h"

namespace toktier::gpu {

// The device classes are core's scanner classes, bit for bit.
#define TT_SAME_CLASS(x) static_assert(static_cast<uint32_t>(logic::k##x) == static_cast<uint32_t>(core::kDev##x))
TT_SAME_CLASS(L);
TT_SAME_CLASS(N);
TT_SAME_CLASS(Ws);
TT_SAME_CLASS(CrLf);
TT_SAME_CLASS(Space);
TT_SAME_CLASS(O);
TT_SAME_CLASS(UpSet);
TT_SAME_CLASS(LowSet);
TT_SAME_CLASS(LM);
TT_SAME_CLASS(PS);
TT_SAME_CLASS(Cjk);
TT_SAME_CLASS(AsciiPunct);
TT_SAME_CLASS(AsciiAlpha);
TT_SAME_CLASS(CrLfSlash);
TT_SAME_CLASS(Apos);
TT_SAME_CLASS(DsOther);
#undef TT_SAME_CLASS
static_assert(logic::kCl100k == static_cast<uint8_t>(core::DeviceFamily::kCl100k) &&
              logic::kQwen2 == static_cast<uint8_t>(core::DeviceFamily::kQwen2) &&
              logic::kO200k == static_cast<uint8_t>(core::DeviceFamily::kO200k) &&
              logic::kDeepSeekV3 == static_cast<uint8_t>(core::DeviceFamily::kDeepSeekV3));
static_assert(sizeof(logic::Segment) == 16 && sizeof(logic::MergeSlot) == 16 && sizeof(logic::VocabSlot) == 24);

std::string_view RouteName(Route r) {
  switch (r) {
    case Route::kDevice: return "device";
    case Route::kDisabled: return "disabled";
    case Route::kBelowThreshold: return "below_threshold";
    case Route::kNoDevice: return "no_device";
    case Route::kUnsupportedFamily: return "unsupported_family";
    case Route::kNotNfc: return "not_nfc";
    case Route::kTooLarge: return "too_large";
    case Route::kQueueFull: return "queue_full";
    case Route::kCudaError: return "cuda_error";
  }
  return "unknown";
}

bool CudaCompiled() { return BackendCompiled(); }
bool DevicePresent() { return BackendDevicePresent(); }

namespace {

// The pipeline's content tokens into a state exactly as Repairer::Reset
// builds it: long pieces encoded on the host (core's BPE), the
// post-processor's specials around the content (ends 0 and text size), the
// added tokens' spans.
size_t FinishState(const core::Tokenizer& tok, const core::DeviceTables& dt, std::string_view text,
                   bool add_special_tokens, const std::vector<core::DeviceSegment>& segs,
                   const std::vector<uint32_t>& content_ids, const std::vector<uint32_t>& content_ends,
                   core::TokenState& state) {
  const bool specials = add_special_tokens && !dt.tiktoken;
  std::vector<uint32_t> ids, ends;
  const size_t extra = specials ? dt.prefix_ids.size() + dt.suffix_ids.size() : 0;
  ids.reserve(content_ids.size() + extra);
  ends.reserve(content_ids.size() + extra);
  if (specials) {
    ids.insert(ids.end(), dt.prefix_ids.begin(), dt.prefix_ids.end());
    ends.insert(ends.end(), dt.prefix_ids.size(), 0);
  }
  size_t long_pieces = 0;
  std::vector<uint32_t> pids, plens;
  for (size_t k = 0; k < content_ids.size(); ++k) {
    if (content_ids[k] != logic::kLongPiece) {
      ids.push_back(content_ids[k]);
      ends.push_back(content_ends[k]);
      continue;
    }
    ++long_pieces;
    const uint32_t b = k > 0 ? content_ends[k - 1] : 0;
    const uint32_t e = content_ends[k];
    pids.clear();
    plens.clear();
    core::DeviceEncodePiece(tok, text.substr(b, e - b), pids, plens);
    uint32_t pos = b;
    for (size_t j = 0; j < pids.size(); ++j) {
      pos += plens[j];
      ids.push_back(pids[j]);
      ends.push_back(pos);
    }
  }
  if (specials) {
    ids.insert(ids.end(), dt.suffix_ids.begin(), dt.suffix_ids.end());
    ends.insert(ends.end(), dt.suffix_ids.size(), static_cast<uint32_t>(text.size()));
  }
  std::vector<core::TextSpan> added;
  for (const auto& s : segs) {
    if (s.is_added) added.push_back(core::TextSpan{s.begin, s.end});
  }
  const bool ok = state.Assign(std::string(text), std::move(ids), std::move(ends), std::move(added),
                               dt.version_hash, add_special_tokens);
  (void)ok;  // consistent by construction (tests check every field)
  return long_pieces;
}

}  // namespace

GpuEncoder::GpuEncoder() = default;
GpuEncoder::~GpuEncoder() = default;

std::unique_ptr<GpuEncoder> GpuEncoder::Create(std::shared_ptr<const core::Tokenizer> tok, const GpuOptions& o) {
  std::unique_ptr<GpuEncoder> e(new GpuEncoder());
  e->tok_ = std::move(tok);
  e->opt_ = o;
  e->tables_ = std::make_unique<HostTables>(HostTables::Build(*e->tok_));
  if (o.enabled && e->tables_->supported() && BackendCompiled() && BackendDevicePresent()) {
    std::string error;
    e->backend_ = DeviceBackend::Create(*e->tables_, o, &error);
    e->backend_failed_ = e->backend_ == nullptr;
  }
  return e;
}

const std::string& GpuEncoder::unsupported_reason() const { return tables_->export_.unsupported_reason; }
bool GpuEncoder::supported() const { return tables_->supported(); }

Route GpuEncoder::Count(Route r) {
  routes_[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
  return r;
}

GpuEncoder::Stats GpuEncoder::stats() const {
  Stats s;
  for (size_t i = 0; i < kRouteCount; ++i) s.routes[i] = routes_[i].load(std::memory_order_relaxed);
  s.long_pieces = long_pieces_.load(std::memory_order_relaxed);
  return s;
}

float GpuEncoder::last_device_ms() const { return backend_ ? backend_->last_graph_ms() : 0.0f; }

Route GpuEncoder::TryReset(std::string_view text, bool add_special_tokens, core::TokenState& state) {
  if (!opt_.enabled) return Count(Route::kDisabled);
  if (text.size() < opt_.min_bytes) return Count(Route::kBelowThreshold);
  if (!tables_->supported()) return Count(Route::kUnsupportedFamily);
  if (text.size() > opt_.max_bytes) return Count(Route::kTooLarge);
  std::vector<core::DeviceSegment> segs;
  if (!core::SplitDeviceSegments(*tok_, text, add_special_tokens, segs)) return Count(Route::kNotNfc);
  if (!backend_) return Count(backend_failed_ ? Route::kCudaError : Route::kNoDevice);
  // Callers beyond the one on the device wait; more than queue_capacity
  // waiting go to the CPU.
  if (waiting_.fetch_add(1) >= opt_.queue_capacity + 1) {
    waiting_.fetch_sub(1);
    return Count(Route::kQueueFull);
  }
  std::vector<uint32_t> ids, ends;
  size_t long_pieces = 0;
  std::string error;
  Route r;
  {
    std::lock_guard<std::mutex> lock(device_mu_);
    r = backend_->Run(text, PackSegments(segs), ids, ends, &long_pieces, &error);
  }
  waiting_.fetch_sub(1);
  if (r != Route::kDevice) return Count(r);
  long_pieces_.fetch_add(FinishState(*tok_, tables_->export_, text, add_special_tokens, segs, ids, ends, state),
                         std::memory_order_relaxed);
  return Count(Route::kDevice);
}

bool GpuEncoder::HostReset(std::string_view text, bool add_special_tokens, core::TokenState& state,
                           Route* why) const {
  if (!tables_->supported()) {
    if (why) *why = Route::kUnsupportedFamily;
    return false;
  }
  std::vector<core::DeviceSegment> segs;
  if (!core::SplitDeviceSegments(*tok_, text, add_special_tokens, segs)) {
    if (why) *why = Route::kNotNfc;
    return false;
  }
  std::vector<uint32_t> ids, ends;
  RunHostPipeline(*tables_, text, PackSegments(segs), ids, ends);
  FinishState(*tok_, tables_->export_, text, add_special_tokens, segs, ids, ends, state);
  if (why) *why = Route::kDevice;
  return true;
}

}  // namespace toktier::gpu
