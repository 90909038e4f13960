// toktier core: the public interface of core/ (tokenizers, token state,
// incremental repair). Other folders include only this header.
//
// core/ is pure: no file or network I/O, no metrics. Callers read files and
// hand their bytes in; every operation returns an outcome that callers count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace toktier::core {

// Operations that can fail on untrusted input return a Status
// (core/status.h); no exceptions cross this interface.

// Which file format a tokenizer came from.
enum class TokenizerFormat { kHuggingFaceJson, kTiktokenJson, kTiktokenRanks };

class TokenizerImpl;

// ---- Parallel full tokenization ---------------------------------------------

// A fork-join pool for full tokenizations of long texts: the text is cut
// into regions at points no piece can cross (added-token starts, or points
// inside a segment that are normalizer split points and pre-tokenizer hard
// boundaries, as repair proves them), the regions are encoded on the pool's
// threads and the caller's, and their IDs and ends concatenated: the result
// equals the one-thread encoding by construction. One text at a time: a
// caller that finds the pool busy encodes alone (EncodeOutcome::pool_busy).
class EncodePool {
 public:
  // `threads` counts the caller: threads - 1 workers are started (none for
  // threads <= 1).
  explicit EncodePool(int threads);
  ~EncodePool();  // joins the workers
  EncodePool(const EncodePool&) = delete;
  EncodePool& operator=(const EncodePool&) = delete;
  [[nodiscard]] int threads() const;
  // Runs task(i) for every i in [0, n) on the workers and the caller and
  // returns when all are done; false (nothing run) when another Run is in
  // progress.
  [[nodiscard]] bool Run(size_t n, const std::function<void(size_t)>& task);

  struct Impl;  // opaque (parallel_encode.cpp)

 private:
  friend class TokenizerImpl;  // encodes into the pool's region buffers, holding the pool
  std::unique_ptr<Impl> impl_;
};

struct EncodeOptions {
  // Pool for texts of at least parallel_min_bytes; null: the calling thread
  // alone. Default null.
  EncodePool* pool = nullptr;
  // Shorter texts are encoded by the calling thread alone (waking workers
  // costs more than they save). Default 64 KiB.
  size_t parallel_min_bytes = size_t{64} << 10;
  // Smallest region of the parallel path (the last regions, which balance
  // the threads, have this size); 0 (default): 1/64 of the text per thread,
  // within 4-32 KiB. Tests set it small to cut short texts.
  size_t chunk_bytes = 0;
};

// How one full tokenization ran.
struct EncodeOutcome {
  size_t chunks = 0;       // independent regions the text was cut into (0: not cut)
  int threads = 1;         // threads that encoded them
  bool pool_busy = false;  // the pool was encoding another text: this one ran alone
  bool uncut = false;      // long enough for the pool, but no cut point was found (or allowed)
};

// An immutable tokenizer model, shared by all sessions and threads.
class Tokenizer {
 public:
  // A Hugging Face tokenizer.json. A component that is not supported is an
  // error naming it; it never silently yields other IDs.
  [[nodiscard]] static std::shared_ptr<const Tokenizer> FromHuggingFaceJson(
      std::string_view json, Status* status);
  // One of the `encoders/*.json` files of the tiktoken npm package
  // ({"pat_str", "special_tokens", "bpe_ranks"}).
  [[nodiscard]] static std::shared_ptr<const Tokenizer> FromTiktokenJson(
      std::string_view json, Status* status);
  // A raw `.tiktoken` rank file (base64 token, space, rank per line) with the
  // encoding name that fixes its pattern and special tokens (r50k_base,
  // p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony).
  [[nodiscard]] static std::shared_ptr<const Tokenizer> FromTiktokenRanks(
      std::string_view ranks, std::string_view encoding_name, Status* status);
  // Picks the format from the content: a JSON object with "model" is HF, one
  // with "bpe_ranks" is tiktoken JSON, anything else needs encoding_name.
  [[nodiscard]] static std::shared_ptr<const Tokenizer> FromBytes(
      std::string_view content, std::string_view encoding_name, Status* status);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token IDs of `text` (valid UTF-8; see ValidateUtf8) exactly as the
  // reference gives them. For HF tokenizers add_special_tokens runs the
  // post-processor (BOS etc.). For tiktoken encodings, add_special_tokens
  // means special-token strings in the text become special tokens
  // (tiktoken's allowed_special="all"); without it they are ordinary text
  // (encode_ordinary).
  void Encode(std::string_view text, bool add_special_tokens,
              std::vector<uint32_t>& ids) const;

  // Same, also giving each token's end as a byte offset into `text`
  // (non-decreasing; a token made up entirely by a normalizer or the
  // post-processor ends where its source position is).
  void EncodeWithEnds(std::string_view text, bool add_special_tokens,
                      std::vector<uint32_t>& ids,
                      std::vector<uint32_t>& ends) const;

  // Same results, on several threads for long texts (EncodeOptions).
  void Encode(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids,
              const EncodeOptions& options, EncodeOutcome* outcome = nullptr) const;
  void EncodeWithEnds(std::string_view text, bool add_special_tokens, std::vector<uint32_t>& ids,
                      std::vector<uint32_t>& ends, const EncodeOptions& options,
                      EncodeOutcome* outcome = nullptr) const;

  // Content hash of everything that determines the output (hex, 16 chars).
  [[nodiscard]] const std::string& version_hash() const;
  [[nodiscard]] TokenizerFormat format() const;
  // Human-readable summary: model, components, which fast paths apply.
  [[nodiscard]] std::string Describe() const;
  [[nodiscard]] size_t vocab_size() const;
  // Bytes of a token (raw UTF-8 bytes for byte-level vocabularies); empty if
  // the id is unknown.
  [[nodiscard]] std::string TokenBytes(uint32_t id) const;
  // Whether `id` is a special token: an HF added token marked "special", or a
  // tiktoken special token. Decoding with skip_special_tokens leaves these
  // out (non-special added tokens such as Qwen3's <think> stay).
  [[nodiscard]] bool IsSpecialToken(uint32_t id) const;
  // Whether the text of a list of IDs is the concatenation of their
  // TokenBytes, as the reference decodes it: byte-level BPE whose decoder is
  // ByteLevel, and tiktoken. False for SentencePiece-style vocabularies,
  // whose decoders rewrite "▁" and byte-fallback tokens (not supported).
  [[nodiscard]] bool DecodesByConcatenation() const;

  // Internal: the implementation, for core's own components (repair).
  [[nodiscard]] const TokenizerImpl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerImpl> impl);
  std::unique_ptr<TokenizerImpl> impl_;
  friend class TokenizerImpl;
};

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
[[nodiscard]] size_t FindInvalidUtf8(std::string_view text);

// Appends the UTF-8 encoding of cp (a Unicode scalar value) to out.
void AppendUtf8(char32_t cp, std::string& out);

// Length of the common prefix of a and b in bytes (memcmp over blocks, then
// words): the O(N) step of every state lookup, so it is kept fast.
[[nodiscard]] size_t CommonPrefixLength(std::string_view a, std::string_view b);

// ---- Token state and incremental repair ------------------------------------

// A byte span [begin, end) of the source text.
struct TextSpan {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool operator==(const TextSpan&) const = default;
};

// One session's token state: the text, its token IDs, each token's end byte
// offset in the text, where added tokens were matched, the tokenizer version
// and the add_special_tokens setting it was made with. Edits splice it in
// place (truncate, then append); nothing is copied per request.
class TokenState {
 public:
  [[nodiscard]] const std::string& text() const { return text_; }
  [[nodiscard]] const std::vector<uint32_t>& ids() const { return ids_; }
  [[nodiscard]] const std::vector<uint32_t>& ends() const { return ends_; }
  [[nodiscard]] const std::vector<TextSpan>& added_spans() const { return added_; }
  [[nodiscard]] const std::string& version_hash() const { return version_hash_; }
  [[nodiscard]] bool add_special_tokens() const { return add_special_tokens_; }
  [[nodiscard]] bool empty() const { return version_hash_.empty(); }
  // Bytes this state accounts for: 4 per ID, 4 per end, the text, the spans.
  [[nodiscard]] size_t AccountedBytes() const {
    return ids_.size() * 4 + ends_.size() * 4 + text_.size() + added_.size() * sizeof(TextSpan);
  }
  void Clear() { *this = TokenState(); }

  // Rebuilds a state from persisted parts. Checks that the parts are
  // consistent (sizes, order, ends within the text); the caller checks the
  // version hash and a content checksum. Returns false when inconsistent.
  [[nodiscard]] bool Assign(std::string text, std::vector<uint32_t> ids, std::vector<uint32_t> ends,
                            std::vector<TextSpan> added, std::string version_hash, bool add_special_tokens);

 private:
  friend class Repairer;
  std::string text_;
  std::vector<uint32_t> ids_;
  std::vector<uint32_t> ends_;
  std::vector<TextSpan> added_;
  std::string version_hash_;
  bool add_special_tokens_ = false;
};

// How a state update was done.
enum class RepairPath : uint8_t {
  kUnchanged,  // same text: the cached IDs as they are
  kFirstTry,   // spliced at a sync point in the first window
  kWidened,    // spliced after widening the window (RepairOutcome::widenings)
  kFull,       // tokenized in full (RepairOutcome::full_reason)
};

enum class FullReason : uint8_t {
  kNone,
  kNoState,           // nothing cached (a new session)
  kVersionMismatch,   // state made by another tokenizer version
  kSpecialsMismatch,  // state made with another add_special_tokens
  kEditAtStart,       // the texts differ in their first characters
  kNoCertificate,     // no sync point within the widest window (or before the edit)
  kUnsupported,       // the tokenizer has a component repair cannot certify
  kQuarantined,       // the fast path is quarantined for this version
};

[[nodiscard]] std::string_view RepairPathName(RepairPath p);
[[nodiscard]] std::string_view FullReasonName(FullReason r);

struct RepairOutcome {
  RepairPath path = RepairPath::kFull;
  FullReason full_reason = FullReason::kNone;
  int widenings = 0;
  size_t common_prefix = 0;  // L: bytes shared with the previous text
  size_t sync_point = 0;     // p: where fresh tokenization started
  size_t kept_tokens = 0;    // cached tokens reused
  size_t fresh_tokens = 0;   // tokens made in this call
  EncodeOutcome encode;      // for kFull: how the full tokenization ran
};

struct RepairOptions {
  // Characters before the edit searched for a sync point at first (seeds: 512).
  size_t window_chars = 512;
  // Doublings of the window before falling back to a full tokenization.
  int max_widenings = 5;
  // False forces a full tokenization on the generic (reference) path, e.g.
  // when the shadow verifier quarantined this tokenizer version.
  bool allow_fast_path = true;
  // The caller's proof that new_text and the state's text agree on their
  // first `known_common_prefix` bytes (e.g. both were unescaped from the same
  // raw bytes); the comparison starts there. Must not exceed either length.
  // Default 0 (compare everything).
  size_t known_common_prefix = 0;
  // How a full tokenization (a miss) runs: its pool and threshold.
  EncodeOptions encode;
};

// Brings `state` to `new_text`: IDs equal to a full tokenization of new_text
// with add_special_tokens (the contract), reusing the cached prefix when a
// certified sync point exists. new_text must be valid UTF-8.
class Repairer {
 public:
  static RepairOutcome Update(const Tokenizer& tokenizer, TokenState& state, std::string_view new_text,
                              bool add_special_tokens, const RepairOptions& options = {});
  // Why no text can be repaired from `state` (no state, another tokenizer
  // version, another add_special_tokens): the reason Update gives before it
  // compares texts. kNone when repair may apply.
  [[nodiscard]] static FullReason StateMissReason(const Tokenizer& tokenizer, const TokenState& state,
                                                  bool add_special_tokens);
  // Tokenizes in full into `state` (the miss path).
  static void Reset(const Tokenizer& tokenizer, TokenState& state, std::string_view text, bool add_special_tokens,
                    bool generic_path = false, const EncodeOptions& options = {}, EncodeOutcome* outcome = nullptr);
};

// ---- Shadow verifier --------------------------------------------------------

struct ShadowOptions {
  // Fraction of submitted results re-tokenized from scratch. Default 0.05.
  double sample_rate = 0.05;
  // Samples waiting for a verifier thread; more are dropped (counted). Default 64.
  size_t queue_capacity = 64;
  // Background verifier threads. Default 1.
  int threads = 1;
};

// What the verifier found for one sample; delivered to the sink on a
// verifier thread.
struct ShadowEvent {
  std::string version_hash;
  uint64_t text_hash = 0;   // xxh3 of the text (the text itself is never logged)
  size_t text_bytes = 0;
  bool match = true;
  size_t first_difference = 0;  // token index of the first difference (when !match)
  size_t ids_compared = 0;
  bool quarantined_now = false;  // this mismatch quarantined the version
  bool error = false;            // the reference path could not run (no verdict)
};

enum class ShadowSubmit : uint8_t { kNotSampled, kQueued, kDropped, kQuarantined };

// Re-tokenizes a sampled fraction of results from scratch on the generic
// (regex) path, off the request path, and compares. A mismatch quarantines
// the fast path for that tokenizer version: callers then ask IsQuarantined and
// tokenize in full on the generic path (RepairOptions::allow_fast_path=false).
class ShadowVerifier {
 public:
  using Sink = std::function<void(const ShadowEvent&)>;
  ShadowVerifier(ShadowOptions options, Sink sink);
  ~ShadowVerifier();  // stops the threads; samples still queued are discarded
  ShadowVerifier(const ShadowVerifier&) = delete;
  ShadowVerifier& operator=(const ShadowVerifier&) = delete;

  // Samples (by rate) and queues a copy of text and ids. Cheap when not sampled.
  ShadowSubmit MaybeSubmit(const std::shared_ptr<const Tokenizer>& tokenizer, std::string_view text,
                           bool add_special_tokens, const std::vector<uint32_t>& ids);
  // Queues unconditionally (tests, explicit checks); kDropped when full.
  ShadowSubmit Submit(const std::shared_ptr<const Tokenizer>& tokenizer, std::string_view text,
                      bool add_special_tokens, const std::vector<uint32_t>& ids);
  [[nodiscard]] bool IsQuarantined(std::string_view version_hash) const;
  // Waits until every queued sample is checked (tests, shutdown).
  void Drain();

  struct Counters {
    uint64_t submitted = 0, dropped = 0, checked = 0, mismatches = 0;
  };
  [[nodiscard]] Counters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace toktier::core

// ---- Device export (gpu/) ----
// What gpu/ needs to tokenize on a device exactly as core does (docs/gpu.md).
// gpu/ includes only this header; the export is built from core's own tables
// (core/device_export.cpp), so the device path and the CPU path share every
// table. Nothing in core uses it.
namespace toktier::core {

// The pre-tokenizer families gpu/ implements. kOther: a pre-tokenizer that is
// none of them (GPT-2, generic regexes, no pre-tokenizer).
enum class DeviceFamily : uint8_t { kOther, kCl100k, kQwen2, kO200k, kDeepSeekV3 };
enum class DeviceNormalizer : uint8_t { kIdentity, kNfc, kOther };

// Class bits of the family scanners (same values and meaning as the CPU
// scanners' classes in core/family_scanners.cpp).
enum DeviceClassBits : uint16_t {
  kDevL = 1u << 0,           // \p{L}
  kDevN = 1u << 1,           // \p{N}
  kDevWs = 1u << 2,          // \s
  kDevCrLf = 1u << 3,        // \r or \n
  kDevSpace = 1u << 4,       // ' '
  kDevO = 1u << 5,           // [^\s\p{L}\p{N}]
  kDevUpSet = 1u << 6,       // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kDevLowSet = 1u << 7,      // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kDevLM = 1u << 8,          // [\p{L}\p{M}]
  kDevPS = 1u << 9,          // [\p{P}\p{S}]
  kDevCjk = 1u << 10,        // DeepSeek's [一-龥぀-ゟ゠-ヿ]
  kDevAsciiPunct = 1u << 11, // DeepSeek's ASCII punctuation class
  kDevAsciiAlpha = 1u << 12, // [A-Za-z]
  kDevCrLfSlash = 1u << 13,  // [\r\n/]
  kDevApos = 1u << 14,       // '
  kDevDsOther = 1u << 15,    // neither \p{N} nor DeepSeek CJK
};

// The scanner class of every code point, two-level:
// bits(cp) = blocks[block_of[cp >> 8] * 256 + (cp & 255)].
struct DeviceClassTable {
  std::vector<uint16_t> block_of;  // 0x1100 entries
  std::vector<uint16_t> blocks;    // distinct 256-entry blocks
};
[[nodiscard]] DeviceClassTable ExportDeviceClassTable();
// The class of one code point (what the table holds).
[[nodiscard]] uint16_t DeviceClassOf(char32_t cp);

struct DeviceMerge {
  uint32_t left = 0, right = 0, rank = 0, id = 0;
};

// Everything of a tokenizer that the device pipeline reads.
struct DeviceTables {
  bool supported = false;          // the device pipeline reproduces this tokenizer
  std::string unsupported_reason;  // why not (when !supported)
  DeviceFamily family = DeviceFamily::kOther;
  DeviceNormalizer normalizer = DeviceNormalizer::kOther;
  bool tiktoken = false;
  bool ignore_merges = false;  // a piece that is a token is that token
  // id -> token bytes for the BPE vocabulary ("" when the id is not the one
  // core finds for those bytes).
  std::vector<std::string> tokens;
  // id -> BPE of the token's own bytes gives exactly [id] (so a piece equal
  // to the token may be looked up whole); with ignore_merges every token.
  std::vector<uint8_t> whole_piece;
  std::vector<DeviceMerge> merges;  // every merge core knows: (left, right) -> (rank, merged id)
  uint32_t byte_ids[256] = {};      // id of each single byte
  std::vector<uint32_t> prefix_ids, suffix_ids;  // add_special_tokens specials (HF post-processor)
  std::string version_hash;
};
[[nodiscard]] DeviceTables ExportDeviceTables(const Tokenizer& tokenizer);

// A span of the text: an added token (id) or text that is pre-tokenized.
struct DeviceSegment {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool is_added = false;
  uint32_t id = 0;
};
// Splits `text` into added tokens and text segments exactly as the CPU path
// does (raw added tokens leftmost-longest on the source; normalized added
// tokens on each text segment). Returns false when some text segment is not
// left unchanged by the normalizer (the device path then does not apply);
// `out` is complete only when true.
[[nodiscard]] bool SplitDeviceSegments(const Tokenizer& tokenizer, std::string_view text, bool add_special_tokens,
                                       std::vector<DeviceSegment>& out);
// The NFC quick check core uses (Normalizer::LeavesUnchanged for NFC).
[[nodiscard]] bool IsNfcQuick(std::string_view text);
// BPE of one piece on the CPU (the device path's fallback for long pieces):
// appends ids and each token's byte length.
void DeviceEncodePiece(const Tokenizer& tokenizer, std::string_view piece, std::vector<uint32_t>& ids,
                       std::vector<uint32_t>& lens);

}  // namespace toktier::core
// ---- end device export ----
