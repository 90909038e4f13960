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
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/core.h"
#include "metrics/metrics.h"
#include "proxy/completion_request.h"
#include "proxy/config.h"
#include "proxy/json_string.h"
#include "proxy/session_index.h"
#include "store/store.h"

namespace toktier::proxy {

struct ModelRuntime {
  ModelConfig config;
  std::shared_ptr<const core::Tokenizer> tokenizer;
  std::atomic<bool> guard_text_mode{false};  // set by the compatibility guard
  bool ForwardIds() const { return config.forward_ids && !guard_text_mode.load(std::memory_order_relaxed); }
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

  // Loads the tokenizers and opens the store. False and *error on failure.
  bool Init(std::string* error);
  void Start();
  void Stop();  // joins the workers (queued jobs are finished first)

  ModelRuntime* FindModel(std::string_view name);
  std::vector<ModelRuntime*> Models();

  // Queues the tokenization of a parsed request (`body` holds the original
  // bytes; req.prompts the texts). `done` runs on a worker thread. False when
  // the worker's queue is full (the caller forwards the text unchanged).
  using Done = std::function<void(TokenizeResult)>;
  bool Submit(ModelRuntime* model, std::shared_ptr<const std::string> body, std::shared_ptr<CompletionRequest> req,
              const SessionRef& session, Done done);

  store::StateStore* store() { return store_.get(); }
  core::ShadowVerifier* shadow() { return shadow_.get(); }
  size_t QueueDepth() const;
  // Publishes store stats and queue depth into the metrics (on scrape).
  void UpdateGauges();
  static uint64_t TenantHash(std::string_view authorization);

 private:
  struct Job {
    ModelRuntime* model;
    std::shared_ptr<const std::string> body;
    std::shared_ptr<CompletionRequest> req;
    std::vector<std::string> keys;  // per prompt ("" = no state)
    std::vector<std::vector<uint64_t>> hashes;  // per prompt (implicit sessions)
    std::vector<bool> implicit;
    bool anonymous = true;
    Done done;
  };
  // Per session, on its worker: what makes the next request proportional to
  // its edit. Valid only while `state` is the live state it was made for.
  struct SerialCache {
    std::weak_ptr<core::TokenState> state;  // identity (no ABA: a live weak_ptr)
    size_t ntokens = 0;
    std::shared_ptr<std::string> text;  // "1,2,3"
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
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Job> queue;
    std::thread thread;
    std::unordered_map<std::string, SerialCache> serial;
    size_t serial_bytes = 0;
    std::string text;  // scratch: the prompt being tokenized (capacity kept)
  };
  static constexpr size_t kChunk = 64;

  void Run(Worker* w);
  void Process(Worker* w, Job& job);
  void ProcessOrThrow(Worker* w, Job& job);
  // The serialized IDs ("a,b,c") of one prompt; updates state and caches.
  // nullptr and *error when the prompt string holds an invalid escape.
  std::shared_ptr<const std::string> TokenizeOne(Worker* w, Job& job, size_t item, std::string* error);
  // Unescapes a session's prompt `raw` into sc->prompt_text, from the last
  // checkpoint inside the raw prefix it shares with the session's previous
  // prompt when `sc` is valid for `st`; refreshes sc's raw copy and
  // checkpoints. *known_prefix: the text bytes proven equal to st's text
  // (the resumed checkpoint).
  static bool UnescapePrompt(std::string_view raw, const core::TokenState* st, SerialCache* sc,
                             size_t* known_prefix, std::string* error);

  const Config& config_;
  metrics::Metrics* metrics_;
  std::vector<std::unique_ptr<ModelRuntime>> models_;
  std::unordered_map<std::string, ModelRuntime*> by_name_;
  std::unique_ptr<store::StateStore> store_;
  std::unique_ptr<core::ShadowVerifier> shadow_;
  SessionIndex index_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> next_worker_{0};
  std::atomic<uint64_t> implicit_counter_{0};
  std::atomic<size_t> queued_{0};
  std::mutex tenants_mu_;
  std::unordered_map<uint64_t, bool> tenants_;
  std::mutex gauge_mu_;
  double last_mem_hits_ = 0, last_disk_hits_ = 0;
};

}  // namespace toktier::proxy
