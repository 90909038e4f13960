#include "proxy/session_index.h"

#include <xxhash.h>

namespace toktier::proxy {

std::vector<uint64_t> SessionIndex::PrefixHashes(std::string_view text, uint64_t tenant) {
  std::vector<uint64_t> out;
  XXH3_state_t* st = XXH3_createState();
  if (!st) return out;
  XXH3_64bits_reset_withSeed(st, tenant);
  size_t done = 0;
  for (size_t level = kBaseBlock; level <= text.size(); level *= 2) {
    XXH3_64bits_update(st, text.data() + done, level - done);
    done = level;
    out.push_back(XXH3_64bits_digest(st));
  }
  XXH3_freeState(st);
  return out;
}

SessionIndex::Match SessionIndex::Lookup(const std::vector<uint64_t>& hashes) const {
  Match m;
  for (size_t i = hashes.size(); i-- > 0;) {
    const Shard& sh = shards_[hashes[i] % kShards];
    std::lock_guard<std::mutex> lock(sh.mu);
    auto it = sh.map.find(hashes[i]);
    if (it != sh.map.end()) {
      m.key = it->second.key;
      m.matched_bytes = kBaseBlock << i;
      m.state_bytes = it->second.text_bytes;
      return m;
    }
  }
  return m;
}

void SessionIndex::Record(const std::vector<uint64_t>& hashes, const std::string& key, size_t text_bytes) {
  for (uint64_t h : hashes) {
    Shard& sh = shards_[h % kShards];
    std::lock_guard<std::mutex> lock(sh.mu);
    // Bounded: a full shard starts over (entries are hints, never needed for
    // correctness).
    if (sh.map.size() >= max_entries_ / kShards) sh.map.clear();
    auto& e = sh.map[h];
    e.key = key;
    e.text_bytes = text_bytes;
  }
}

size_t SessionIndex::size() const {
  size_t n = 0;
  for (const Shard& sh : shards_) {
    std::lock_guard<std::mutex> lock(sh.mu);
    n += sh.map.size();
  }
  return n;
}

}  // namespace toktier::proxy
