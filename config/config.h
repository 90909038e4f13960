// Configuration of `toktier serve`: embedded defaults, a JSON file, environment
// variables and command-line flags (later sources override earlier ones).
// Every field is described once, in config_options.cpp (JSON path, variable,
// flag, range, doc line); docs/proxy.md's option table is printed from it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/api.h"
#include "core/core.h"

namespace toktier::config {

enum class ForwardMode { kIds, kText };
inline constexpr std::array<std::string_view, 2> kForwardModeNames = {"ids", "text"};

struct ModelConfig {
  std::string name;                  // the request's "model" field
  std::vector<std::string> aliases;  // further names that select this entry
  std::string tokenizer;             // tokenizer file (HF tokenizer.json, tiktoken JSON/.tiktoken)
  std::string encoding;              // encoding name for a raw .tiktoken rank file
  std::vector<std::string> backends; // empty: the global pool
  ForwardMode forward_mode = ForwardMode::kIds;  // kText: the prompt is forwarded unchanged
  bool add_special_tokens = true;    // default when the request does not say (vLLM: true)
  // /v1/chat/completions (docs/chat.md): "text" relays the request as is;
  // "completions" renders the chat template, forwards "prompt": [ids] to the
  // engine's /v1/completions and translates the answer back to the chat
  // format; "sglang" adds "input_ids" to the chat request; "dynamo" adds
  // "nvext.token_data"; "vllm" sends the IDs to vLLM's tokens-in/tokens-out
  // POST /inference/v1/generate and decodes the answer's IDs back to chat.
  // Unset: the global chat_forward (default "text").
  std::optional<api::ChatForward> chat_forward;
  // The tokenizer_config.json with the chat template, bos/eos. "" = the one
  // next to `tokenizer`, when it exists.
  std::string chat_template_config;
  // Tool calls in the engine's text ("completions" and "vllm" modes): "none",
  // "hermes" (<tool_call> JSON: Qwen), "llama3_json", "deepseek_v3".
  api::ToolCallFormat tool_parser = api::ToolCallFormat::kNone;
  // "completions" mode: <think>...</think> becomes reasoning_content (Qwen3).
  bool reasoning = false;
};

struct Config {
  // Listener.
  std::string listen_address = "127.0.0.1";
  uint16_t port = 8000;  // 0: an ephemeral port (tests)
  int io_threads = 2;
  int workers = 2;
  size_t worker_queue_capacity = 256;  // per worker; full -> forward text (overload passthrough)
  // A job whose new prompt bytes (not shared with its session's previous
  // prompt, as the worker's cache knows it) reach this goes to the large lane,
  // so one huge full tokenization does not hold up the small requests of
  // other sessions pinned to the same worker. The session's later requests
  // wait for it (order per session is kept). Default 1 MiB.
  size_t large_prompt_bytes = size_t{1} << 20;
  // Threads of the large lane (its queue holds worker_queue_capacity jobs;
  // full -> forward text). 0: no large lane, every job on its worker.
  int large_workers = 1;

  // Full tokenizations (state misses, stateless prompts) of at least
  // encode_parallel_min_bytes are cut at proven cut points and encoded on
  // encode_threads threads (core::EncodePool, one text at a time; a miss
  // that finds it busy is encoded by its worker alone, counted in
  // toktier_encode_parallel_total). 0: one per core. 1: off. Default 0.
  int encode_threads = 0;
  size_t encode_parallel_min_bytes = size_t{64} << 10;  // default 64 KiB

  // The GPU path (gpu/, mirrors gpu::GpuOptions): misses of at least
  // gpu_min_bytes go to the device when one is present and the model's
  // family is supported; every other case takes the CPU path, counted by
  // reason in toktier_gpu_route_total. Defaults: on, 2 KiB, 8 MiB, 2, 0.
  bool gpu_enabled = true;
  size_t gpu_min_bytes = 2048;
  size_t gpu_max_bytes = size_t{8} << 20;
  size_t gpu_queue_capacity = 2;
  int gpu_device = 0;

  std::vector<ModelConfig> models;
  // Default of every model's chat_forward (see ModelConfig).
  api::ChatForward chat_forward = api::ChatForward::kText;
  std::vector<std::string> backends = {"http://127.0.0.1:8001"};

  // Session identity: the first of these request headers present names the
  // session (case-insensitive). Without one: content addressing.
  std::vector<std::string> session_headers = {"x-session-id", "x-claude-code-session-id", "session_id",
                                              "session-id", "conversation_id", "x-session-affinity"};
  bool implicit_sessions = true;
  // /v1/messages: leave Claude Code's per-request billing-header system
  // block out of the prompt (as vLLM does).
  bool drop_billing_header = true;
  // false: no state at all, every prompt is tokenized in full (baseline mode).
  bool state_enabled = true;

  // Limits and timeouts.
  size_t max_body_bytes = size_t{64} << 20;
  size_t max_header_bytes = 64 * 1024;
  int read_timeout_ms = 30000;       // reading one request
  int idle_timeout_ms = 120000;      // keep-alive connection without a request
  int backend_connect_timeout_ms = 3000;
  int backend_timeout_ms = 600000;   // to the first response byte, and between body reads
  // Each write to the client (a relayed piece of an answer, a local answer)
  // must finish within this: a client that stops reading a stream is cut
  // off and its engine request cancelled, instead of holding the engine for
  // backend_timeout_ms.
  int client_write_timeout_ms = 30000;
  // Arrays and objects nested deeper than this in a request body (any API)
  // or an engine answer the proxy parses are refused (api/json_limits.h).
  size_t json_max_depth = 128;
  int drain_timeout_ms = 30000;      // graceful shutdown

  // Backends: active health checks and the tokenizer compatibility guard.
  std::string health_path = "/health";
  int health_interval_ms = 5000;
  bool guard_enabled = true;
  int guard_interval_ms = 300000;
  // Texts the guard tokenizes on each backend besides its built-in canaries
  // (backends.cpp): inputs where an engine is known to tokenize differently
  // from the reference (docs/engine.md has llama.cpp's). Default none.
  std::vector<std::string> guard_extra_canaries;

  double shadow_sample_rate = 0.05;

  // State store (mirrors store::StoreOptions).
  std::string data_dir = "./toktier-data";  // "" = memory only
  size_t memory_budget_bytes = size_t{1} << 30;
  int ttl_seconds = 3600;
  size_t write_queue_capacity = 4096;
  bool allow_memory_only_fallback = true;
  size_t chunk_bytes = 64 * 1024;
  size_t rocksdb_write_buffer_bytes = size_t{64} << 20;
  size_t rocksdb_block_cache_bytes = size_t{32} << 20;

  bool log_requests = false;

  // --check-config: validate the configuration, print it, exit (not a file field).
  bool check_only = false;
};


// Applies a JSON config document onto *config: an error on a malformed
// document, unknown fields, wrong types or values out of range.
[[nodiscard]] core::Status ApplyConfigJson(const std::string& json, Config* config);

// Applies the TOKTIER_* environment variables of the option table.
[[nodiscard]] core::Status ApplyConfigEnv(Config* config);

// Every option's range (config_options.cpp) on a configuration built in code;
// the loaders above check each value as it is read.
[[nodiscard]] core::Status CheckOptionRanges(const Config& config);

// The effective configuration in the JSON file's schema (docs/proxy.md),
// every option present, in the table's order: what `--check-config` prints.
std::string ConfigToJson(const Config& config);

// The option table as the Markdown of docs/proxy.md (`toktier config-reference`).
std::string ConfigReferenceMarkdown();
// Every option's JSON path ("limits.body_bytes", "models[].name"), in table order.
std::vector<std::string> ConfigOptionPaths();

// Full loading for `toktier serve`: defaults, --config FILE, env, flags.
// Returns 0 to continue, else the process exit code (help, errors).
int LoadServeConfig(int argc, char** argv, Config* config);

}  // namespace toktier::config
