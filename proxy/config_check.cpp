#include "proxy/config_check.h"

#include <set>

#include <boost/asio/ip/address.hpp>
#include <nlohmann/json.hpp>

#include "proxy/backends.h"
#include "proxy/json_limits.h"
#include "proxy/tokenizer_files.h"

namespace toktier::proxy {
namespace {

using nlohmann::ordered_json;

// An HTTP field name is a token (RFC 9110 5.1): a session header that is not
// one could never match a request.
bool IsToken(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
    if (std::string_view("\"(),/:;<=>?@[\\]{}").find(static_cast<char>(c)) != std::string_view::npos) return false;
  }
  return true;
}

bool CheckUrls(const std::vector<std::string>& urls, const std::string& where, std::string* error) {
  for (const auto& u : urls) {
    std::string host;
    uint16_t port = 0;
    if (!ParseBackendUrl(u, &host, &port)) {
      *error = where + ": backend URL must be http://host:port: '" + u + "'";
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ConfigToJson(const Config& c) {
  ordered_json models = ordered_json::array();
  for (const auto& m : c.models) {
    models.push_back({{"name", m.name},
                      {"aliases", m.aliases},
                      {"tokenizer", m.tokenizer},
                      {"encoding", m.encoding},
                      {"backends", m.backends},
                      {"forward_mode", m.forward_ids ? "ids" : "text"},
                      {"add_special_tokens", m.add_special_tokens},
                      {"chat_forward", m.chat_forward.empty() ? c.chat_forward : m.chat_forward},
                      {"chat_template_config", m.chat_template_config},
                      {"tool_parser", m.tool_parser},
                      {"reasoning", m.reasoning}});
  }
  ordered_json j = {
      {"listen", c.listen_address},
      {"port", c.port},
      {"io_threads", c.io_threads},
      {"workers", c.workers},
      {"worker_queue_capacity", c.worker_queue_capacity},
      {"large_prompt_bytes", c.large_prompt_bytes},
      {"large_workers", c.large_workers},
      {"encode", {{"threads", c.encode_threads}, {"parallel_min_bytes", c.encode_parallel_min_bytes}}},
      {"gpu",
       {{"enabled", c.gpu_enabled},
        {"min_bytes", c.gpu_min_bytes},
        {"max_bytes", c.gpu_max_bytes},
        {"queue_capacity", c.gpu_queue_capacity},
        {"device", c.gpu_device}}},
      {"backends", c.backends},
      {"models", models},
      {"chat_forward", c.chat_forward},
      {"session_headers", c.session_headers},
      {"implicit_sessions", c.implicit_sessions},
      {"state", c.state_enabled},
      {"shadow_sample_rate", c.shadow_sample_rate},
      {"limits",
       {{"body_bytes", c.max_body_bytes},
        {"header_bytes", c.max_header_bytes},
        {"read_timeout_ms", c.read_timeout_ms},
        {"idle_timeout_ms", c.idle_timeout_ms},
        {"backend_connect_timeout_ms", c.backend_connect_timeout_ms},
        {"backend_timeout_ms", c.backend_timeout_ms},
        {"client_write_timeout_ms", c.client_write_timeout_ms},
        {"json_max_depth", c.json_max_depth},
        {"drain_timeout_ms", c.drain_timeout_ms}}},
      {"health", {{"path", c.health_path}, {"interval_ms", c.health_interval_ms}}},
      {"guard",
       {{"enabled", c.guard_enabled},
        {"interval_ms", c.guard_interval_ms},
        {"extra_canaries", c.guard_extra_canaries}}},
      {"store",
       {{"data_dir", c.data_dir},
        {"memory_budget_bytes", c.memory_budget_bytes},
        {"ttl_seconds", c.ttl_seconds},
        {"write_queue_capacity", c.write_queue_capacity},
        {"allow_memory_only_fallback", c.allow_memory_only_fallback},
        {"chunk_bytes", c.chunk_bytes},
        {"rocksdb_write_buffer_bytes", c.rocksdb_write_buffer_bytes},
        {"rocksdb_block_cache_bytes", c.rocksdb_block_cache_bytes}}},
      {"log_requests", c.log_requests},
  };
  return j.dump(2);
}

bool CheckConfig(const Config& c, std::string* summary, std::string* error) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(c.listen_address, ec);
  if (ec) {
    *error = "listen: not an IP address: '" + c.listen_address + "'";
    return false;
  }
  struct Positive {
    const char* name;
    long long value;
  };
  const Positive positives[] = {
      {"io_threads", c.io_threads},
      {"workers", c.workers},
      {"worker_queue_capacity", static_cast<long long>(c.worker_queue_capacity)},
      {"large_prompt_bytes", static_cast<long long>(c.large_prompt_bytes)},
      {"limits.body_bytes", static_cast<long long>(c.max_body_bytes)},
      {"limits.header_bytes", static_cast<long long>(c.max_header_bytes)},
      {"limits.read_timeout_ms", c.read_timeout_ms},
      {"limits.idle_timeout_ms", c.idle_timeout_ms},
      {"limits.backend_connect_timeout_ms", c.backend_connect_timeout_ms},
      {"limits.backend_timeout_ms", c.backend_timeout_ms},
      {"limits.client_write_timeout_ms", c.client_write_timeout_ms},
      {"limits.drain_timeout_ms", c.drain_timeout_ms},
      {"health.interval_ms", c.health_interval_ms},
      {"guard.interval_ms", c.guard_interval_ms},
      {"store.memory_budget_bytes", static_cast<long long>(c.memory_budget_bytes)},
      {"store.ttl_seconds", c.ttl_seconds},
      {"store.write_queue_capacity", static_cast<long long>(c.write_queue_capacity)},
      {"store.chunk_bytes", static_cast<long long>(c.chunk_bytes)},
      {"store.rocksdb_write_buffer_bytes", static_cast<long long>(c.rocksdb_write_buffer_bytes)},
      {"store.rocksdb_block_cache_bytes", static_cast<long long>(c.rocksdb_block_cache_bytes)},
      {"encode.parallel_min_bytes", static_cast<long long>(c.encode_parallel_min_bytes)},
      {"gpu.min_bytes", static_cast<long long>(c.gpu_min_bytes)},
      {"gpu.max_bytes", static_cast<long long>(c.gpu_max_bytes)},
      {"gpu.queue_capacity", static_cast<long long>(c.gpu_queue_capacity)},
  };
  for (const auto& p : positives) {
    if (p.value <= 0) {
      *error = std::string(p.name) + ": must be positive (is " + std::to_string(p.value) + ")";
      return false;
    }
  }
  if (std::string why = JsonMaxDepthProblem(c.json_max_depth); !why.empty()) {
    *error = std::move(why);
    return false;
  }
  if (c.large_workers < 0) {
    *error = "large_workers: must be 0 or more";
    return false;
  }
  if (c.encode_threads < 0 || c.encode_threads > 256) {
    *error = "encode.threads: must be within [0, 256] (0 = one per core)";
    return false;
  }
  if (c.gpu_device < 0) {
    *error = "gpu.device: must be 0 or more";
    return false;
  }
  if (!(c.shadow_sample_rate >= 0.0 && c.shadow_sample_rate <= 1.0)) {
    *error = "shadow_sample_rate: must be within [0, 1]";
    return false;
  }
  if (c.health_path.empty() || c.health_path[0] != '/') {
    *error = "health.path: must start with '/'";
    return false;
  }
  for (const auto& h : c.session_headers) {
    if (!IsToken(h)) {
      *error = "session_headers: not an HTTP field name: '" + h + "'";
      return false;
    }
  }
  if (c.backends.empty()) {
    *error = "backends: the default pool is empty";
    return false;
  }
  if (!CheckUrls(c.backends, "backends", error)) return false;

  ordered_json tokenizers = ordered_json::array();
  std::set<std::string> names;
  for (const auto& m : c.models) {
    if (m.name.empty() || m.tokenizer.empty()) {
      *error = "models: an entry needs 'name' and 'tokenizer'";
      return false;
    }
    if (!CheckUrls(m.backends, "model " + m.name, error)) return false;
    if (!names.insert(m.name).second) {
      *error = "models: the name '" + m.name + "' is used twice";
      return false;
    }
    for (const auto& a : m.aliases) {
      if (!names.insert(a).second) {
        *error = "models: the name '" + a + "' (an alias of " + m.name + ") is used twice";
        return false;
      }
    }
    std::string err;
    auto tok = cli::LoadTokenizerFile(m.tokenizer, m.encoding, &err);
    if (!tok) {
      *error = "model " + m.name + ": " + err;
      return false;
    }
    tokenizers.push_back({{"model", m.name},
                          {"tokenizer", m.tokenizer},
                          {"version_hash", tok->version_hash()},
                          {"vocab_size", tok->vocab_size()}});
  }
  ordered_json out = {{"config", ordered_json::parse(ConfigToJson(c))}, {"tokenizers", tokenizers}};
  *summary = out.dump(2);
  return true;
}

}  // namespace toktier::proxy
