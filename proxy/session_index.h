// Content addressing for clients that send no session header: an index from
// hashes of a prompt's leading blocks (prefixes of 512 B, 1 KiB, 2 KiB, ...,
// each hash seeded with the tenant) to the state key that last held that
// prefix. The deepest level that matches names the state sharing the longest
// prefix with the new prompt. A wrong or stale entry only costs speed: the
// repair compares the texts itself, so IDs stay exact.
//
// Bounded by bytes (its share of the memory budget): over it, the oldest
// records go first. Persistence: each implicit state's commit carries its
// entry as a store tag (EncodeTag), so after a restart the index is rebuilt
// from the states on disk (DecodeTag, oldest first, so the newest holder of a
// prefix wins), with their TTL.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace toktier::proxy {

class SessionIndex {
 public:
  static constexpr size_t kBaseBlock = 512;
  // Charged per entry besides its key: hash node, Entry, bucket slot and its
  // share of the eviction order.
  static constexpr size_t kEntryOverhead = 128;

  explicit SessionIndex(size_t max_bytes = size_t{32} << 20) : max_bytes_(max_bytes) {}

  // Hashes of text[0 : kBaseBlock << k] for every level that fits.
  static std::vector<uint64_t> PrefixHashes(std::string_view text, uint64_t tenant);

  struct Match {
    std::string key;        // "" when nothing matched
    size_t matched_bytes = 0;  // the deepest level matched
    size_t state_bytes = 0;    // text length recorded for that key
  };
  // The deepest level present.
  Match Lookup(const std::vector<uint64_t>& hashes) const;
  // Records that `key` now holds a text of `text_bytes` with these hashes.
  void Record(const std::vector<uint64_t>& hashes, const std::string& key, size_t text_bytes);

  size_t size() const;
  // Bytes charged against the budget (keys + kEntryOverhead per entry).
  size_t bytes() const;

  // The store tag that persists a Record (hashes, key, text bytes), and its
  // reading (false on anything malformed).
  static std::string EncodeTag(const std::vector<uint64_t>& hashes, std::string_view key, size_t text_bytes);
  static bool DecodeTag(std::string_view tag, std::vector<uint64_t>* hashes, std::string* key, size_t* text_bytes);

 private:
  struct Entry {
    std::string key;
    size_t text_bytes = 0;
    uint64_t seq = 0;  // the Record that wrote it (eviction order)
  };
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Entry> map;
    std::deque<std::pair<uint64_t, uint64_t>> order;  // (hash, seq), oldest first; may hold stale pairs
    size_t bytes = 0;
    uint64_t next_seq = 0;
  };
  static size_t EntryBytes(const Entry& e) { return kEntryOverhead + e.key.capacity(); }
  void EvictLocked(Shard& sh);

  size_t max_bytes_;
  Shard shards_[kShards];
};

}  // namespace toktier::proxy
