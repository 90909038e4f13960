// A job on a worker: the session's cached state (per-worker caches, the
// store below them), unescaping the prompt from its last checkpoint,
// Repairer::Update or a full encode, and the serialized IDs for the engine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <malloc.h>

#include "proxy/tokenize_service.h"

namespace toktier::proxy {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

constexpr std::string_view kOpen = "[";
constexpr std::string_view kClose = "]";
constexpr std::string_view kComma = ",";

}  // namespace

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
    std::shared_ptr<const std::string> s;
    if (core::Status st = TokenizeOne(cs, scratch, job, i, &s); !st.ok()) {
      res.error = st.message();
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

core::Status TokenizeService::UnescapePrompt(std::string_view raw, const core::TokenState* st, SerialCache* sc,
                                             size_t* known_prefix) {
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
  core::Status unescaped = UnescapeJsonString(raw.substr(from.raw_offset), &text, from.raw_offset, &sc->checkpoints);
  sc->raw.resize(lcp);
  sc->raw.append(raw.substr(lcp));
  if (!unescaped.ok()) {
    sc->checkpoints.clear();
    text.clear();
  }
  return unescaped;
}

core::Status TokenizeService::TokenizeOne(CacheSet* cs, std::string* scratch, Job& job, size_t item,
                                          std::shared_ptr<const std::string>* out) {
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
    if (core::Status st = UnescapeJsonString(raw, &text, 0, nullptr); !st.ok()) return st;
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
    *out = std::move(s);
    return core::Status::Ok();
  }

  store::LookupResult lr = store::LookupResult::kMiss;
  std::shared_ptr<core::TokenState> st = store_->Acquire(key, tok.version_hash(), &lr);
  CacheSet::Item& item_cache = CacheTake(cs, key);
  SerialCache& sc = item_cache.sc;
  size_t known_prefix = 0;
  if (core::Status unescaped = UnescapePrompt(raw, st.get(), &sc, &known_prefix); !unescaped.ok()) {
    CachePut(cs, item_cache, key);
    return unescaped;
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
  for (size_t i = chunk * kChunk; i < ids.size(); i += kChunk) {
    sc.chunk_offsets.push_back(static_cast<uint32_t>(s.size()));
    if (i) s.push_back(',');
    AppendIdList(s, ids.data() + i, std::min<size_t>(kChunk, ids.size() - i));
  }
  sc.state = st;
  sc.ntokens = ids.size();
  CachePut(cs, item_cache, key);
  // SHADOW HOOK: sampled results are re-tokenized from scratch off the request path.
  if (shadow_ && !quarantined) MaybeShadow(job.model->tokenizer, text, add_special, ids);
  // The cache is bounded by the caller (CacheTrim after the job).
  *out = LeaseText(sc);
  return core::Status::Ok();
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
