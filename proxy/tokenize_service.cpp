#include "proxy/tokenize_service.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>
#include <random>

#include "proxy/tokenizer_files.h"

namespace toktier::proxy {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string Hex(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

constexpr std::string_view kOpen = "[";
constexpr std::string_view kClose = "]";
constexpr std::string_view kComma = ",";

}  // namespace

namespace {

// The memory budget's split (docs/proxy.md "Memory"): the store's memory
// tier gets half, the content-addressing index 1/32, the session caches the
// rest.
size_t StoreBudget(size_t budget) { return budget / 2; }
size_t IndexBudget(size_t budget) { return budget / 32; }
size_t CacheBudget(size_t budget) { return budget - StoreBudget(budget) - IndexBudget(budget); }

// Linear counting of tenants: 2^20 bits (128 KiB), exact in practice for a
// few thousand tenants, within about 1% up to a few million.
constexpr size_t kTenantBits = size_t{1} << 20;

// Explicit session ids longer than this are keyed by their 128-bit hash, so
// per-session bookkeeping does not hold 64 KiB header values.
constexpr size_t kMaxRawSessionId = 128;

// Shadow samples wait in the verifier's queue as copies (text and IDs: at
// most about 5 bytes per text byte); their bytes in flight are capped, so a
// run of huge prompts cannot queue gigabytes for verification.
constexpr size_t kShadowMaxBytes = size_t{256} << 20;

// After a job over this many prompt bytes, scratch buffers are released and
// malloc returns free pages to the system.
constexpr size_t kReleaseAfterBytes = size_t{4} << 20;

}  // namespace

TokenizeService::TokenizeService(const Config& config, metrics::Metrics* metrics)
    : config_(config),
      metrics_(metrics),
      index_(IndexBudget(config.memory_budget_bytes)),
      tenant_bits_(kTenantBits / 64, 0),
      tenant_zero_bits_(kTenantBits) {
  // 128 random bits for the implicit keys of this process.
  try {
    std::random_device rd;
    for (uint64_t& x : key_salt_) x = (uint64_t{rd()} << 32) ^ rd();
  } catch (...) {
    // No entropy source: the clock and the address space still differ per run.
    key_salt_[0] = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
    key_salt_[1] = reinterpret_cast<uintptr_t>(this) ^ (static_cast<uint64_t>(getpid()) << 32);
  }
}

TokenizeService::~TokenizeService() { Stop(); }

uint64_t TokenizeService::TenantHash(std::string_view authorization) {
  if (authorization.empty()) return 0;
  return XXH3_64bits_withSeed(authorization.data(), authorization.size(), 0x746f6b74696572ULL);
}

bool TokenizeService::Init(std::string* error) {
  for (const ModelConfig& mc : config_.models) {
    auto m = std::make_unique<ModelRuntime>();
    m->config = mc;
    std::string err;
    m->tokenizer = cli::LoadTokenizerFile(mc.tokenizer, mc.encoding, &err);
    if (!m->tokenizer) {
      *error = "model " + mc.name + ": " + err;
      return false;
    }
    auto chat = std::make_shared<ChatModel>();
    if (!LoadChatModel(mc, config_.chat_forward, chat.get(), &err)) {
      *error = "model " + mc.name + ": " + err;
      return false;
    }
    if (chat->mode == ChatForward::kVllm && !m->tokenizer->DecodesByConcatenation()) {
      // Its answers are token IDs, which only such vocabularies turn back
      // into text exactly here.
      *error = "model " + mc.name + ": chat_forward vllm needs a byte-level (ByteLevel decoder) or tiktoken vocabulary";
      return false;
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
    store::StoreStatus st;
    store_ = store::StateStore::Open(so, &st);
    if (!store_) {
      *error = "state store: " + st.message();
      return false;
    }
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
  return true;
}

void TokenizeService::Start() {
  int n = std::max(1, config_.workers);
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
  for (auto& w : workers_) {
    Worker* wp = w.get();
    w->thread = std::thread([this, wp] {
      pthread_setname_np(pthread_self(), "toktier-worker");  // visible in top -H and perf
      Run(wp);
    });
  }
  const int lanes = std::clamp(config_.large_workers, 0, 64);
  for (int i = 0; i < lanes; ++i) {
    large_.threads.emplace_back([this] {
      pthread_setname_np(pthread_self(), "toktier-large");
      RunLarge();
    });
  }
}

void TokenizeService::Stop() {
  if (workers_.empty()) return;
  stopping_ = true;
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->cv.notify_all();
  }
  // Workers finish their queues and wait for their jobs on the large lane,
  // which keeps running until they are gone.
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
  {
    std::lock_guard<std::mutex> lock(large_.mu);
    large_.stopping = true;
  }
  large_.cv.notify_all();
  for (auto& t : large_.threads) {
    if (t.joinable()) t.join();
  }
  large_.threads.clear();
  workers_.clear();
  if (store_) store_->Flush();
}

ModelRuntime* TokenizeService::FindModel(std::string_view name) {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<ModelRuntime*> TokenizeService::Models() {
  std::vector<ModelRuntime*> out;
  for (auto& m : models_) out.push_back(m.get());
  return out;
}

size_t TokenizeService::QueueDepth() const { return queued_.load(std::memory_order_relaxed); }

size_t TokenizeService::ShadowCharge(size_t text_bytes) { return 5 * text_bytes + 64; }

void TokenizeService::MaybeShadow(const std::shared_ptr<const core::Tokenizer>& tok, std::string_view text,
                                  bool add_special, const std::vector<uint32_t>& ids) {
  const size_t charge = ShadowCharge(text.size());
  const size_t cap = std::min(kShadowMaxBytes, config_.memory_budget_bytes / 4);
  // Reserve first (several workers submit at once); give back if not queued.
  if (shadow_bytes_->fetch_add(charge, std::memory_order_relaxed) + charge > cap) {
    shadow_bytes_->fetch_sub(charge, std::memory_order_relaxed);
    return;  // sampling skipped: verification is best effort, memory is not
  }
  if (shadow_->MaybeSubmit(tok, text, add_special, ids) != core::ShadowSubmit::kQueued) {
    shadow_bytes_->fetch_sub(charge, std::memory_order_relaxed);
  }
}

std::string TokenizeService::NewImplicitKey(const std::string& tenant) {
  const uint64_t n = implicit_counter_.fetch_add(1, std::memory_order_relaxed);
  uint64_t in[3] = {key_salt_[0], key_salt_[1], n};
  XXH128_hash_t h = XXH3_128bits(in, sizeof in);
  return tenant + "i:" + Hex(h.high64) + Hex(h.low64);
}

core::EncodeOptions TokenizeService::EncodeOpts() const {
  core::EncodeOptions e;
  e.pool = encode_pool_.get();
  e.parallel_min_bytes = config_.encode_parallel_min_bytes;
  return e;
}

void TokenizeService::CountEncode(const core::EncodeOutcome& e) {
  if (e.chunks == 0 && !e.pool_busy) return;  // not long enough for the pool (or no pool)
  // "parallel": the chunks went to the pool (however many of its threads
  // found one free); "uncut": no cut point, one chunk.
  (e.pool_busy ? encode_pool_busy_ : e.chunks > 1 ? encode_parallel_ : encode_uncut_).Inc();
}

bool TokenizeService::TryGpu(ModelRuntime* model, core::TokenState& st, std::string_view text, bool add_special) {
  if (!config_.gpu_enabled) return false;
  if (!model->gpu) {
    // No device (or none usable): counted like the encoder would.
    const gpu::Route r = text.size() < config_.gpu_min_bytes ? gpu::Route::kBelowThreshold : gpu::Route::kNoDevice;
    gpu_routes_[static_cast<size_t>(r)].Inc();
    return false;
  }
  const gpu::Route r = model->gpu->TryReset(text, add_special, st);
  gpu_routes_[static_cast<size_t>(r)].Inc();
  return r == gpu::Route::kDevice;
}

core::RepairOutcome TokenizeService::FullEncode(ModelRuntime* model, core::TokenState& st, std::string_view text,
                                                bool add_special, bool quarantined, core::FullReason reason) {
  core::RepairOutcome o;
  o.path = core::RepairPath::kFull;
  o.full_reason = reason;
  if (quarantined || !TryGpu(model, st, text, add_special)) {
    core::Repairer::Reset(*model->tokenizer, st, text, add_special, /*generic_path=*/quarantined, EncodeOpts(),
                          &o.encode);
    CountEncode(o.encode);
  }
  o.fresh_tokens = st.ids().size();
  return o;
}

void TokenizeService::CountTenant(uint64_t tenant) {
  const uint64_t bit = XXH3_64bits(&tenant, sizeof tenant) & (kTenantBits - 1);
  std::lock_guard<std::mutex> lock(tenants_mu_);
  uint64_t& word = tenant_bits_[bit / 64];
  const uint64_t mask = uint64_t{1} << (bit % 64);
  if (word & mask) return;
  word |= mask;
  --tenant_zero_bits_;
  // n ~ -m ln(zero fraction); saturates near m ln m when every bit is set.
  const double m = static_cast<double>(kTenantBits);
  const double zeros = std::max<double>(1.0, static_cast<double>(tenant_zero_bits_));
  metrics_->gauge(metrics::Id::kTenants).Set(std::round(-m * std::log(zeros / m)));
}

bool TokenizeService::Submit(ModelRuntime* model, std::shared_ptr<const std::string> body,
                             std::shared_ptr<CompletionRequest> req, const SessionRef& session, Done done) {
  assert(model && body && req && !req->prompts.empty());
  Job job;
  job.model = model;
  job.anonymous = session.anonymous;
  job.session_header = !session.explicit_id.empty();
  const size_t n = req->prompts.size();
  job.keys.resize(n);
  job.hashes.resize(n);
  job.implicit.assign(n, false);
  const std::string tenant = "t" + Hex(session.tenant) + ":";
  if (!session.anonymous) CountTenant(session.tenant);
  if (store_) {
    if (!session.explicit_id.empty()) {
      std::string id = session.explicit_id;
      if (id.size() > kMaxRawSessionId) {
        XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
        id = "h" + Hex(h.high64) + Hex(h.low64);
      }
      job.pin = tenant + "x:" + id;
      for (size_t i = 0; i < n; ++i) {
        job.keys[i] = job.pin;
        if (n > 1) job.keys[i] += "#" + std::to_string(i);
      }
    } else if (config_.implicit_sessions && n == 1) {
      // Content addressing: the state sharing the deepest leading block.
      job.implicit[0] = true;
      // Hashes of the raw (escaped) bytes: no unescaping on the I/O thread,
      // and one client escapes one conversation the same way every time.
      job.hashes[0] = SessionIndex::PrefixHashes(RawPrompt(*body, *req, 0), session.tenant);
      if (!job.hashes[0].empty()) {
        SessionIndex::Match m = index_.Lookup(job.hashes[0]);
        // Continue that state only when the new prompt shares at least half
        // of it (a deeper level would have matched otherwise); a prompt that
        // branches off early (another conversation with the same system
        // prompt) gets its own state instead of thrashing that one.
        job.keys[0] = !m.key.empty() && m.state_bytes < 2 * m.matched_bytes ? m.key : NewImplicitKey(tenant);
        job.pin = job.keys[0];
      }
    }
  }
  // Pin by the session (stateless jobs go round robin).
  const size_t wi = !job.pin.empty() ? XXH3_64bits(job.pin.data(), job.pin.size()) % workers_.size()
                                     : next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size();
  job.body = std::move(body);
  job.req = std::move(req);
  job.done = std::move(done);
  Worker* w = workers_[wi].get();
  {
    std::lock_guard<std::mutex> lock(w->mu);
    if (stopping_ || w->backlog.load(std::memory_order_relaxed) >= config_.worker_queue_capacity) return false;
    w->queue.push_back(std::move(job));
    w->backlog.fetch_add(1, std::memory_order_relaxed);
    queued_.fetch_add(1, std::memory_order_relaxed);
  }
  w->cv.notify_one();
  return true;
}

void TokenizeService::Run(Worker* w) {
  for (;;) {
    Job job;
    LargeJob back;
    bool have_back = false;
    {
      std::unique_lock<std::mutex> lock(w->mu);
      // Stopping: finish the queue and wait for the jobs on the large lane
      // (their sessions' parked jobs come back to this queue).
      w->cv.wait(lock, [&] {
        return !w->returned.empty() || !w->queue.empty() || (stopping_ && w->outstanding == 0);
      });
      if (!w->returned.empty()) {
        back = std::move(w->returned.front());
        w->returned.pop_front();
        have_back = true;
      } else if (!w->queue.empty()) {
        job = std::move(w->queue.front());
        w->queue.pop_front();
      } else {
        return;  // stopping and drained
      }
    }
    if (have_back) {
      OnLargeDone(w, back);
    } else {
      Dispatch(w, job);
    }
  }
}

void TokenizeService::Dispatch(Worker* w, Job& job) {
  if (!job.pin.empty()) {
    auto p = w->parked.find(job.pin);
    if (p != w->parked.end()) {
      // Its session is on the large lane: run after it, in order.
      p->second.push_back(std::move(job));
      return;
    }
  }
  if (!large_.threads.empty() && IsLarge(w, job)) {
    if (SendLarge(w, job)) return;
    w->backlog.fetch_sub(1, std::memory_order_relaxed);
    queued_.fetch_sub(1, std::memory_order_relaxed);
    return Passthrough(job);
  }
  w->backlog.fetch_sub(1, std::memory_order_relaxed);
  queued_.fetch_sub(1, std::memory_order_relaxed);
  size_t bytes = 0;
  for (size_t i = 0; i < job.req->prompts.size(); ++i) bytes += RawPrompt(*job.body, *job.req, i).size();
  Process(&w->cache, &w->text, job);
  CacheTrim(&w->cache, CacheCapPerWorker());
  // On a worker only a big prompt releases (continuations of long
  // conversations must not pay for a trim each).
  AfterJob(&w->text, bytes >= kReleaseAfterBytes);
}

bool TokenizeService::IsLarge(Worker* w, const Job& job) {
  const CompletionRequest& req = *job.req;
  size_t total = 0;
  for (size_t i = 0; i < req.prompts.size(); ++i) total += RawPrompt(*job.body, req, i).size();
  if (total < config_.large_prompt_bytes) return false;
  // New bytes: what the session's cached previous prompt does not share
  // (a continuation of a long conversation is small work).
  size_t fresh = 0;
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    std::string_view raw = RawPrompt(*job.body, req, i);
    auto it = job.keys[i].empty() ? w->cache.items.end() : w->cache.items.find(job.keys[i]);
    if (it != w->cache.items.end() && !it->second.sc.checkpoints.empty()) {
      fresh += raw.size() - core::CommonPrefixLength(it->second.sc.raw, raw);
    } else {
      fresh += raw.size();
    }
  }
  return fresh >= config_.large_prompt_bytes;
}

bool TokenizeService::SendLarge(Worker* w, Job& job) {
  {
    std::lock_guard<std::mutex> lock(large_.mu);
    if (large_.stopping || large_.queue.size() >= config_.worker_queue_capacity) return false;
    large_.queue.emplace_back();
    LargeJob& lj = large_.queue.back();
    lj.from = w;
    for (const std::string& key : job.keys) {
      if (!key.empty()) CacheMove(&w->cache, &lj.caches, key);
    }
    if (!job.pin.empty()) w->parked.try_emplace(job.pin);
    lj.job = std::move(job);
    ++w->outstanding;
  }
  large_.cv.notify_one();
  return true;
}

void TokenizeService::RunLarge() {
  std::string scratch;
  for (;;) {
    LargeJob lj;
    {
      std::unique_lock<std::mutex> lock(large_.mu);
      large_.cv.wait(lock, [&] { return large_.stopping || !large_.queue.empty(); });
      if (large_.queue.empty()) return;  // stopping and drained
      lj = std::move(large_.queue.front());
      large_.queue.pop_front();
    }
    Worker* w = lj.from;
    w->backlog.fetch_sub(1, std::memory_order_relaxed);
    queued_.fetch_sub(1, std::memory_order_relaxed);
    Process(&lj.caches, &scratch, lj.job);
    lj.job.body.reset();  // the request's memory goes with its response, not with the return trip
    lj.job.req.reset();
    AfterJob(&scratch, true);  // a large-lane job did at least large_prompt_bytes of new work
    {
      std::lock_guard<std::mutex> lock(w->mu);
      w->returned.push_back(std::move(lj));
    }
    w->cv.notify_one();
  }
}

void TokenizeService::OnLargeDone(Worker* w, LargeJob& lj) {
  --w->outstanding;
  while (!lj.caches.lru.empty()) {
    std::string key = lj.caches.lru.back();
    CacheErase(&w->cache, key);  // none expected: the session was parked
    CacheMove(&lj.caches, &w->cache, key);
  }
  CacheTrim(&w->cache, CacheCapPerWorker());
  if (lj.job.pin.empty()) return;
  auto p = w->parked.find(lj.job.pin);
  if (p == w->parked.end()) return;
  std::deque<Job> next = std::move(p->second);
  w->parked.erase(p);
  // They were submitted before anything of that session still queued.
  std::lock_guard<std::mutex> lock(w->mu);
  for (auto it = next.rbegin(); it != next.rend(); ++it) w->queue.push_front(std::move(*it));
}

void TokenizeService::Passthrough(Job& job) {
  metrics_->counter(metrics::Id::kOverloadPassthrough).Inc();
  TokenizeResult res;
  res.session_key = job.pin;
  res.body.owners.push_back(job.body);
  res.body.pieces.push_back(*job.body);
  job.done(std::move(res));
}

void TokenizeService::AfterJob(std::string* scratch, bool big) {
  if (!big) return;
  // A huge prompt's transient buffers (parse, unescape, encode, serialize)
  // were freed, but glibc keeps freed heap pages; give them back.
  std::string().swap(*scratch);
  malloc_trim(0);
}

size_t TokenizeService::CacheCapPerWorker() const {
  return CacheBudget(config_.memory_budget_bytes) / std::max<size_t>(1, workers_.size());
}

TokenizeService::CacheSet::Item& TokenizeService::CacheTake(CacheSet* cs, const std::string& key) {
  auto [it, inserted] = cs->items.try_emplace(key);
  CacheSet::Item& item = it->second;
  if (inserted) {
    cs->lru.push_front(key);
    item.lru = cs->lru.begin();
  } else {
    cs->lru.splice(cs->lru.begin(), cs->lru, item.lru);
    cs->bytes -= item.charged;
    cache_bytes_.fetch_sub(item.charged, std::memory_order_relaxed);
    item.charged = 0;
  }
  return item;
}

void TokenizeService::CachePut(CacheSet* cs, CacheSet::Item& item, const std::string& key) {
  item.charged = item.sc.Bytes() + 2 * key.size() + kCacheEntryOverhead;
  cs->bytes += item.charged;
  cache_bytes_.fetch_add(item.charged, std::memory_order_relaxed);
}

void TokenizeService::CacheErase(CacheSet* cs, const std::string& key) {
  auto it = cs->items.find(key);
  if (it == cs->items.end()) return;
  cs->bytes -= it->second.charged;
  cache_bytes_.fetch_sub(it->second.charged, std::memory_order_relaxed);
  cs->lru.erase(it->second.lru);
  cs->items.erase(it);
}

void TokenizeService::CacheMove(CacheSet* from, CacheSet* to, const std::string& key) {
  auto it = from->items.find(key);
  if (it == from->items.end()) return;
  // The bytes stay charged (they only change hands).
  CacheSet::Item item = std::move(it->second);
  from->bytes -= item.charged;
  from->lru.erase(item.lru);
  from->items.erase(it);
  to->lru.push_front(key);
  item.lru = to->lru.begin();
  to->bytes += item.charged;
  to->items.emplace(key, std::move(item));
}

void TokenizeService::CacheTrim(CacheSet* cs, size_t cap) {
  while (cs->bytes > cap && !cs->lru.empty()) {
    std::string key = cs->lru.back();
    CacheErase(cs, key);
  }
}

void TokenizeService::Process(CacheSet* cs, std::string* scratch, Job& job) {
  try {
    ProcessOrThrow(cs, scratch, job);
  } catch (const std::exception& e) {
    // Only the generic regex path can throw (PCRE2 resource limits on a
    // pathological input), or an allocation. The text goes to the engine
    // unchanged, which tokenizes it; the sessions this job touched are
    // dropped because an update may have stopped half way.
    std::fprintf(stderr, "toktier: tokenization failed (%s); forwarding the text unchanged\n", e.what());
    for (const auto& key : job.keys) {
      if (key.empty()) continue;
      if (store_) store_->Erase(key);
      CacheErase(cs, key);
    }
    metrics_->counter(metrics::Id::kPassthrough, {"tokenizer_error"}).Inc();
    TokenizeResult res;
    res.session_key = job.keys.empty() ? std::string() : job.keys[0];
    res.body.owners.push_back(job.body);
    res.body.pieces.push_back(*job.body);
    job.done(std::move(res));
  }
}

void TokenizeService::ProcessOrThrow(CacheSet* cs, std::string* scratch, Job& job) {
  const CompletionRequest& req = *job.req;
  const std::string& body = *job.body;
  TokenizeResult res;
  res.worker_start = Clock::now();
  res.session_key = job.keys[0];
  ForwardBody& fb = res.body;
  fb.owners.push_back(job.body);
  fb.pieces.push_back(std::string_view(body).substr(0, req.prompt_begin));
  const bool list = req.kind != PromptKind::kString;
  if (list) fb.pieces.push_back(kOpen);
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    auto s = TokenizeOne(cs, scratch, job, i, &res.error);
    if (!s) {
      // A bad escape: the client gets a 400; states of earlier items were
      // updated with valid texts and stay.
      res.ok = false;
      res.body = ForwardBody();
      return job.done(std::move(res));
    }
    if (i) fb.pieces.push_back(kComma);
    fb.pieces.push_back(kOpen);
    fb.pieces.push_back(*s);
    fb.pieces.push_back(kClose);
    fb.owners.push_back(std::move(s));
  }
  if (list) fb.pieces.push_back(kClose);
  fb.pieces.push_back(std::string_view(body).substr(req.prompt_end));
  res.worker_end = Clock::now();
  job.done(std::move(res));
}

bool TokenizeService::UnescapePrompt(std::string_view raw, const core::TokenState* st, SerialCache* sc,
                                     size_t* known_prefix, std::string* error) {
  std::string& text = sc->prompt_text;
  // Checkpoints exist only after a successful unescape, and an update that
  // then fails drops the entry (Process), so for the same live state the
  // cached text is the state's text; the size check is a cheap guard.
  const bool valid = st && !sc->checkpoints.empty() && sc->state.lock().get() == st &&
                     text.size() == st->text().size();
  size_t lcp = 0;
  if (valid) {
    lcp = core::CommonPrefixLength(sc->raw, raw);
    // The last checkpoint inside the shared raw prefix (the first is 0:0).
    auto it = std::upper_bound(sc->checkpoints.begin(), sc->checkpoints.end(), lcp,
                               [](size_t x, const JsonStringCheckpoint& c) { return x < c.raw_offset; });
    sc->checkpoints.erase(it, sc->checkpoints.end());
    assert(!sc->checkpoints.empty() && sc->checkpoints.back().text_offset <= text.size());
  } else {
    sc->checkpoints.assign(1, JsonStringCheckpoint{});
  }
  const JsonStringCheckpoint from = sc->checkpoints.back();
  // prompt_text equals the state's text, so its prefix up to the checkpoint
  // is the new text's prefix too: truncate and unescape the rest.
  text.resize(from.text_offset);
  *known_prefix = from.text_offset;
  bool ok = UnescapeJsonString(raw.substr(from.raw_offset), &text, from.raw_offset, &sc->checkpoints, error);
  sc->raw.resize(lcp);
  sc->raw.append(raw.substr(lcp));
  if (!ok) {
    sc->checkpoints.clear();
    text.clear();
  }
  return ok;
}

std::shared_ptr<const std::string> TokenizeService::TokenizeOne(CacheSet* cs, std::string* scratch, Job& job,
                                                                size_t item, std::string* error) {
  const CompletionRequest& req = *job.req;
  const std::string_view raw = RawPrompt(*job.body, req, item);
  const core::Tokenizer& tok = *job.model->tokenizer;
  const bool add_special = req.has_add_special_tokens ? req.add_special_tokens : job.model->config.add_special_tokens;
  const std::string& key = job.keys[item];
  // explicit: the request named its session; implicit: content addressing;
  // none: neither (a prompt list without a session header, or implicit
  // sessions turned off).
  const std::string_view session_kind = job.implicit[item] ? "implicit" : job.session_header ? "explicit" : "none";
  const std::string_view tenant_kind = job.anonymous ? "anonymous" : "authenticated";
  const bool quarantined = shadow_ && shadow_->IsQuarantined(tok.version_hash());
  auto t0 = Clock::now();

  if (key.empty() || !store_) {
    // Stateless: a full tokenization.
    std::string& text = *scratch;
    text.clear();
    if (!UnescapeJsonString(raw, &text, 0, nullptr, error)) return nullptr;
    std::vector<uint32_t> ids;
    core::TokenState gst;
    if (TryGpu(job.model, gst, text, add_special)) {
      ids = gst.ids();
    } else {
      core::EncodeOutcome eo;
      tok.Encode(text, add_special, ids, EncodeOpts(), &eo);
      CountEncode(eo);
    }
    auto t1 = Clock::now();
    std::string_view reason = !store_ ? "stateless" : "no_session";
    metrics_->counter(metrics::Id::kRepairOutcomes, {"full"}).Inc();
    metrics_->counter(metrics::Id::kFullTokenizations, {reason}).Inc();
    metrics_->histogram(metrics::Id::kTokenizationSeconds, {"full"}).Observe(Seconds(t0, t1));
    if (store_) metrics_->counter(metrics::Id::kStateLookups, {"miss", session_kind, tenant_kind}).Inc();
    auto s = std::make_shared<std::string>();
    AppendIdList(*s, ids.data(), ids.size());
    // SHADOW HOOK (stateless path).
    if (shadow_ && !quarantined) MaybeShadow(job.model->tokenizer, text, add_special, ids);
    return s;
  }

  store::LookupResult lr = store::LookupResult::kMiss;
  std::shared_ptr<core::TokenState> st = store_->Acquire(key, tok.version_hash(), &lr);
  CacheSet::Item& item_cache = CacheTake(cs, key);
  SerialCache& sc = item_cache.sc;
  size_t known_prefix = 0;
  if (!UnescapePrompt(raw, st.get(), &sc, &known_prefix, error)) {
    CachePut(cs, item_cache, key);
    return nullptr;
  }
  const std::string& text = sc.prompt_text;
  const bool hit = st != nullptr;
  metrics_->counter(metrics::Id::kStateLookups, {hit ? "hit" : "miss", session_kind, tenant_kind}).Inc();
  if (!st) st = std::make_shared<core::TokenState>();
  const size_t n_before = st->ids().size();
  core::RepairOutcome o;
  // A miss that repair could not avoid anyway goes straight to the full
  // path, where the GPU may take it.
  const core::FullReason miss = core::Repairer::StateMissReason(tok, *st, add_special);
  if (miss != core::FullReason::kNone && !quarantined) {
    o = FullEncode(job.model, *st, text, add_special, quarantined, miss);
  } else {
    core::RepairOptions opt;
    opt.allow_fast_path = !quarantined;
    opt.known_common_prefix = known_prefix;
    opt.encode = EncodeOpts();
    o = core::Repairer::Update(tok, *st, text, add_special, opt);
    if (o.path == core::RepairPath::kFull) CountEncode(o.encode);
  }
  auto t1 = Clock::now();
  const std::string_view path = core::RepairPathName(o.path);
  metrics_->counter(metrics::Id::kRepairOutcomes, {path}).Inc();
  metrics_->histogram(metrics::Id::kTokenizationSeconds, {path}).Observe(Seconds(t0, t1));
  if (o.path == core::RepairPath::kFull) {
    metrics_->counter(metrics::Id::kFullTokenizations, {core::FullReasonName(o.full_reason)}).Inc();
  }
  size_t kept_bytes = o.path == core::RepairPath::kFull       ? 0
                      : o.path == core::RepairPath::kUnchanged ? text.size()
                                                               : o.sync_point;
  if (job.implicit[item] && !job.hashes[item].empty()) {
    // The index entry is stored with the state (same write), so content
    // addressing finds it again after a restart.
    store_->Commit(key, st, kept_bytes, SessionIndex::EncodeTag(job.hashes[item], key, raw.size()));
    index_.Record(job.hashes[item], key, raw.size());
  } else {
    store_->Commit(key, st, kept_bytes);
  }

  // Serialized IDs: reuse the cached prefix when it belongs to this state.
  const auto& ids = st->ids();
  size_t keep_tokens = 0;
  bool valid = sc.text && sc.state.lock() == st && sc.ntokens == n_before && o.path != core::RepairPath::kFull;
  if (valid) keep_tokens = o.path == core::RepairPath::kUnchanged ? n_before : std::min(o.kept_tokens, n_before);
  if (!valid) {
    sc.text = std::make_shared<std::string>();
    sc.text->reserve(ids.size() * 7);
    sc.leases = std::make_shared<std::atomic<uint32_t>>(0);
    sc.chunk_offsets.clear();
  } else if (sc.leases->load(std::memory_order_acquire) > 0) {
    // Still being written to a backend: copy on write.
    sc.text = std::make_shared<std::string>(*sc.text);
    sc.leases = std::make_shared<std::atomic<uint32_t>>(0);
  }
  // Truncate to the chunk holding keep_tokens, then write the rest.
  size_t chunk = keep_tokens / kChunk;
  if (chunk < sc.chunk_offsets.size()) {
    sc.text->resize(sc.chunk_offsets[chunk]);
    sc.chunk_offsets.resize(chunk);
  } else {
    chunk = sc.chunk_offsets.size();
  }
  std::string& s = *sc.text;
  char tmp[16];
  for (size_t i = chunk * kChunk; i < ids.size(); ++i) {
    if (i % kChunk == 0) sc.chunk_offsets.push_back(static_cast<uint32_t>(s.size()));
    if (i) s.push_back(',');
    auto r = std::to_chars(tmp, tmp + sizeof tmp, ids[i]);
    s.append(tmp, r.ptr);
  }
  sc.state = st;
  sc.ntokens = ids.size();
  CachePut(cs, item_cache, key);
  // SHADOW HOOK: sampled results are re-tokenized from scratch off the request path.
  if (shadow_ && !quarantined) MaybeShadow(job.model->tokenizer, text, add_special, ids);
  // The cache is bounded by the caller (CacheTrim after the job).
  return LeaseText(sc);
}

// The serialized IDs for a ForwardBody: a pointer to sc.text whose owner is
// a lease. The lease keeps the string alive and, when the body is released
// after the write, decrements sc.leases with release order; the worker's
// acquire load before the next in-place edit pairs with it.
std::shared_ptr<const std::string> TokenizeService::LeaseText(SerialCache& sc) {
  struct Lease {
    Lease(std::shared_ptr<std::string> t, std::shared_ptr<std::atomic<uint32_t>> c)
        : text(std::move(t)), count(std::move(c)) {
      count->fetch_add(1, std::memory_order_relaxed);
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { count->fetch_sub(1, std::memory_order_release); }
    std::shared_ptr<std::string> text;
    std::shared_ptr<std::atomic<uint32_t>> count;
  };
  auto lease = std::make_shared<Lease>(sc.text, sc.leases);
  const std::string* text = lease->text.get();
  return std::shared_ptr<const std::string>(std::move(lease), text);
}

TokenizeService::MemoryUse TokenizeService::Memory() const {
  MemoryUse m;
  m.budget = config_.memory_budget_bytes;
  if (store_) m.state = store_->Stats().memory_bytes;
  m.cache = cache_bytes_.load(std::memory_order_relaxed);
  m.index = index_.bytes();
  return m;
}

void TokenizeService::UpdateGauges() {
  metrics_->gauge(metrics::Id::kTokenizationQueueDepth).Set(static_cast<double>(QueueDepth()));
  if (!store_) return;
  const MemoryUse mem = Memory();
  metrics_->gauge(metrics::Id::kMemoryBudget).Set(static_cast<double>(mem.budget));
  metrics_->gauge(metrics::Id::kMemoryBytes, {"state"}).Set(static_cast<double>(mem.state));
  metrics_->gauge(metrics::Id::kMemoryBytes, {"cache"}).Set(static_cast<double>(mem.cache));
  metrics_->gauge(metrics::Id::kMemoryBytes, {"index"}).Set(static_cast<double>(mem.index));
  store::StoreStats s = store_->Stats();
  using metrics::Id;
  metrics_->gauge(Id::kLiveSessions).Set(static_cast<double>(s.live_states));
  metrics_->gauge(Id::kStateBytes).Set(static_cast<double>(s.memory_bytes));
  metrics_->gauge(Id::kStoreDiskBytes).Set(static_cast<double>(s.disk_bytes));
  metrics_->gauge(Id::kStoreMemoryOnly).Set(s.memory_only ? 1 : 0);
  metrics_->gauge(Id::kStoreWriteQueueDepth).Set(static_cast<double>(s.write_queue_depth));
  metrics_->gauge(Id::kStoreOverheadBytes, {"block_cache"}).Set(static_cast<double>(s.rocksdb_block_cache_bytes));
  metrics_->gauge(Id::kStoreOverheadBytes, {"memtables"}).Set(static_cast<double>(s.rocksdb_memtable_bytes));
  metrics_->gauge(Id::kStoreOverheadBytes, {"table_readers"}).Set(static_cast<double>(s.rocksdb_table_reader_bytes));
  metrics_->gauge(Id::kStoreOverheadBytes, {"write_queue"}).Set(static_cast<double>(s.write_queue_bytes));
  metrics_->SyncCounter(Id::kStoreBytesWritten, static_cast<double>(s.bytes_written));
  metrics_->SyncCounter(Id::kStoreCorrupt, static_cast<double>(s.corrupt));
  metrics_->SyncCounter(Id::kStoreEvictions, static_cast<double>(s.evictions));
  metrics_->SyncCounter(Id::kStoreExpired, static_cast<double>(s.expired));
  metrics_->SyncCounter(Id::kStoreMisses, static_cast<double>(s.misses));
  metrics_->SyncCounter(Id::kStoreVersionStale, static_cast<double>(s.version_stale));
  metrics_->SyncCounter(Id::kStoreWriteFailures, static_cast<double>(s.write_failures));
  metrics_->SyncCounter(Id::kStoreWriteQueueDrops, static_cast<double>(s.write_queue_drops));
  metrics_->SyncCounter(Id::kStoreWrites, static_cast<double>(s.writes));
  // Hits by tier: two series of one family, synced by hand.
  std::lock_guard<std::mutex> lock(gauge_mu_);
  double& last_mem = last_mem_hits_;
  double& last_disk = last_disk_hits_;
  if (s.memory_hits > last_mem) {
    metrics_->counter(Id::kStoreHits, {"memory"}).Inc(static_cast<double>(s.memory_hits) - last_mem);
    last_mem = static_cast<double>(s.memory_hits);
  }
  if (s.disk_hits > last_disk) {
    metrics_->counter(Id::kStoreHits, {"disk"}).Inc(static_cast<double>(s.disk_hits) - last_disk);
    last_disk = static_cast<double>(s.disk_hits);
  }
}

}  // namespace toktier::proxy
