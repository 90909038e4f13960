// store/ private: the on-disk record layout (see docs/store.md).
//
// Keys (one RocksDB column family):
//   meta   'M' + K                      (K = the session key, or 0x01 + xxh128
//                                         of it when longer than kMaxRawKey)
//   chunk  'C' + be16(|K|) + K + be32(i) i = 0 .. n_chunks-1
//
// A state is a log of chunks. Chunk i says "truncate the state rebuilt from
// chunks 0..i-1 to (base_tokens, base_text, base_spans), then append these
// tokens, text bytes and added-token spans". A commit appends one new chunk
// (more when its delta exceeds chunk_bytes) plus a new meta, in one
// WriteBatch, so an append writes O(appended bytes) and a truncation writes
// nothing for the truncated part. Every record ends with an xxh3-64 checksum;
// chunk checksums are chained (chunk i is seeded with chunk i-1's checksum,
// chunk 0 with a hash of the key) and the meta holds the last link, so a
// missing, stale, reordered or foreign chunk is detected, never served.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

namespace toktier::store::format {

inline constexpr size_t kMaxRawKey = 1024;

std::string StorageKey(std::string_view session_key);  // K
std::string MetaKey(std::string_view k);
std::string ChunkKey(std::string_view k, uint32_t index);
std::string ChunkRangeBegin(std::string_view k);  // == ChunkKey(k, 0)
std::string ChunkRangeEnd(std::string_view k);    // exclusive, after every index
uint64_t ChainSeed(std::string_view k);
// True (and *k set) when `meta_key` is a meta key.
bool ParseMetaKey(std::string_view meta_key, std::string* k);

struct Meta {
  bool add_special = false;
  uint32_t n_chunks = 0, n_tokens = 0, n_text = 0, n_spans = 0;
  uint64_t stored_bytes = 0;  // sum of chunk text bytes (live + truncated)
  int64_t write_time_ms = 0;  // since the Unix epoch, of the last commit
  uint64_t last_chain = 0;    // checksum of chunk n_chunks-1
  std::string version_hash;
  // Format 2: the caller's tag (StateStore::Commit), at most kMaxTag bytes;
  // format 1 metas (written before tags existed) decode with an empty tag.
  std::string tag;
};
inline constexpr size_t kMaxTag = 4096;
std::string EncodeMeta(std::string_view k, const Meta& m);
// False on a bad size, magic or checksum.
bool DecodeMeta(std::string_view k, std::string_view value, Meta* m);

// Appends the encoded chunks for tokens [first_token, ids.size()) of `state`
// (text from ends[first_token-1], spans whose end is at or after that) to
// *out, split so each chunk holds about chunk_bytes of text. Chunk indexes
// start at *next_index; *chain is the previous link and is advanced. Returns
// the text bytes stored.
struct EncodedChunk {
  uint32_t index;
  std::string value;
};
size_t EncodeDelta(std::string_view k, const core::TokenState& state, size_t first_token, size_t chunk_bytes,
                   uint32_t* next_index, uint64_t* chain, std::vector<EncodedChunk>* out);

// The state being rebuilt from chunks.
struct Accumulator {
  std::string text;
  std::vector<uint32_t> ids, ends;
  std::vector<core::TextSpan> spans;
  uint64_t chain = 0;
  uint64_t stored_bytes = 0;
};
// Applies chunk `index` (value) to *acc; false if corrupt or out of place.
bool ApplyChunk(std::string_view k, uint32_t index, std::string_view value, Accumulator* acc);

}  // namespace toktier::store::format
