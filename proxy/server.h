// The HTTP side of `toktier serve` (Boost.Beast; this header keeps Beast out
// of its includers). One Server: an acceptor, several I/O threads, the
// tokenization workers (TokenizeService) and the backends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "metrics/metrics.h"
#include "proxy/config.h"

namespace toktier::proxy {

class TokenizeService;
class Backends;

class Server {
 public:
  explicit Server(Config config);
  ~Server();  // Shutdown() if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads tokenizers, opens the store, checks the backends, binds and starts
  // the I/O threads. False and *error on failure.
  bool Start(std::string* error);
  // The bound port (after Start).
  uint16_t port() const;
  // Handles SIGINT/SIGTERM by shutting down gracefully; blocks until done.
  void RunUntilSignal();
  // Graceful: stop accepting, close idle connections, let requests in flight
  // finish (up to drain_timeout_ms), then stop everything. Idempotent.
  void Shutdown();

  const Config& config() const;
  metrics::Metrics& metrics();
  TokenizeService& service();
  Backends& backends();

  struct Impl;  // internal (server.cpp)

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace toktier::proxy
