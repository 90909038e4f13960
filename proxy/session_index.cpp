#include "proxy/session_index.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

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
    auto [it, inserted] = sh.map.try_emplace(h);
    Entry& e = it->second;
    if (!inserted) sh.bytes -= EntryBytes(e);
    e.key = key;
    e.text_bytes = text_bytes;
    e.seq = sh.next_seq++;
    sh.bytes += EntryBytes(e);
    sh.order.emplace_back(h, e.seq);
    EvictLocked(sh);
  }
}

void SessionIndex::EvictLocked(Shard& sh) {
  // Oldest records first; a pair whose entry was rewritten since is stale.
  const size_t cap = max_bytes_ / kShards;
  while (sh.bytes > cap && !sh.order.empty()) {
    auto [h, seq] = sh.order.front();
    sh.order.pop_front();
    auto it = sh.map.find(h);
    if (it != sh.map.end() && it->second.seq == seq) {
      sh.bytes -= EntryBytes(it->second);
      sh.map.erase(it);
    }
  }
  // Rewrites leave stale pairs behind: keep the order at most twice the map.
  if (sh.order.size() > 2 * sh.map.size() + 64) {
    std::vector<std::pair<uint64_t, uint64_t>> live;  // (seq, hash)
    live.reserve(sh.map.size());
    for (const auto& [h, e] : sh.map) live.emplace_back(e.seq, h);
    std::sort(live.begin(), live.end());
    sh.order.clear();
    for (const auto& [seq, h] : live) sh.order.emplace_back(h, seq);
    sh.order.shrink_to_fit();
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

size_t SessionIndex::bytes() const {
  size_t n = 0;
  for (const Shard& sh : shards_) {
    std::lock_guard<std::mutex> lock(sh.mu);
    n += sh.bytes;
  }
  return n;
}

namespace {
constexpr char kTagMagic[2] = {'I', '1'};
constexpr size_t kMaxLevels = 48;  // 512 << 47 is far beyond any prompt
}  // namespace

std::string SessionIndex::EncodeTag(const std::vector<uint64_t>& hashes, std::string_view key, size_t text_bytes) {
  std::string s;
  const size_t n = std::min(hashes.size(), kMaxLevels);
  s.reserve(2 + 8 + 1 + n * 8 + key.size());
  s.append(kTagMagic, 2);
  uint64_t tb = text_bytes;
  s.append(reinterpret_cast<const char*>(&tb), 8);
  s.push_back(static_cast<char>(n));
  s.append(reinterpret_cast<const char*>(hashes.data()), n * 8);
  s.append(key);
  return s;
}

bool SessionIndex::DecodeTag(std::string_view tag, std::vector<uint64_t>* hashes, std::string* key,
                             size_t* text_bytes) {
  if (tag.size() < 11 || tag[0] != kTagMagic[0] || tag[1] != kTagMagic[1]) return false;
  uint64_t tb;
  std::memcpy(&tb, tag.data() + 2, 8);
  const size_t n = static_cast<unsigned char>(tag[10]);
  if (n == 0 || n > kMaxLevels || tag.size() <= 11 + n * 8) return false;  // a key must follow
  hashes->resize(n);
  std::memcpy(hashes->data(), tag.data() + 11, n * 8);
  key->assign(tag.substr(11 + n * 8));
  *text_bytes = static_cast<size_t>(tb);
  return true;
}

}  // namespace toktier::proxy
