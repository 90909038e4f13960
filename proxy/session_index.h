// Content addressing for clients that send no session header: an index from
// hashes of a prompt's leading blocks (prefixes of 512 B, 1 KiB, 2 KiB, ...,
// each hash seeded with the tenant) to the state key that last held that
// prefix. The deepest level that matches names the state sharing the longest
// prefix with the new prompt. A wrong or stale entry only costs speed: the
// repair compares the texts itself, so IDs stay exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace toktier::proxy {

class SessionIndex {
 public:
  static constexpr size_t kBaseBlock = 512;

  explicit SessionIndex(size_t max_entries = size_t{1} << 20) : max_entries_(max_entries) {}

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

 private:
  struct Entry {
    std::string key;
    size_t text_bytes;
  };
  static constexpr size_t kShards = 16;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, Entry> map;
  };
  size_t max_entries_;
  Shard shards_[kShards];
};

}  // namespace toktier::proxy
