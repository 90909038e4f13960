// proxy/: `toktier serve`, the HTTP side (Boost.Beast; this header keeps
// Beast out of its includers). The one header other folders include from
// here: the Server (an acceptor, several I/O threads, the tokenization
// workers and the backends), the configuration check and how tokenizer
// files are read. The configuration itself is config/'s (config/config.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/core.h"
#include "metrics/metrics.h"
#include "config/config.h"

namespace toktier::proxy {

// The configuration room's types, as the server's.
using config::Config;
using config::ForwardMode;
using config::kForwardModeNames;
using config::ModelConfig;

class TokenizeService;
class Backends;

class Server {
 public:
  explicit Server(Config config);
  ~Server();  // Shutdown() if still running
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads tokenizers, opens the store, checks the backends, binds and starts
  // the I/O threads.
  core::Status Start();
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

// ---- `toktier serve --check-config` ------------------------------------------
// Validates a loaded configuration the way the server would use it (tokenizer
// files loaded, URLs and addresses parsed, ranges checked) without
// listening, opening the store or contacting engines. Deployment tooling runs
// it on rendered configs (deploy/helm, tests/deploy).

// True when `config` is usable by `toktier serve`: every model's tokenizer
// loads, names are unique, URLs and the listen address parse, numbers are in
// range. *summary (on success) is a JSON object: "config" (config::ConfigToJson) and
// "tokenizers" (name, version hash, vocabulary size per model). The error
// names the first problem.
core::Status CheckConfig(const Config& config, std::string* summary);

// ---- Tokenizer files (core/ does no I/O) ---------------------------------------

// Reads a whole file into *out (an io error if it cannot be read).
[[nodiscard]] core::Status ReadWholeFile(const std::string& path, std::string* out);

// Loads a tokenizer file (HF tokenizer.json, tiktoken JSON, or a .tiktoken
// rank file with encoding_name) into *out.
[[nodiscard]] core::Status LoadTokenizerFile(const std::string& path, const std::string& encoding_name,
                                             std::shared_ptr<const core::Tokenizer>* out);

}  // namespace toktier::proxy
