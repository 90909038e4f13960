// Backend engines: addresses, per-model pools, rendezvous hashing of a
// session over the healthy backends, idle keep-alive connection pools,
// active health checks and the tokenizer compatibility guard (both on one
// background thread with blocking I/O; never on the request path).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/core.h"
#include "metrics/metrics.h"
#include "proxy/server.h"

namespace toktier::proxy {

class TokenizeService;

struct Backend {
  std::string url;          // as configured
  std::string host;         // numeric address after resolution
  uint16_t port = 0;
  bool v6 = false;
  std::string host_header;  // Host: value
  std::atomic<bool> healthy{true};
  metrics::Gauge health_gauge;

  // Idle keep-alive connections (native socket handles), each kept for the
  // tenant (hash of Authorization) whose request it last carried and only
  // ever handed to that tenant again: bytes an engine sends after a response
  // (arriving later than any reuse check can see) can then only reach the
  // tenant they came from. The caller returns a connection only after a
  // complete, well-formed response with nothing buffered after it.
  // TakeIdle checks each candidate again (anything readable, EOF or error:
  // closed, never reused). -1 when none is usable.
  int TakeIdle(uint64_t tenant);
  // Closes the pool's oldest connection when it is full.
  void PutIdle(int fd, uint64_t tenant);
  ~Backend();

 private:
  struct Idle {
    int fd;
    uint64_t tenant;
  };
  std::mutex mu_;
  std::vector<Idle> idle_;  // oldest first
};

class Backends {
 public:
  Backends(const Config& config, metrics::Metrics* metrics);
  ~Backends();

  // Parses and resolves every backend URL of the config. False on errors.
  core::Status Init(TokenizeService* service);
  // Starts health checks and the guard (first round runs synchronously).
  void Start();
  void Stop();

  // The backends for `model` ranked for `session_key` (rendezvous hashing):
  // healthy ones first, by score; then the unhealthy ones (last resort).
  std::vector<Backend*> Rank(std::string_view model, std::string_view session_key) const;
  bool AnyHealthy() const;
  // True when some model has its own pool (passthrough requests then need
  // their body's "model" to be routed).
  bool HasModelPools() const { return !model_pools_.empty(); }

  // One health + guard round now (tests).
  void CheckNow();

 private:
  void Loop();
  // Both catch everything (a thread boundary): logged and counted.
  void HealthRound();
  void GuardRound();
  void HealthRoundOrThrow();
  void GuardRoundOrThrow();

  const Config& config_;
  metrics::Metrics* metrics_;
  TokenizeService* service_ = nullptr;
  std::vector<std::unique_ptr<Backend>> all_;
  std::vector<Backend*> default_pool_;
  std::unordered_map<std::string, std::vector<Backend*>> model_pools_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::mutex round_mu_;
  // The checker's io_context, made once at construction: one per request
  // needs new descriptors, and failed (threw) exactly when the process was
  // out of them. Used under round_mu_.
  struct CheckerIo;
  std::unique_ptr<CheckerIo> checker_io_;
};

// Parses "http://host:port[/]" (http only). False on anything else.
bool ParseBackendUrl(std::string_view url, std::string* host, uint16_t* port);

}  // namespace toktier::proxy
