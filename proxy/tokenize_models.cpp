// TokenizeService::Init: the models (tokenizer files, chat setups, GPU
// encoders), the state store with the content-addressing index it persists,
// and the shadow verifier.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "proxy/server.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {

core::Status LoadChatModel(const ModelConfig& model, ChatForward default_mode, ChatModel* out) {
  using core::Status;
  out->mode = model.chat_forward.value_or(default_mode);
  out->tools = model.tool_parser;
  out->reasoning = model.reasoning;
  if (out->mode == ChatForward::kText) return Status::Ok();
  std::string path = model.chat_template_config;
  if (path.empty()) path = (std::filesystem::path(model.tokenizer).parent_path() / "tokenizer_config.json").string();
  std::string text;
  if (!ReadWholeFile(path, &text).ok()) {
    return Status::Error(core::StatusCode::kIoError, "chat_forward " +
                                                         std::string(kChatForwardNames[static_cast<size_t>(out->mode)]) +
                                                         " needs a tokenizer_config.json with a chat template; cannot "
                                                         "read " + path);
  }
  return CompileChatTemplate(text, path, out);
}

core::Status TokenizeService::Init() {
  using core::Status;
  for (const ModelConfig& mc : config_.models) {
    auto m = std::make_unique<ModelRuntime>();
    m->config = mc;
    if (Status st = LoadTokenizerFile(mc.tokenizer, mc.encoding, &m->tokenizer); !st.ok()) {
      return Status::Error(st.code(), "model " + mc.name + ": " + st.message());
    }
    auto chat = std::make_shared<ChatModel>();
    if (Status st = LoadChatModel(mc, config_.chat_forward, chat.get()); !st.ok()) {
      return Status::Error(st.code(), "model " + mc.name + ": " + st.message());
    }
    if (chat->mode == ChatForward::kVllm && !m->tokenizer->DecodesByConcatenation()) {
      // Its answers are token IDs, which only such vocabularies turn back
      // into text exactly here.
      return Status::Error("model " + mc.name +
                           ": chat_forward vllm needs a byte-level (ByteLevel decoder) or tiktoken vocabulary");
    }
    m->chat = std::move(chat);
    if (config_.gpu_enabled && gpu::DevicePresent()) {
      gpu::GpuOptions go;
      go.min_bytes = config_.gpu_min_bytes;
      go.max_bytes = config_.gpu_max_bytes;
      go.queue_capacity = config_.gpu_queue_capacity;
      go.device = config_.gpu_device;
      m->gpu = gpu::GpuEncoder::Create(m->tokenizer, go);
    }
    by_name_[mc.name] = m.get();
    for (const auto& a : mc.aliases) by_name_.emplace(a, m.get());
    metrics_->gauge(metrics::Id::kGuardTextMode, {mc.name}).Set(0);
    models_.push_back(std::move(m));
  }
  const int encode_threads =
      config_.encode_threads > 0 ? config_.encode_threads : static_cast<int>(std::thread::hardware_concurrency());
  if (encode_threads > 1) encode_pool_ = std::make_unique<core::EncodePool>(encode_threads);
  for (size_t r = 0; r < gpu::kRouteCount; ++r) {
    gpu_routes_[r] = metrics_->counter(metrics::Id::kGpuRoutes, {gpu::RouteName(static_cast<gpu::Route>(r))});
  }
  encode_parallel_ = metrics_->counter(metrics::Id::kEncodeParallel, {"parallel"});
  encode_pool_busy_ = metrics_->counter(metrics::Id::kEncodeParallel, {"pool_busy"});
  encode_uncut_ = metrics_->counter(metrics::Id::kEncodeParallel, {"uncut"});
  if (config_.state_enabled) {
    store::StoreOptions so;
    so.path = config_.data_dir;
    so.memory_budget_bytes = StoreBudget(config_.memory_budget_bytes);
    so.ttl = std::chrono::seconds(config_.ttl_seconds);
    so.write_queue_capacity = config_.write_queue_capacity;
    so.allow_memory_only_fallback = config_.allow_memory_only_fallback;
    so.chunk_bytes = config_.chunk_bytes;
    so.rocksdb_write_buffer_bytes = config_.rocksdb_write_buffer_bytes;
    so.rocksdb_block_cache_bytes = config_.rocksdb_block_cache_bytes;
    core::Status st;
    store_ = store::StateStore::Open(so, &st);
    if (!store_) return Status::Error(st.code(), "state store: " + st.message());
    if (config_.implicit_sessions) {
      // Content addressing survives restarts: every implicit state carries
      // its index entry as a tag. Oldest first, so the newest holder of a
      // shared prefix wins; expired states are skipped by the store.
      std::vector<std::pair<int64_t, std::string>> tags;
      const size_t max_tags = IndexBudget(config_.memory_budget_bytes) / SessionIndex::kEntryOverhead + 1;
      store_->ForEachTag([&](std::string_view tag, int64_t t) {
        if (tags.size() < max_tags) tags.emplace_back(t, std::string(tag));
      });
      std::sort(tags.begin(), tags.end());
      std::vector<uint64_t> hashes;
      std::string key;
      size_t text_bytes = 0;
      for (const auto& [t, tag] : tags) {
        if (SessionIndex::DecodeTag(tag, &hashes, &key, &text_bytes)) index_.Record(hashes, key, text_bytes);
      }
    }
  }
  if (config_.shadow_sample_rate > 0) {
    core::ShadowOptions so;
    so.sample_rate = config_.shadow_sample_rate;
    // SHADOW HOOK: sampled results are submitted in TokenizeOne; verdicts
    // arrive here and feed the shadow metrics. A mismatch quarantines the
    // version inside the verifier; TokenizeOne then disables the fast path.
    metrics::Metrics* m = metrics_;
    auto names = std::make_shared<std::unordered_map<std::string, std::string>>();
    for (auto& mr : models_) (*names)[mr->tokenizer->version_hash()] = mr->config.name;
    auto in_flight = shadow_bytes_;
    shadow_ = std::make_unique<core::ShadowVerifier>(so, [m, names, in_flight](const core::ShadowEvent& ev) {
      in_flight->fetch_sub(ShadowCharge(ev.text_bytes), std::memory_order_relaxed);
      if (ev.error) return;
      auto it = names->find(ev.version_hash);
      std::string_view model = it == names->end() ? std::string_view(ev.version_hash) : std::string_view(it->second);
      m->counter(metrics::Id::kShadowChecks, {model}).Inc();
      if (!ev.match) {
        m->counter(metrics::Id::kShadowMismatches, {model}).Inc();
        std::fprintf(stderr, "toktier: SHADOW MISMATCH model=%.*s text_hash=%016llx bytes=%zu token=%zu\n",
                     static_cast<int>(model.size()), model.data(), static_cast<unsigned long long>(ev.text_hash),
                     ev.text_bytes, ev.first_difference);
      }
    });
  }
  return Status::Ok();
}

}  // namespace toktier::proxy
