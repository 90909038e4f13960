#include "config/config_options.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <type_traits>

#include "api/api.h"

namespace toktier::config {
namespace {

using core::Status;
using nlohmann::json;
using nlohmann::ordered_json;

// ---- codecs: one per member type -------------------------------------------

template <class T>
struct EnumNames;
template <>
struct EnumNames<api::ChatForward> {
  static constexpr auto& kNames = api::kChatForwardNames;
};
template <>
struct EnumNames<api::ToolCallFormat> {
  static constexpr auto& kNames = api::kToolParserNames;
};
template <>
struct EnumNames<ForwardMode> {
  static constexpr auto& kNames = kForwardModeNames;
};

template <class T>
constexpr bool kIsEnum = std::is_enum_v<T>;
template <class T>
constexpr bool kIsOptionalEnum = false;
template <class E>
constexpr bool kIsOptionalEnum<std::optional<E>> = std::is_enum_v<E>;

std::string EnumList(std::span<const std::string_view> names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += "\"" + std::string(names[i]) + "\"";
  }
  return out;
}

template <class E>
Status ParseEnum(std::string_view text, E* out) {
  const auto& names = EnumNames<E>::kNames;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == text) return *out = static_cast<E>(i), Status::Ok();
  }
  return Status::Error("must be " + EnumList(names));
}

Status ParseBool(std::string_view v, bool* out) {
  if (v == "1" || v == "true" || v == "yes" || v == "on") return *out = true, Status::Ok();
  if (v == "0" || v == "false" || v == "no" || v == "off") return *out = false, Status::Ok();
  return Status::Error("expected true/false (on/off, 1/0)");
}

std::vector<std::string> SplitComma(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    size_t comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

template <class T>
struct Codec;

template <>
struct Codec<std::string> {
  static constexpr std::string_view kType = "string";
  static Status FromJson(const json& j, std::string* out) {
    if (!j.is_string()) return Status::Error("expected a string");
    *out = j.get<std::string>();
    return Status::Ok();
  }
  static Status FromText(std::string_view s, std::string* out) { return *out = s, Status::Ok(); }
  static ordered_json ToJson(const std::string& v) { return v; }
};

template <>
struct Codec<bool> {
  static constexpr std::string_view kType = "bool";
  static Status FromJson(const json& j, bool* out) {
    if (!j.is_boolean()) return Status::Error("expected true or false");
    *out = j.get<bool>();
    return Status::Ok();
  }
  static Status FromText(std::string_view s, bool* out) { return ParseBool(s, out); }
  static ordered_json ToJson(bool v) { return v; }
};

template <>
struct Codec<std::vector<std::string>> {
  static constexpr std::string_view kType = "list";
  static Status FromJson(const json& j, std::vector<std::string>* out) {
    if (!j.is_array()) return Status::Error("expected an array of strings");
    std::vector<std::string> v;
    for (const auto& e : j) {
      if (!e.is_string()) return Status::Error("expected an array of strings");
      v.push_back(e.get<std::string>());
    }
    *out = std::move(v);
    return Status::Ok();
  }
  // Comma-separated in environment variables and flags.
  static Status FromText(std::string_view s, std::vector<std::string>* out) {
    *out = SplitComma(s);
    return Status::Ok();
  }
  static ordered_json ToJson(const std::vector<std::string>& v) { return v; }
};

template <>
struct Codec<double> {
  static constexpr std::string_view kType = "number";
  static Status FromJson(const json& j, double* out) {
    if (!j.is_number()) return Status::Error("expected a number");
    *out = j.get<double>();
    return Status::Ok();
  }
  static Status FromText(std::string_view s, double* out) {
    std::string text(s);
    char* end = nullptr;
    double x = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !std::isfinite(x)) return Status::Error("expected a number");
    *out = x;
    return Status::Ok();
  }
  static ordered_json ToJson(double v) { return v; }
};

// Integers: an integral JSON number (no fractions, no strings) or decimal
// text, within the type's range; the option's range is checked after.
template <class T>
  requires std::is_integral_v<T> && (!std::is_same_v<T, bool>)
struct Codec<T> {
  static constexpr std::string_view kType = "integer";
  static Status FromJson(const json& j, T* out) {
    if (j.is_number_unsigned()) return Fit(j.get<uint64_t>(), false, out);
    if (j.is_number_integer()) {
      int64_t x = j.get<int64_t>();
      return x < 0 ? Fit(static_cast<uint64_t>(-(x + 1)) + 1, true, out) : Fit(static_cast<uint64_t>(x), false, out);
    }
    return Status::Error("expected an integer");
  }
  static Status FromText(std::string_view s, T* out) {
    bool negative = !s.empty() && s[0] == '-';
    if (negative) s.remove_prefix(1);
    uint64_t x = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return Status::Error("expected an integer");
    return Fit(x, negative, out);
  }
  static ordered_json ToJson(T v) { return v; }

 private:
  // Outside T: kLimitExceeded with the value as its message, which the
  // caller reports as outside the option's range (always within T's).
  static Status Fit(uint64_t magnitude, bool negative, T* out) {
    using Limits = std::numeric_limits<T>;
    auto outside = [&] {
      return Status::Error(core::StatusCode::kLimitExceeded, (negative ? "-" : "") + std::to_string(magnitude));
    };
    if (negative) {
      if (!Limits::is_signed || magnitude > static_cast<uint64_t>(Limits::max()) + 1) return outside();
      *out = static_cast<T>(-static_cast<int64_t>(magnitude - 1) - 1);
      return Status::Ok();
    }
    if (magnitude > static_cast<uint64_t>(Limits::max())) return outside();
    *out = static_cast<T>(magnitude);
    return Status::Ok();
  }
};

template <class E>
  requires kIsEnum<E>
struct Codec<E> {
  static constexpr std::string_view kType = "enum";
  static Status FromJson(const json& j, E* out) {
    if (!j.is_string()) return Status::Error("must be " + EnumList(EnumNames<E>::kNames));
    return ParseEnum(j.get<std::string>(), out);
  }
  static Status FromText(std::string_view s, E* out) { return ParseEnum(s, out); }
  static ordered_json ToJson(E v) { return std::string(EnumNames<E>::kNames[static_cast<size_t>(v)]); }
};

// A model's chat_forward: "" (or absent) = the global one.
template <class E>
struct Codec<std::optional<E>> {
  static constexpr std::string_view kType = "enum";
  static Status FromJson(const json& j, std::optional<E>* out) {
    if (!j.is_string()) return Status::Error("must be \"\" or " + EnumList(EnumNames<E>::kNames));
    return FromText(j.get<std::string>(), out);
  }
  static Status FromText(std::string_view s, std::optional<E>* out) {
    if (s.empty()) return out->reset(), Status::Ok();
    E v;
    if (Status st = ParseEnum(s, &v); !st.ok()) {
      return Status::Error("must be \"\" or " + EnumList(EnumNames<E>::kNames));
    }
    *out = v;
    return Status::Ok();
  }
  static ordered_json ToJson(const std::optional<E>& v) { return v ? Codec<E>::ToJson(*v) : ordered_json(""); }
};

// ---- the type-erased entry, made from a member pointer ---------------------

template <class M>
struct MemberOf;
template <class Owner, class T>
struct MemberOf<T Owner::*> {
  using owner = Owner;
  using type = T;
};

std::string FormatNumber(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", x);
  return buf;
}

template <class Spec>
Status RangeError(const Spec& o, const std::string& value) {
  std::string what = o.max >= kNoMax ? (o.min == 1 ? "must be positive" : "must be " + FormatNumber(o.min) + " or more")
                                     : "must be within [" + FormatNumber(o.min) + ", " + FormatNumber(o.max) + "]";
  return Status::Error(std::string(o.path) + ": " + what + " (is " + value + ")");
}

template <class Spec, class T>
Status CheckRange(const Spec& s, const T& value) {
  if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
    double v = static_cast<double>(value);
    if (v < s.min || v > s.max) return RangeError(s, FormatNumber(v));
  }
  return Status::Ok();
}

// Decodes into a copy of the member and checks its range before assigning:
// a rejected value leaves the configuration as it was.
template <auto Member, class Owner, class Decode>
Status DecodeChecked(const OptionSpec<Owner>& s, Owner* owner, Decode decode) {
  auto value = owner->*Member;
  if (Status st = decode(&value); !st.ok()) {
    if (st.code() == core::StatusCode::kLimitExceeded) return RangeError(s, st.message());
    return Status::Error(std::string(s.path) + ": " + st.message());
  }
  if (Status st = CheckRange(s, value); !st.ok()) return st;
  owner->*Member = std::move(value);
  return Status::Ok();
}

template <auto Member>
OptionSpec<typename MemberOf<decltype(Member)>::owner> Opt(std::string_view path, std::string_view env,
                                                          std::string_view flag, double min, double max,
                                                          std::string_view doc) {
  using Owner = typename MemberOf<decltype(Member)>::owner;
  using T = typename MemberOf<decltype(Member)>::type;
  using Spec = OptionSpec<Owner>;
  Spec o{path, env, flag, min, max, doc, Codec<T>::kType};
  if constexpr (kIsEnum<T>) o.choices = EnumNames<T>::kNames;
  if constexpr (kIsOptionalEnum<T>) o.choices = EnumNames<typename T::value_type>::kNames;
  o.check = [](const Spec& s, const Owner& owner) { return CheckRange(s, owner.*Member); };
  o.set_json = [](const Spec& s, const json& j, Owner* owner) {
    return DecodeChecked<Member>(s, owner, [&](T* v) { return Codec<T>::FromJson(j, v); });
  };
  o.set_text = [](const Spec& s, std::string_view text, Owner* owner) {
    return DecodeChecked<Member>(s, owner, [&](T* v) { return Codec<T>::FromText(text, v); });
  };
  o.get = [](const Owner& owner) { return Codec<T>::ToJson(owner.*Member); };
  return o;
}

constexpr double kThreads = 256;
constexpr double kPortMax = 65535;
constexpr double kNone = 0;  // min = max = 0: not a number (ignored)

// ---- the tables ------------------------------------------------------------
// Ranges: counts, sizes and timeouts are positive unless 0 has a meaning
// (stated in the doc line). The doc lines are the option table of
// docs/proxy.md; a default is printed from Config{} itself.

const std::vector<OptionSpec<Config>>& BuildConfigOptions() {
  static const std::vector<OptionSpec<Config>> kOptions = {
      Opt<&Config::listen_address>("listen", "TOKTIER_LISTEN", "--listen", kNone, kNone,
                                   "listen address (`0.0.0.0` for all); must be an IP address"),
      Opt<&Config::port>("port", "TOKTIER_PORT", "--port", 0, kPortMax, "listen port (0: an ephemeral port)"),
      Opt<&Config::io_threads>("io_threads", "TOKTIER_IO_THREADS", "--io-threads", 1, kThreads,
                               "threads running the HTTP I/O (never tokenization)"),
      Opt<&Config::workers>("workers", "TOKTIER_WORKERS", "--workers", 1, kThreads,
                            "tokenization worker threads; a session is pinned to one (hash of its key). As many "
                            "threads again parse and render chat bodies of 64 KiB or more, off the I/O threads"),
      Opt<&Config::worker_queue_capacity>(
          "worker_queue_capacity", "TOKTIER_WORKER_QUEUE_CAPACITY", "--worker-queue-capacity", 1, kNoMax,
          "jobs per worker queue; when full the prompt is forwarded as text "
          "(`toktier_overload_passthrough_total`); a request never fails for being busy"),
      Opt<&Config::large_prompt_bytes>(
          "large_prompt_bytes", "TOKTIER_LARGE_PROMPT_BYTES", "--large-prompt-bytes", 1, kNoMax,
          "a job with at least this many new prompt bytes (not shared with its session's previous prompt, as the "
          "worker's cache knows it: a new session, a restart, an edit near the start) runs on the large lane"),
      Opt<&Config::large_workers>(
          "large_workers", "TOKTIER_LARGE_WORKERS", "--large-workers", 0, kThreads,
          "threads of the large lane; its queue holds `worker_queue_capacity` jobs (full: forwarded as text, "
          "`toktier_overload_passthrough_total`); 0 = no lane, every job on its session's worker"),
      Opt<&Config::encode_threads>(
          "encode.threads", "TOKTIER_ENCODE_THREADS", "--encode-threads", 0, kThreads,
          "threads of the encode pool that full tokenizations (state misses, stateless prompts) of at least "
          "`encode.parallel_min_bytes` use: the prompt is cut at proven split points and the regions encoded in "
          "parallel (`docs/repair.md`, \"Cut points\"); one prompt at a time, a miss that finds the pool busy is "
          "encoded by its worker alone (`toktier_encode_parallel_total{result}`). 0 = one per core, 1 = off"),
      Opt<&Config::encode_parallel_min_bytes>(
          "encode.parallel_min_bytes", "TOKTIER_ENCODE_PARALLEL_MIN_BYTES", "--encode-parallel-min-bytes", 1, kNoMax,
          "shorter prompts are encoded by their worker alone (waking the pool costs more than it saves)"),
      Opt<&Config::gpu_enabled>(
          "gpu.enabled", "TOKTIER_GPU", "--gpu", kNone, kNone,
          "misses are offered to the GPU path (`docs/gpu.md`) first; without a device each long one counts "
          "`toktier_gpu_route_total{route=\"no_device\"}` and takes the CPU path"),
      Opt<&Config::gpu_min_bytes>("gpu.min_bytes", "TOKTIER_GPU_MIN_BYTES", "--gpu-min-bytes", 1, kNoMax,
                                  "smaller misses stay on the CPU (`below_threshold`)"),
      Opt<&Config::gpu_max_bytes>("gpu.max_bytes", "TOKTIER_GPU_MAX_BYTES", "--gpu-max-bytes", 1, kNoMax,
                                  "larger misses stay on the CPU (`too_large`; the staging buffers' size)"),
      Opt<&Config::gpu_queue_capacity>("gpu.queue_capacity", "TOKTIER_GPU_QUEUE_CAPACITY", "--gpu-queue-capacity", 1,
                                       kNoMax, "requests waiting for the device; more take the CPU path (`queue_full`)"),
      Opt<&Config::gpu_device>("gpu.device", "TOKTIER_GPU_DEVICE", "--gpu-device", 0, 1024, "CUDA device ordinal"),
      Opt<&Config::backends>("backends", "TOKTIER_BACKENDS", "--backends", kNone, kNone,
                             "default engine pool, `http://host:port` each (comma-separated in the environment and "
                             "the flag)"),
      Opt<&Config::chat_forward>(
          "chat_forward", "TOKTIER_CHAT_FORWARD", "--chat-forward", kNone, kNone,
          "how `/v1/chat/completions` reaches the engine, for models whose own `chat_forward` is `\"\"`: `text` "
          "(relayed), `completions` (rendered, IDs to `/v1/completions`, answer translated), `sglang` "
          "(`input_ids`), `dynamo` (`nvext.token_data`), `vllm` (IDs to `/inference/v1/generate`); `docs/chat.md`"),
      Opt<&Config::session_headers>(
          "session_headers", "TOKTIER_SESSION_HEADERS", "--session-headers", kNone, kNone,
          "request headers naming the session, first present wins (case-insensitive): `X-Session-Id` (toktier's "
          "own), `X-Claude-Code-Session-Id` (Claude Code), `session_id`, `session-id` and `conversation_id` (Codex "
          "CLI versions), `X-Session-Affinity` (OpenCode); a `/v1/messages` request without one is named by its "
          "`metadata.user_id` session"),
      Opt<&Config::drop_billing_header>(
          "drop_billing_header", "TOKTIER_DROP_BILLING_HEADER", "--drop-billing-header", kNone, kNone,
          "`/v1/messages`: leave a system block starting `x-anthropic-billing-header` (Claude Code's, with a "
          "per-request hash) out of the prompt, as vLLM does; `docs/agents.md`"),
      Opt<&Config::implicit_sessions>("implicit_sessions", "TOKTIER_IMPLICIT_SESSIONS", "--implicit-sessions", kNone,
                                      kNone, "content addressing for requests without a session header"),
      Opt<&Config::state_enabled>("state", "TOKTIER_STATE", "--state", kNone, kNone,
                                  "false: no state, every prompt tokenized in full (the baseline for benchmarks)"),
      Opt<&Config::shadow_sample_rate>(
          "shadow_sample_rate", "TOKTIER_SHADOW_SAMPLE_RATE", "--shadow-sample-rate", 0, 1,
          "fraction of prompts re-tokenized from scratch off the request path (`core::ShadowVerifier`); a mismatch "
          "quarantines that tokenizer version's fast path"),
      Opt<&Config::max_body_bytes>("limits.body_bytes", "TOKTIER_LIMITS_BODY_BYTES", "--limits-body-bytes", 1,
                                   kNoMax, "larger request bodies get 413"),
      Opt<&Config::max_header_bytes>(
          "limits.header_bytes", "TOKTIER_LIMITS_HEADER_BYTES", "--limits-header-bytes", 1, kNoMax,
          "every byte of the request line and all header fields together; larger gets 431 (also the limit for an "
          "engine's response header: 502)"),
      Opt<&Config::read_timeout_ms>("limits.read_timeout_ms", "TOKTIER_LIMITS_READ_TIMEOUT_MS",
                                    "--limits-read-timeout-ms", 1, kNoMax,
                                    "one request, header and body together, from its first byte"),
      Opt<&Config::idle_timeout_ms>("limits.idle_timeout_ms", "TOKTIER_LIMITS_IDLE_TIMEOUT_MS",
                                    "--limits-idle-timeout-ms", 1, kNoMax,
                                    "keep-alive connection waiting for the first byte of a request"),
      Opt<&Config::backend_connect_timeout_ms>("limits.backend_connect_timeout_ms",
                                               "TOKTIER_LIMITS_BACKEND_CONNECT_TIMEOUT_MS",
                                               "--limits-backend-connect-timeout-ms", 1, kNoMax,
                                               "connect; on failure the next backend is tried"),
      Opt<&Config::backend_timeout_ms>(
          "limits.backend_timeout_ms", "TOKTIER_LIMITS_BACKEND_TIMEOUT_MS", "--limits-backend-timeout-ms", 1, kNoMax,
          "writing the request to the backend; then to its final response header, interim answers included (504 "
          "after it); then between body reads (the client's response is cut off)"),
      Opt<&Config::client_write_timeout_ms>(
          "limits.client_write_timeout_ms", "TOKTIER_LIMITS_CLIENT_WRITE_TIMEOUT_MS",
          "--limits-client-write-timeout-ms", 1, kNoMax,
          "each write to the client (a local answer, a relayed or translated piece of an engine's answer): a client "
          "that stops reading a stream is cut off (`client_write_timeout`) and its engine request cancelled, "
          "whatever `backend_timeout_ms` allows"),
      Opt<&Config::json_max_depth>(
          "limits.json_max_depth", "TOKTIER_LIMITS_JSON_MAX_DEPTH", "--limits-json-max-depth",
          static_cast<double>(api::kMinJsonMaxDepth), static_cast<double>(api::kMaxJsonMaxDepth),
          "arrays and objects nested deeper than this in a request body (completions, chat) are a 400 before "
          "anything parses them; engine answers and the model's tool-call text the proxy parses have the same bound "
          "(deeper = malformed). The template renderer, serializer and copies recurse once per level: the bound is "
          "what keeps an I/O thread's stack safe (`api/json_limits.h`, `docs/security.md`)"),
      Opt<&Config::drain_timeout_ms>("limits.drain_timeout_ms", "TOKTIER_LIMITS_DRAIN_TIMEOUT_MS",
                                     "--limits-drain-timeout-ms", 1, kNoMax, "graceful shutdown (SIGTERM/SIGINT)"),
      Opt<&Config::health_path>("health.path", "TOKTIER_HEALTH_PATH", "--health-path", kNone, kNone,
                                "active health checks (`GET`, 200 = healthy); `/v1/models` for engines without "
                                "`/health`; must start with `/`"),
      Opt<&Config::health_interval_ms>("health.interval_ms", "TOKTIER_HEALTH_INTERVAL_MS", "--health-interval-ms", 1,
                                       kNoMax, "time between health checks of each backend"),
      Opt<&Config::guard_enabled>("guard.enabled", "TOKTIER_GUARD", "--guard", kNone, kNone,
                                  "the tokenizer compatibility guard (below)"),
      Opt<&Config::guard_interval_ms>("guard.interval_ms", "TOKTIER_GUARD_INTERVAL_MS", "--guard-interval-ms", 1,
                                      kNoMax, "time between guard rounds"),
      Opt<&Config::guard_extra_canaries>(
          "guard.extra_canaries", "", "", kNone, kNone,
          "more texts for the guard to compare, after its three built-in ones (e.g. inputs where an engine is known "
          "to tokenize differently: `docs/engine.md`)"),
      Opt<&Config::data_dir>("store.data_dir", "TOKTIER_DATA_DIR", "--data-dir", kNone, kNone,
                             "the RocksDB directory of the state store (`store::StoreOptions`); `\"\"` = memory only"),
      Opt<&Config::memory_budget_bytes>(
          "store.memory_budget_bytes", "TOKTIER_STORE_MEMORY_BUDGET_BYTES", "--store-memory-budget-bytes", 1, kNoMax,
          "everything the proxy keeps per session (see \"Memory\" below): half for the store's memory tier, 1/32 "
          "for the content-addressing index, the rest for the workers' session caches"),
      Opt<&Config::ttl_seconds>("store.ttl_seconds", "TOKTIER_STORE_TTL_SECONDS", "--store-ttl-seconds", 1, kNoMax,
                                "a state expires this long after its last commit (refused on read, swept and compacted away; `docs/store.md`)"),
      Opt<&Config::write_queue_capacity>("store.write_queue_capacity", "TOKTIER_STORE_WRITE_QUEUE_CAPACITY",
                                         "--store-write-queue-capacity", 1, kNoMax,
                                         "commits waiting for the store's writer thread; when full a write is skipped and counted, never blocking a request"),
      Opt<&Config::allow_memory_only_fallback>(
          "store.allow_memory_only_fallback", "TOKTIER_STORE_ALLOW_MEMORY_ONLY_FALLBACK",
          "--store-allow-memory-only-fallback", kNone, kNone,
          "a data directory RocksDB cannot open degrades to memory only (logged, `toktier_store_memory_only` 1) "
          "instead of failing the start"),
      Opt<&Config::chunk_bytes>("store.chunk_bytes", "TOKTIER_STORE_CHUNK_BYTES", "--store-chunk-bytes", 1, kNoMax,
                                "bytes of text per stored chunk of a session's state"),
      Opt<&Config::rocksdb_write_buffer_bytes>("store.rocksdb_write_buffer_bytes",
                                               "TOKTIER_STORE_ROCKSDB_WRITE_BUFFER_BYTES",
                                               "--store-rocksdb-write-buffer-bytes", 1, kNoMax,
                                               "RocksDB's memtable size"),
      Opt<&Config::rocksdb_block_cache_bytes>("store.rocksdb_block_cache_bytes",
                                              "TOKTIER_STORE_ROCKSDB_BLOCK_CACHE_BYTES",
                                              "--store-rocksdb-block-cache-bytes", 1, kNoMax,
                                              "RocksDB's block cache size"),
      Opt<&Config::log_requests>("log_requests", "TOKTIER_LOG_REQUESTS", "--log-requests", kNone, kNone,
                                 "one line per request on stderr, with its phases' times"),
  };
  return kOptions;
}

const std::vector<OptionSpec<ModelConfig>>& BuildModelOptions() {
  static const std::vector<OptionSpec<ModelConfig>> kOptions = {
      Opt<&ModelConfig::name>("name", "", "", kNone, kNone, "the request's `\"model\"` value that selects this entry"),
      Opt<&ModelConfig::aliases>("aliases", "", "", kNone, kNone, "further `\"model\"` values that select it"),
      Opt<&ModelConfig::tokenizer>("tokenizer", "", "", kNone, kNone,
                                   "HF `tokenizer.json`, tiktoken JSON, or a `.tiktoken` file with `encoding`"),
      Opt<&ModelConfig::encoding>("encoding", "", "", kNone, kNone, "the encoding name of a raw `.tiktoken` file"),
      Opt<&ModelConfig::backends>("backends", "", "", kNone, kNone, "the model's own pool (empty: the default pool)"),
      Opt<&ModelConfig::forward_mode>("forward_mode", "", "", kNone, kNone,
                                      "`ids` or `text` (forward the prompt unchanged)"),
      Opt<&ModelConfig::add_special_tokens>("add_special_tokens", "", "", kNone, kNone,
                                            "used when the request has no `add_special_tokens` field"),
      Opt<&ModelConfig::chat_forward>("chat_forward", "", "", kNone, kNone,
                                      "the model's own `chat_forward` (`\"\"`: the global one)"),
      Opt<&ModelConfig::chat_template_config>(
          "chat_template_config", "", "", kNone, kNone,
          "the `tokenizer_config.json` with the chat template and bos/eos (`\"\"`: the one next to `tokenizer`)"),
      Opt<&ModelConfig::tool_parser>("tool_parser", "", "", kNone, kNone,
                                     "tool calls in the engine's text (`completions` and `vllm` modes): `none`, "
                                     "`hermes`, `llama3_json`, `deepseek_v3` (`tools/dev-models.json`: qwen3 `hermes`, llama3.1 "
                                     "`llama3_json`)"),
      Opt<&ModelConfig::reasoning>("reasoning", "", "", kNone, kNone,
                                   "`completions` and `vllm` modes: `<think>...</think>` becomes `reasoning_content` "
                                   "(`tools/dev-models.json`: qwen3)"),
  };
  return kOptions;
}

// "67108864 (64 MiB)", "30000 (30 s)": the unit the option's name gives.
std::string DefaultText(std::string_view path, const ordered_json& v) {
  std::string text = "`" + v.dump() + "`";
  if (!v.is_number_unsigned() && !v.is_number_integer()) return text;
  uint64_t x = v.get<uint64_t>();
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends("_bytes") && x >= 1024) {
    const char* units[] = {"KiB", "MiB", "GiB"};
    uint64_t scaled = x / 1024;
    int u = 0;
    if (x % 1024) return text;
    while (u < 2 && scaled % 1024 == 0) scaled /= 1024, ++u;
    return text + " (" + std::to_string(scaled) + " " + units[u] + ")";
  }
  if (ends("_ms") && x >= 1000 && x % 1000 == 0) return text + " (" + std::to_string(x / 1000) + " s)";
  return text;
}

template <class Owner>
std::string TypeText(const OptionSpec<Owner>& o) {
  if (!o.choices.empty()) {
    std::string out;
    for (size_t i = 0; i < o.choices.size(); ++i) out += (i ? ", `" : "`") + std::string(o.choices[i]) + "`";
    return out;
  }
  if (o.type != "integer" && o.type != "number") return std::string(o.type);
  if (o.max >= kNoMax) return std::string(o.type) + " >= " + FormatNumber(o.min);
  return std::string(o.type) + " " + FormatNumber(o.min) + "-" + FormatNumber(o.max);
}

std::string Cell(std::string_view s) { return s.empty() ? "" : "`" + std::string(s) + "`"; }

}  // namespace

std::string ConfigReferenceMarkdown() {
  std::string out =
      "| option | type | default | environment, flag | meaning |\n"
      "|---|---|---|---|---|\n";
  const Config defaults;
  for (const auto& o : ConfigOptions()) {
    std::string names = Cell(o.env);
    if (!o.flag.empty()) names += (names.empty() ? "" : ", ") + Cell(o.flag);
    out += "| `" + std::string(o.path) + "` | " + TypeText(o) + " | " + DefaultText(o.path, o.get(defaults)) +
           " | " + names + " | " + std::string(o.doc) + " |\n";
  }
  const ModelConfig model_defaults;
  for (const auto& o : ModelOptions()) {
    out += "| `models[]." + std::string(o.path) + "` | " + TypeText(o) + " | " +
           DefaultText(o.path, o.get(model_defaults)) + " | | " + std::string(o.doc) + " |\n";
  }
  return out;
}

std::string ConfigToJson(const Config& c) {
  ordered_json j = ordered_json::object();
  for (const auto& o : ConfigOptions()) {
    // "limits.body_bytes" -> j["limits"]["body_bytes"], in the table's order.
    ordered_json* at = &j;
    std::string_view path = o.path;
    for (size_t dot; (dot = path.find('.')) != std::string_view::npos; path.remove_prefix(dot + 1)) {
      at = &(*at)[std::string(path.substr(0, dot))];
    }
    (*at)[std::string(path)] = o.get(c);
  }
  ordered_json models = ordered_json::array();
  for (const auto& m : c.models) {
    ordered_json entry = ordered_json::object();
    for (const auto& o : ModelOptions()) entry[std::string(o.path)] = o.get(m);
    // The mode the model gets, its own or the global one.
    entry["chat_forward"] = api::kChatForwardNames[static_cast<size_t>(m.chat_forward.value_or(c.chat_forward))];
    models.push_back(std::move(entry));
  }
  j["models"] = std::move(models);
  return j.dump(2);
}

Status CheckOptionRanges(const Config& c) {
  for (const auto& o : ConfigOptions()) {
    if (Status st = o.check(o, c); !st.ok()) return st;
  }
  return Status::Ok();
}

std::vector<std::string> ConfigOptionPaths() {
  std::vector<std::string> out;
  for (const auto& o : ConfigOptions()) out.emplace_back(o.path);
  for (const auto& o : ModelOptions()) out.push_back("models[]." + std::string(o.path));
  return out;
}

std::span<const OptionSpec<Config>> ConfigOptions() { return BuildConfigOptions(); }

std::span<const OptionSpec<ModelConfig>> ModelOptions() { return BuildModelOptions(); }

Status ParseModelJson(const json& entry, ModelConfig* model) {
  if (!entry.is_object()) return Status::Error("each entry of 'models' must be an object");
  for (auto it = entry.begin(); it != entry.end(); ++it) {
    const OptionSpec<ModelConfig>* spec = nullptr;
    for (const auto& o : ModelOptions()) {
      if (o.path == it.key()) spec = &o;
    }
    if (!spec) return Status::Error("unknown field in a model entry: '" + it.key() + "'");
    if (Status st = spec->set_json(*spec, it.value(), model); !st.ok()) {
      return Status::Error("model field " + st.message());
    }
  }
  if (model->name.empty() || model->tokenizer.empty()) {
    return Status::Error("a model entry needs 'name' and 'tokenizer'");
  }
  return Status::Ok();
}

}  // namespace toktier::config
