// The tokenization side of the proxy (no HTTP here): models and their
// tokenizers, session identity (tenant, explicit header, content addressing),
// the worker threads with one bounded queue each (a session is pinned to one
// worker by the hash of its key, so its TokenState needs no lock), the state
// store, the serialized-ID cache and the shadow verifier hook.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/core.h"
#include "gpu/gpu.h"
#include "api/api.h"
#include "metrics/metrics.h"
#include "proxy/server.h"
#include "proxy/session_index.h"
#include "store/store.h"

namespace toktier::proxy {

// The proxy carries the client APIs' own types (requests, errors, chat
// setups) from the adapter room through every stage.
using namespace toktier::api;

// Loads the chat setup of `model` (`default_mode`: the global chat_forward):
// text mode needs nothing; the other modes read its tokenizer_config.json
// (chat_template_config, else the one next to the tokenizer) and compile the
// template.
core::Status LoadChatModel(const ModelConfig& model, ChatForward default_mode, ChatModel* out);

// The memory budget's split (docs/proxy.md "Memory"): the store's memory
// tier gets half, the content-addressing index 1/32, the session caches the
// rest.
inline size_t StoreBudget(size_t budget) { return budget / 2; }
inline size_t IndexBudget(size_t budget) { return budget / 32; }
inline size_t CacheBudget(size_t budget) { return budget - StoreBudget(budget) - IndexBudget(budget); }

struct ModelRuntime {
  ModelConfig config;
  std::shared_ptr<const core::Tokenizer> tokenizer;
  std::shared_ptr<const ChatModel> chat;  // /v1/chat/completions (api/chat_request.h)
  std::atomic<bool> guard_text_mode{false};  // set by the compatibility guard
  std::unique_ptr<gpu::GpuEncoder> gpu;      // null without a device (or gpu.enabled false)
  bool ForwardIds() const { return config.forward_mode == ForwardMode::kIds && !guard_text_mode.load(std::memory_order_relaxed); }
};

// A body to forward, as pieces written back to back (the original bytes
// around the prompt plus the serialized IDs, which may be shared with the
// session's cache while the write is in flight).
struct ForwardBody {
  std::vector<std::string_view> pieces;
  std::vector<std::shared_ptr<const void>> owners;
  size_t size() const {
    size_t n = 0;
    for (auto p : pieces) n += p.size();
    return n;
  }
};

// Identity of a request's session(s).
struct SessionRef {
  uint64_t tenant = 0;
  bool anonymous = true;        // no Authorization header
  std::string explicit_id;      // from a session header; "" = content addressing
};

struct TokenizeResult {
  bool ok = true;
  std::string error;            // when !ok: a 400 message (an invalid escape in a prompt string)
  ForwardBody body;             // valid when ok
  std::string session_key;      // for backend affinity ("" = none)
  // When the worker took the job and finished it (request phase logging).
  std::chrono::steady_clock::time_point worker_start, worker_end;
};

class TokenizeService {
 public:
  TokenizeService(const Config& config, metrics::Metrics* metrics);
  ~TokenizeService();

  // Loads the tokenizers, opens the store and rebuilds the content-addressing
  // index from the states on disk.
  core::Status Init();
  void Start();
  void Stop();  // joins the workers and the large lane (queued jobs are finished first)

  ModelRuntime* FindModel(std::string_view name);
  std::vector<ModelRuntime*> Models();

  // Queues the tokenization of a parsed request (`body` holds the original
  // bytes; req.prompts the texts). `done` runs on a worker (or large-lane)
  // thread. False when the worker's queue is full (the caller forwards the
  // text unchanged).
  using Done = std::function<void(TokenizeResult)>;
  bool Submit(ModelRuntime* model, std::shared_ptr<const std::string> body, std::shared_ptr<CompletionRequest> req,
              const SessionRef& session, Done done);

  store::StateStore* store() { return store_.get(); }
  core::ShadowVerifier* shadow() { return shadow_.get(); }
  size_t QueueDepth() const;
  // Publishes store stats, memory use and queue depth into the metrics (on scrape).
  void UpdateGauges();
  static uint64_t TenantHash(std::string_view authorization);

  // What the proxy keeps per session, charged against
  // store.memory_budget_bytes (docs/proxy.md "Memory"): the store's memory
  // tier (half the budget), the workers' session caches (raw prompt, text,
  // serialized IDs) and the content-addressing index.
  struct MemoryUse {
    size_t state = 0, cache = 0, index = 0, budget = 0;
    size_t total() const { return state + cache + index; }
  };
  MemoryUse Memory() const;

 private:
  struct Job {
    ModelRuntime* model;
    std::shared_ptr<const std::string> body;
    std::shared_ptr<CompletionRequest> req;
    std::vector<std::string> keys;  // per prompt ("" = no state)
    std::vector<std::vector<uint64_t>> hashes;  // per prompt (implicit sessions)
    std::vector<bool> implicit;
    // The session the job belongs to ("" = none): its jobs run in order and
    // never two at once (also across the worker and the large lane).
    std::string pin;
    bool anonymous = true;
    bool session_header = false;  // the request named its session
    Done done;
  };
  // Per session, on its worker: what makes the next request proportional to
  // its edit. Valid only while `state` is the live state it was made for.
  struct SerialCache {
    std::weak_ptr<core::TokenState> state;  // identity (no ABA: a live weak_ptr)
    size_t ntokens = 0;
    std::shared_ptr<std::string> text;  // "1,2,3"
    // Writes of `text` to a backend still in flight (ForwardBody leases; see
    // LeaseText). Read with acquire before editing `text` in place, so the
    // I/O thread's last read of the bytes happens before the edit
    // (shared_ptr::use_count() is a relaxed load and orders nothing).
    std::shared_ptr<std::atomic<uint32_t>> leases;
    std::vector<uint32_t> chunk_offsets;  // offset of token i*kChunk (its leading comma)
    // The raw (escaped) prompt the state's text was unescaped from, with
    // checkpoints, and that text itself (equal to the state's text while
    // valid; edited in place, so a continuation copies no megabyte-sized
    // prefix).
    std::string raw;
    std::vector<JsonStringCheckpoint> checkpoints;
    std::string prompt_text;
    size_t Bytes() const {
      return (text ? text->capacity() : 0) + chunk_offsets.capacity() * 4 + raw.capacity() +
             checkpoints.capacity() * sizeof(JsonStringCheckpoint) + prompt_text.capacity();
    }
  };
  // Session caches, least recently used last. A worker owns one; a job sent
  // to the large lane carries its sessions' entries in its own and brings
  // them back. Bytes are charged to cache_bytes_ (all sets together).
  struct CacheSet {
    struct Item {
      SerialCache sc;
      std::list<std::string>::iterator lru;
      size_t charged = 0;
    };
    std::unordered_map<std::string, Item> items;
    std::list<std::string> lru;
    size_t bytes = 0;
  };
  struct Worker;
  // A job on the large lane with its sessions' cache entries; sent back to
  // its worker when done (the entries return, the session's parked jobs run).
  struct LargeJob {
    Worker* from = nullptr;
    Job job;
    CacheSet caches;
  };
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> queue;
    std::deque<LargeJob> returned;  // from the large lane
    std::atomic<size_t> backlog{0};  // submitted, not yet started (queue + parked + large lane)
    std::thread thread;
    // Worker thread only.
    CacheSet cache;
    // Sessions whose job is on the large lane -> their later jobs, in order.
    std::unordered_map<std::string, std::deque<Job>> parked;
    size_t outstanding = 0;  // jobs on the large lane
    std::string text;  // scratch: a stateless prompt (released when large)
  };
  struct LargeLane {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<LargeJob> queue;
    std::vector<std::thread> threads;
    bool stopping = false;
  };
  static constexpr size_t kChunk = 64;
  // Charged per cache entry besides its buffers and key (map and list nodes).
  static constexpr size_t kCacheEntryOverhead = 256;

  void Run(Worker* w);
  void RunLarge();
  // Runs the job here, parks it behind its session's large job, or sends it
  // to the large lane.
  void Dispatch(Worker* w, Job& job);
  bool IsLarge(Worker* w, const Job& job);
  bool SendLarge(Worker* w, Job& job);
  void OnLargeDone(Worker* w, LargeJob& lj);
  void Passthrough(Job& job);  // forwards the text unchanged (overload)
  void Process(CacheSet* cs, std::string* scratch, Job& job);
  void ProcessOrThrow(CacheSet* cs, std::string* scratch, Job& job);
  // The serialized IDs ("a,b,c") of one prompt into *out; updates state and
  // caches. An error when the prompt string holds an invalid escape.
  static std::shared_ptr<const std::string> LeaseText(SerialCache& sc);
  core::Status TokenizeOne(CacheSet* cs, std::string* scratch, Job& job, size_t item,
                           std::shared_ptr<const std::string>* out);
  // Unescapes a session's prompt `raw` into sc->prompt_text, from the last
  // checkpoint inside the raw prefix it shares with the session's previous
  // prompt when `sc` is valid for `st`; refreshes sc's raw copy and
  // checkpoints. *known_prefix: the text bytes proven equal to st's text
  // (the resumed checkpoint).
  static core::Status UnescapePrompt(std::string_view raw, const core::TokenState* st, SerialCache* sc,
                                     size_t* known_prefix);
  // Cache bookkeeping (every change of an entry's size goes through these).
  CacheSet::Item& CacheTake(CacheSet* cs, const std::string& key);  // uncharged until CachePut
  void CachePut(CacheSet* cs, CacheSet::Item& item, const std::string& key);
  void CacheErase(CacheSet* cs, const std::string& key);
  void CacheMove(CacheSet* from, CacheSet* to, const std::string& key);
  void CacheTrim(CacheSet* cs, size_t cap);
  size_t CacheCapPerWorker() const;
  // After a big job: releases the scratch and gives free heap pages back.
  void AfterJob(std::string* scratch, bool big);
  std::string NewImplicitKey(const std::string& tenant);
  // Submits a sample to the shadow verifier unless the copies already
  // waiting there exceed their cap (the sink gives the bytes back).
  void MaybeShadow(const std::shared_ptr<const core::Tokenizer>& tok, std::string_view text, bool add_special,
                   const std::vector<uint32_t>& ids);
  static size_t ShadowCharge(size_t text_bytes);
  void CountTenant(uint64_t tenant);
  // A full tokenization of `text` into *st (a miss): the GPU when it takes
  // it, else the CPU (the encode pool for long texts); routes and pool use
  // counted. Returns the repair outcome a full tokenization reports.
  core::RepairOutcome FullEncode(ModelRuntime* model, core::TokenState& st, std::string_view text, bool add_special,
                                 bool quarantined, core::FullReason reason);
  // Counts how a long full tokenization used the pool.
  void CountEncode(const core::EncodeOutcome& e);
  // Offers a miss to the GPU path (counted); true when it filled *st.
  bool TryGpu(ModelRuntime* model, core::TokenState& st, std::string_view text, bool add_special);
  core::EncodeOptions EncodeOpts() const;

  const Config& config_;
  metrics::Metrics* metrics_;
  std::vector<std::unique_ptr<ModelRuntime>> models_;
  std::unordered_map<std::string, ModelRuntime*> by_name_;
  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<core::ShadowVerifier> shadow_;
  // Long full tokenizations on all cores (config encode.threads; null: off).
  std::unique_ptr<core::EncodePool> encode_pool_;
  // Counter handles of the per-request route metrics (made once in Init).
  metrics::Counter gpu_routes_[gpu::kRouteCount];
  metrics::Counter encode_parallel_, encode_pool_busy_, encode_uncut_;
  SessionIndex index_;
  std::vector<std::unique_ptr<Worker>> workers_;
  LargeLane large_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_worker_{0};
  // Implicit keys: 128 random bits per process mixed with a counter, so a
  // key never repeats across restarts (a counter from 0 did, and then named
  // another conversation's state on disk).
  uint64_t key_salt_[2] = {0, 0};
  std::atomic<uint64_t> implicit_counter_{0};
  std::atomic<size_t> queued_{0};
  std::atomic<size_t> cache_bytes_{0};
  // Bytes of shadow samples queued or being checked (shared with the sink).
  std::shared_ptr<std::atomic<size_t>> shadow_bytes_ = std::make_shared<std::atomic<size_t>>(0);
  // Distinct tenants by linear counting over a fixed bitmap (client-chosen
  // Authorization values must not grow a map).
  std::mutex tenants_mu_;
  std::vector<uint64_t> tenant_bits_;
  size_t tenant_zero_bits_ = 0;
  std::mutex gauge_mu_;
  double last_mem_hits_ = 0, last_disk_hits_ = 0;
};

}  // namespace toktier::proxy
