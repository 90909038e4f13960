#include "proxy/tokenize_service.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <pthread.h>

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

TokenizeService::TokenizeService(const Config& config, metrics::Metrics* metrics)
    : config_(config), metrics_(metrics) {}

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
    by_name_[mc.name] = m.get();
    for (const auto& a : mc.aliases) by_name_.emplace(a, m.get());
    metrics_->gauge(metrics::Id::kGuardTextMode, {mc.name}).Set(0);
    models_.push_back(std::move(m));
  }
  if (config_.state_enabled) {
    store::StoreOptions so;
    so.path = config_.data_dir;
    so.memory_budget_bytes = config_.memory_budget_bytes;
    so.ttl = std::chrono::seconds(config_.ttl_seconds);
    so.write_queue_capacity = config_.write_queue_capacity;
    so.allow_memory_only_fallback = config_.allow_memory_only_fallback;
    so.chunk_bytes = config_.chunk_bytes;
    store::StoreStatus st;
    store_ = store::StateStore::Open(so, &st);
    if (!store_) {
      *error = "state store: " + st.message();
      return false;
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
    shadow_ = std::make_unique<core::ShadowVerifier>(so, [m, names](const core::ShadowEvent& ev) {
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
}

void TokenizeService::Stop() {
  if (workers_.empty()) return;
  stopping_ = true;
  for (auto& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    w->cv.notify_all();
  }
  for (auto& w : workers_) {
    if (w->thread.joinable()) w->thread.join();
  }
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

bool TokenizeService::Submit(ModelRuntime* model, std::shared_ptr<const std::string> body,
                             std::shared_ptr<CompletionRequest> req, const SessionRef& session, Done done) {
  assert(model && body && req && !req->prompts.empty());
  Job job;
  job.model = model;
  job.anonymous = session.anonymous;
  const size_t n = req->prompts.size();
  job.keys.resize(n);
  job.hashes.resize(n);
  job.implicit.assign(n, false);
  const std::string tenant = "t" + Hex(session.tenant) + ":";
  if (!session.anonymous) {
    std::lock_guard<std::mutex> lock(tenants_mu_);
    if (tenants_.emplace(session.tenant, true).second)
      metrics_->gauge(metrics::Id::kTenants).Set(static_cast<double>(tenants_.size()));
  }
  if (store_) {
    if (!session.explicit_id.empty()) {
      for (size_t i = 0; i < n; ++i) {
        job.keys[i] = tenant + "x:" + session.explicit_id;
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
        if (!m.key.empty() && m.state_bytes < 2 * m.matched_bytes) {
          job.keys[0] = m.key;
        } else {
          job.keys[0] = tenant + "i:" + Hex(job.hashes[0][0]) + "-" +
                        std::to_string(implicit_counter_.fetch_add(1, std::memory_order_relaxed));
        }
      }
    }
  }
  // Pin by the key (the first item's; item keys of one request share it).
  size_t wi;
  if (!job.keys[0].empty()) {
    std::string_view pin = job.keys[0];
    if (size_t h = pin.rfind('#'); h != std::string_view::npos && !session.explicit_id.empty() && n > 1)
      pin = pin.substr(0, h);
    wi = XXH3_64bits(pin.data(), pin.size()) % workers_.size();
  } else {
    wi = next_worker_.fetch_add(1, std::memory_order_relaxed) % workers_.size();
  }
  job.body = std::move(body);
  job.req = std::move(req);
  job.done = std::move(done);
  Worker* w = workers_[wi].get();
  {
    std::lock_guard<std::mutex> lock(w->mu);
    if (stopping_ || w->queue.size() >= config_.worker_queue_capacity) return false;
    w->queue.push_back(std::move(job));
    queued_.fetch_add(1, std::memory_order_relaxed);
  }
  w->cv.notify_one();
  return true;
}

void TokenizeService::Run(Worker* w) {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(w->mu);
      w->cv.wait(lock, [&] { return stopping_ || !w->queue.empty(); });
      if (w->queue.empty()) return;  // stopping and drained
      job = std::move(w->queue.front());
      w->queue.pop_front();
    }
    queued_.fetch_sub(1, std::memory_order_relaxed);
    Process(w, job);
  }
}

void TokenizeService::Process(Worker* w, Job& job) {
  try {
    ProcessOrThrow(w, job);
  } catch (const std::exception& e) {
    // Only the generic regex path can throw (PCRE2 resource limits on a
    // pathological input), or an allocation. The text goes to the engine
    // unchanged, which tokenizes it; the sessions this job touched are
    // dropped because an update may have stopped half way.
    std::fprintf(stderr, "toktier: tokenization failed (%s); forwarding the text unchanged\n", e.what());
    for (const auto& key : job.keys) {
      if (key.empty()) continue;
      if (store_) store_->Erase(key);
      w->serial.erase(key);
    }
    metrics_->counter(metrics::Id::kPassthrough, {"tokenizer_error"}).Inc();
    TokenizeResult res;
    res.session_key = job.keys.empty() ? std::string() : job.keys[0];
    res.body.owners.push_back(job.body);
    res.body.pieces.push_back(*job.body);
    job.done(std::move(res));
  }
}

void TokenizeService::ProcessOrThrow(Worker* w, Job& job) {
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
    auto s = TokenizeOne(w, job, i, &res.error);
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

std::shared_ptr<const std::string> TokenizeService::TokenizeOne(Worker* w, Job& job, size_t item,
                                                                std::string* error) {
  const CompletionRequest& req = *job.req;
  const std::string_view raw = RawPrompt(*job.body, req, item);
  const core::Tokenizer& tok = *job.model->tokenizer;
  const bool add_special = req.has_add_special_tokens ? req.add_special_tokens : job.model->config.add_special_tokens;
  const std::string& key = job.keys[item];
  const std::string_view session_kind = job.implicit[item] ? "implicit" : "explicit";
  const std::string_view tenant_kind = job.anonymous ? "anonymous" : "authenticated";
  const bool quarantined = shadow_ && shadow_->IsQuarantined(tok.version_hash());
  auto t0 = Clock::now();

  if (key.empty() || !store_) {
    // Stateless: a full tokenization.
    std::string& text = w->text;
    text.clear();
    if (!UnescapeJsonString(raw, &text, 0, nullptr, error)) return nullptr;
    std::vector<uint32_t> ids;
    tok.Encode(text, add_special, ids);
    auto t1 = Clock::now();
    std::string_view reason = !store_ ? "stateless" : "no_session";
    metrics_->counter(metrics::Id::kRepairOutcomes, {"full"}).Inc();
    metrics_->counter(metrics::Id::kFullTokenizations, {reason}).Inc();
    metrics_->histogram(metrics::Id::kTokenizationSeconds, {"full"}).Observe(Seconds(t0, t1));
    if (store_) metrics_->counter(metrics::Id::kStateLookups, {"miss", session_kind, tenant_kind}).Inc();
    auto s = std::make_shared<std::string>();
    AppendIdList(*s, ids.data(), ids.size());
    // SHADOW HOOK (stateless path).
    if (shadow_ && !quarantined) shadow_->MaybeSubmit(job.model->tokenizer, text, add_special, ids);
    return s;
  }

  store::LookupResult lr = store::LookupResult::kMiss;
  std::shared_ptr<core::TokenState> st = store_->Acquire(key, tok.version_hash(), &lr);
  SerialCache& sc = w->serial[key];
  w->serial_bytes -= std::min(w->serial_bytes, sc.Bytes());
  size_t known_prefix = 0;
  if (!UnescapePrompt(raw, st.get(), &sc, &known_prefix, error)) {
    w->serial_bytes += sc.Bytes();
    return nullptr;
  }
  const std::string& text = sc.prompt_text;
  const bool hit = st != nullptr;
  metrics_->counter(metrics::Id::kStateLookups, {hit ? "hit" : "miss", session_kind, tenant_kind}).Inc();
  if (!st) st = std::make_shared<core::TokenState>();
  const size_t n_before = st->ids().size();
  core::RepairOptions opt;
  opt.allow_fast_path = !quarantined;
  opt.known_common_prefix = known_prefix;
  core::RepairOutcome o = core::Repairer::Update(tok, *st, text, add_special, opt);
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
  store_->Commit(key, st, kept_bytes);
  if (job.implicit[item] && !job.hashes[item].empty()) index_.Record(job.hashes[item], key, raw.size());

  // Serialized IDs: reuse the cached prefix when it belongs to this state.
  const auto& ids = st->ids();
  size_t keep_tokens = 0;
  bool valid = sc.text && sc.state.lock() == st && sc.ntokens == n_before && o.path != core::RepairPath::kFull;
  if (valid) keep_tokens = o.path == core::RepairPath::kUnchanged ? n_before : std::min(o.kept_tokens, n_before);
  if (!valid) {
    sc.text = std::make_shared<std::string>();
    sc.text->reserve(ids.size() * 7);
    sc.chunk_offsets.clear();
  } else if (sc.text.use_count() > 1) {
    // Still being written to a backend: copy on write.
    sc.text = std::make_shared<std::string>(*sc.text);
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
  w->serial_bytes += sc.Bytes();
  // SHADOW HOOK: sampled results are re-tokenized from scratch off the request path.
  if (shadow_ && !quarantined) shadow_->MaybeSubmit(job.model->tokenizer, text, add_special, ids);
  std::shared_ptr<const std::string> out = sc.text;
  // Bound the cache: half the memory budget across workers; start over when over.
  if (w->serial_bytes > config_.memory_budget_bytes / 2 / std::max<size_t>(1, workers_.size())) {
    w->serial.clear();
    w->serial_bytes = 0;
  }
  return out;
}

void TokenizeService::UpdateGauges() {
  metrics_->gauge(metrics::Id::kTokenizationQueueDepth).Set(static_cast<double>(QueueDepth()));
  if (!store_) return;
  store::StoreStats s = store_->Stats();
  using metrics::Id;
  metrics_->gauge(Id::kLiveSessions).Set(static_cast<double>(s.live_states));
  metrics_->gauge(Id::kStateBytes).Set(static_cast<double>(s.memory_bytes));
  metrics_->gauge(Id::kStoreDiskBytes).Set(static_cast<double>(s.disk_bytes));
  metrics_->gauge(Id::kStoreMemoryOnly).Set(s.memory_only ? 1 : 0);
  metrics_->gauge(Id::kStoreWriteQueueDepth).Set(static_cast<double>(s.write_queue_depth));
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
