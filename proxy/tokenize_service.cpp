// TokenizeService: the workers, their queues and the large lane, sessions
// and tenants. Model loading is in tokenize_models.cpp, a job's
// tokenization in tokenize_job.cpp.
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

#include "proxy/server.h"

namespace toktier::proxy {
namespace {

std::string Hex(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

namespace {

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

}  // namespace toktier::proxy
