// metrics/: the proxy's Prometheus metrics, declared in ONE sorted list.
//
// Every metric is one line of TOKTIER_METRICS below: its id, kind, exported
// name, label names (comma-separated) and help text. docs/metrics.md
// documents each one. prometheus-cpp stays behind this header: callers get
// small handles (stable for the Metrics object's lifetime; cache them on hot
// paths, each lookup by labels takes the family's mutex).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
}  // namespace prometheus

namespace toktier::metrics {

// X(id, kind, name, labels, help). Kept sorted by name.
#define TOKTIER_METRICS(X)                                                                                          \
  X(kBackendHealthy, Gauge, "toktier_backend_healthy", "backend",                                                 \
    "1 while the backend passes active health checks, else 0")                                                     \
  X(kBackendRequests, Counter, "toktier_backend_requests_total", "outcome",                                       \
    "Backend requests by outcome (ok, connect_error, timeout, io_error, bad_response, failover, cancelled)")       \
  X(kBackendTtfb, Histogram, "toktier_backend_ttfb_seconds", "",                                                  \
    "Time from sending a request to a backend to its first response byte")                                         \
  X(kEncodeParallel, Counter, "toktier_encode_parallel_total", "result",                                         \
    "Full tokenizations long enough for the encode pool: parallel, pool_busy (ran alone), uncut (one chunk)")      \
  X(kFullTokenizations, Counter, "toktier_full_tokenizations_total", "reason",                                    \
    "Prompts tokenized in full, by reason (no_state, edit_at_start, no_certificate, stateless, ...)")              \
  X(kGpuRoutes, Counter, "toktier_gpu_route_total", "route",                                                      \
    "State misses offered to the GPU path, by route (device, no_device, below_threshold, not_nfc, ...)")          \
  X(kGuardChecks, Counter, "toktier_tokenizer_guard_checks_total", "model,result",                                \
    "Compatibility guard comparisons against a backend's /tokenize (match, mismatch, unavailable)")                \
  X(kGuardTextMode, Gauge, "toktier_tokenizer_guard_text_mode", "model",                                          \
    "1 when the guard switched the model to text forwarding after an ID mismatch")                                 \
  X(kHostedToolsDropped, Counter, "toktier_hosted_tools_dropped_total", "",                                       \
    "/v1/responses tools left out of the prompt: hosted (web_search, ...) and custom tools no model here can call") \
  X(kLiveSessions, Gauge, "toktier_live_sessions", "", "States held in the memory tier of the state store")        \
  X(kMemoryBudget, Gauge, "toktier_memory_budget_bytes", "",                                                    \
    "Budget for what the proxy keeps per session (store.memory_budget_bytes)")                                     \
  X(kMemoryBytes, Gauge, "toktier_memory_bytes", "part",                                                          \
    "Bytes kept per session, charged against the budget, by part (state, cache, index)")                           \
  X(kOverloadPassthrough, Counter, "toktier_overload_passthrough_total", "",                                      \
    "Prompts forwarded as text because the tokenization queue was full")                                           \
  X(kPassthrough, Counter, "toktier_passthrough_total", "reason",                                                 \
    "Completions forwarded unchanged (unknown_model, token_prompt, text_mode, tokenizer_error)")                      \
  X(kRepairOutcomes, Counter, "toktier_repair_outcomes_total", "path",                                            \
    "Token state updates by path (unchanged, first_try, widened, full)")                                           \
  X(kRequestDuration, Histogram, "toktier_request_duration_seconds", "endpoint",                                  \
    "Time from a request's arrival to the end of its response")                                                    \
  X(kRequests, Counter, "toktier_requests_total", "endpoint,outcome",                                             \
    "Requests by endpoint (completions, passthrough, local) and outcome (ok, client_error, backend_error, ...)")   \
  X(kResourceExhausted, Counter, "toktier_resource_exhausted_total", "where",                                     \
    "Sockets not accepted or opened: out of descriptors or buffers (accept, backend_connect, health_check)")       \
  X(kShadowChecks, Counter, "toktier_shadow_checks_total", "model",                                               \
    "Requests re-tokenized from scratch by the shadow verifier")                                                   \
  X(kShadowMismatches, Counter, "toktier_shadow_mismatches_total", "model",                                       \
    "Shadow verifications whose IDs differed from the forwarded IDs")                                              \
  X(kStateBytes, Gauge, "toktier_state_bytes", "", "Accounted bytes of the states in the memory tier")             \
  X(kStateLookups, Counter, "toktier_state_lookups_total", "result,session,tenant",                               \
    "Session state lookups: result (hit, miss), session (explicit, implicit), tenant (anonymous, authenticated)")  \
  X(kStoreBytesWritten, Counter, "toktier_store_bytes_written_total", "", "Bytes handed to the disk tier")        \
  X(kStoreCorrupt, Counter, "toktier_store_corrupt_total", "", "Stored values failing checksum/structure checks") \
  X(kStoreDiskBytes, Gauge, "toktier_store_disk_bytes", "", "Estimated live data size of the disk tier")          \
  X(kStoreEvictions, Counter, "toktier_store_evictions_total", "", "Memory tier evictions")                       \
  X(kStoreExpired, Counter, "toktier_store_expired_total", "", "Lookups that found a state past its TTL")         \
  X(kStoreHits, Counter, "toktier_store_hits_total", "tier", "Store lookups answered, by tier (memory, disk)")     \
  X(kStoreMemoryOnly, Gauge, "toktier_store_memory_only", "", "1 when the store runs without its disk tier")      \
  X(kStoreMisses, Counter, "toktier_store_misses_total", "", "Store lookups that found nothing")                  \
  X(kStoreOverheadBytes, Gauge, "toktier_store_overhead_bytes", "part",                                          \
    "Memory the store holds outside the budget (memtables, block_cache, table_readers, write_queue)")             \
  X(kStoreVersionStale, Counter, "toktier_store_version_stale_total", "",                                         \
    "Lookups that found a state made by another tokenizer version")                                                \
  X(kStoreWriteFailures, Counter, "toktier_store_write_failures_total", "", "Failed disk writes")                  \
  X(kStoreWriteQueueDepth, Gauge, "toktier_store_write_queue_depth", "", "Entries in the write-behind queue")     \
  X(kStoreWriteQueueDrops, Counter, "toktier_store_write_queue_drops_total", "",                                  \
    "Writes skipped because the write-behind queue was full")                                                      \
  X(kStoreWrites, Counter, "toktier_store_writes_total", "", "Writes to the disk tier")                            \
  X(kTenants, Gauge, "toktier_tenants", "", "Distinct tenants (Authorization hashes) seen since start")            \
  X(kThreadExceptions, Counter, "toktier_thread_exceptions_total", "thread",                                      \
    "Exceptions caught at a thread boundary (io, prepare, health, guard); the thread goes on")                              \
  X(kTokenizationQueueDepth, Gauge, "toktier_tokenization_queue_depth", "",                                       \
    "Jobs waiting in the tokenization worker queues")                                                              \
  X(kTokenizationSeconds, Histogram, "toktier_tokenization_seconds", "path",                                      \
    "Time to produce a prompt's IDs, by path (unchanged, first_try, widened, full)")

enum class Id : uint16_t {
#define TOKTIER_METRIC_ENUM(id, kind, name, labels, help) id,
  TOKTIER_METRICS(TOKTIER_METRIC_ENUM)
#undef TOKTIER_METRIC_ENUM
      kCount
};

enum class Kind : uint8_t { Counter, Gauge, Histogram };

struct MetricInfo {
  Id id;
  Kind kind;
  std::string_view name;
  std::string_view labels;  // comma-separated label names, "" for none
  std::string_view help;
};
// The list above as a table (in declaration order).
const MetricInfo& Info(Id id);
inline constexpr size_t kMetricCount = static_cast<size_t>(Id::kCount);

class Counter {
 public:
  Counter() = default;
  void Inc(double v = 1.0) const;
  double Value() const;
  explicit operator bool() const { return c_ != nullptr; }

 private:
  friend class Metrics;
  explicit Counter(prometheus::Counter* c) : c_(c) {}
  prometheus::Counter* c_ = nullptr;
};

class Gauge {
 public:
  Gauge() = default;
  void Set(double v) const;
  void Inc(double v = 1.0) const;
  double Value() const;

 private:
  friend class Metrics;
  explicit Gauge(prometheus::Gauge* g) : g_(g) {}
  prometheus::Gauge* g_ = nullptr;
};

class Histogram {
 public:
  Histogram() = default;
  void Observe(double v) const;
  // Number of observations and their sum (tests).
  uint64_t Count() const;
  double Sum() const;

 private:
  friend class Metrics;
  explicit Histogram(prometheus::Histogram* h) : h_(h) {}
  prometheus::Histogram* h_ = nullptr;
};

// One registry. Thread-safe.
class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The series of metric `id` with these label values (in the order of the
  // metric's label names; missing values are ""). Asserts the kind matches.
  Counter counter(Id id, std::initializer_list<std::string_view> label_values = {});
  Gauge gauge(Id id, std::initializer_list<std::string_view> label_values = {});
  Histogram histogram(Id id, std::initializer_list<std::string_view> label_values = {});

  // Sets a counter to an absolute monotonic value taken from elsewhere (store
  // stats): increments by the difference when it grew.
  void SyncCounter(Id id, double absolute_value);

  // Prometheus text exposition format (version 0.0.4).
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace toktier::metrics
