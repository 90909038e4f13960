// The two-tier state store: memory LRU by accounted bytes over RocksDB, with a
// write-behind queue served by one background thread. Layout and rationale:
// docs/store.md and store/record_format.h.
#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/iterator.h>
#include <rocksdb/options.h>
#include <rocksdb/cache.h>
#include <rocksdb/statistics.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <future>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "store/record_format.h"
#include "store/store.h"

namespace toktier::store {

std::string_view LookupResultName(LookupResult r) {
  switch (r) {
    case LookupResult::kMemoryHit: return "memory_hit";
    case LookupResult::kDiskHit: return "disk_hit";
    case LookupResult::kMiss: return "miss";
    case LookupResult::kExpired: return "expired";
    case LookupResult::kCorrupt: return "corrupt";
    case LookupResult::kVersionStale: return "version_stale";
  }
  return "unknown";
}

size_t MemoryTierBytes(std::string_view key, const core::TokenState& s) {
  // Map node + LRU node + Entry fields + shared_ptr control block + the
  // TokenState object, rounded up.
  constexpr size_t kEntryOverhead = 320;
  return s.text().capacity() + (s.ids().capacity() + s.ends().capacity()) * sizeof(uint32_t) +
         s.added_spans().capacity() * sizeof(core::TextSpan) + s.version_hash().capacity() + 2 * key.size() +
         kEntryOverhead;
}

namespace {

using Clock = std::chrono::system_clock;
constexpr size_t kNone = static_cast<size_t>(-1);
// A state whose log grew past this many chunks is rewritten in full.
constexpr uint32_t kMaxChunks = 4096;
// Keys remembered as broken (last write failed) at most.
constexpr size_t kMaxBroken = 65536;

int64_t ToMs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

class StoreImpl final : public StateStore {
 public:
  explicit StoreImpl(const StoreOptions& o) : opt_(o) {
    if (!opt_.clock) opt_.clock = [] { return Clock::now(); };
    ttl_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(opt_.ttl).count();
    if (opt_.chunk_bytes == 0) opt_.chunk_bytes = 64 * 1024;
  }

  ~StoreImpl() override {
    if (writer_.joinable()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        stop_ = true;
      }
      cv_.notify_all();
      writer_.join();  // drains the queue first
    }
    // A clean shutdown flushes the memtables so that the next start does not
    // replay the WAL (a crash still recovers from the WAL).
    if (db_) (void)db_->Flush(rocksdb::FlushOptions());
    db_.reset();
  }

  // Opens RocksDB; false with *error on failure.
  bool OpenDb(std::string* error) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.max_background_jobs = 2;
    o.write_buffer_size = opt_.rocksdb_write_buffer_bytes;
    o.max_write_buffer_number = 2;
    rocksdb::BlockBasedTableOptions table;
    table.block_cache = rocksdb::NewLRUCache(opt_.rocksdb_block_cache_bytes);
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    o.keep_log_file_num = 3;
    o.max_log_file_size = 8 << 20;
    auto supported = rocksdb::GetSupportedCompressions();
    if (std::find(supported.begin(), supported.end(), rocksdb::kLZ4Compression) != supported.end()) {
      o.compression = rocksdb::kLZ4Compression;
    }
    stats_ = rocksdb::CreateDBStatistics();
    stats_->set_stats_level(rocksdb::StatsLevel::kExceptTimers);
    o.statistics = stats_;
    std::error_code ec;  // parents too; RocksDB makes only the last level
    std::filesystem::create_directories(opt_.path, ec);
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(o, opt_.path, &db);
    if (!s.ok()) {
      *error = "store: cannot open the RocksDB database at '" + opt_.path + "': " + s.ToString();
      return false;
    }
    db_.reset(db);
    // Probe that the directory accepts writes now, not at the first request.
    rocksdb::WriteOptions wo;
    s = db_->Put(wo, "Z.probe", "1");
    if (s.ok()) s = db_->Delete(wo, "Z.probe");
    if (!s.ok()) {
      db_.reset();
      *error = "store: the RocksDB database at '" + opt_.path + "' cannot be written: " + s.ToString();
      return false;
    }
    writer_ = std::thread([this] { WriterLoop(); });
    return true;
  }

  void SetMemoryOnly(std::string reason) { memory_only_reason_ = std::move(reason); }
  std::string_view memory_only_reason() const override { return memory_only_reason_; }

  std::shared_ptr<core::TokenState> Acquire(std::string_view key, std::string_view version_hash,
                                            LookupResult* result) override {
    LookupResult dummy;
    if (!result) result = &dummy;
    try {
      return AcquireImpl(key, version_hash, result);
    } catch (...) {
      *result = LookupResult::kMiss;
      misses_++;
      return nullptr;
    }
  }

  void Commit(std::string_view key, const std::shared_ptr<core::TokenState>& state, size_t kept_text_bytes,
              std::string_view tag) override {
    if (!state || state->empty()) return;
    try {
      CommitImpl(key, state, kept_text_bytes, tag);
    } catch (...) {
      write_queue_drops_++;
    }
  }

  void Erase(std::string_view key) override {
    try {
      std::string k = format::StorageKey(key);
      std::lock_guard<std::mutex> l(mu_);
      RemoveEntryLocked(k);
      if (db_) EnqueueDeleteLocked(k);
    } catch (...) {
    }
  }

  void Flush() override {
    if (!db_) return;
    std::unique_lock<std::mutex> l(mu_);
    idle_cv_.wait(l, [&] { return queue_.empty() && !in_flight_; });
  }

  StoreStats Stats() const override {
    StoreStats s;
    s.memory_hits = memory_hits_;
    s.disk_hits = disk_hits_;
    s.misses = misses_;
    s.expired = expired_;
    s.corrupt = corrupt_;
    s.version_stale = version_stale_;
    s.evictions = evictions_;
    s.writes = writes_;
    s.write_failures = write_failures_;
    s.write_queue_drops = write_queue_drops_;
    s.bytes_written = bytes_written_;
    s.swept = swept_;
    {
      std::lock_guard<std::mutex> l(mu_);
      s.live_states = entries_.size();
      s.memory_bytes = memory_bytes_;
      s.write_queue_depth = queue_.size();
      s.write_queue_bytes = queue_bytes_;
    }
    s.memory_only = !db_;
    if (db_) {
      uint64_t live = 0, mem = 0;
      db_->GetIntProperty("rocksdb.estimate-live-data-size", &live);
      db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &mem);
      s.disk_bytes = live + mem;
      uint64_t cache = 0, readers = 0;
      db_->GetIntProperty("rocksdb.block-cache-usage", &cache);
      db_->GetIntProperty("rocksdb.estimate-table-readers-mem", &readers);
      s.rocksdb_memtable_bytes = mem;
      s.rocksdb_block_cache_bytes = cache;
      s.rocksdb_table_reader_bytes = readers;
      s.rocksdb_wal_bytes = stats_->getTickerCount(rocksdb::WAL_FILE_BYTES);
      s.rocksdb_sst_write_bytes =
          stats_->getTickerCount(rocksdb::FLUSH_WRITE_BYTES) + stats_->getTickerCount(rocksdb::COMPACT_WRITE_BYTES);
    }
    return s;
  }

  void ForEachTag(const std::function<void(std::string_view, int64_t)>& fn) override {
    if (!db_) return;
    try {
      ScanTags(fn);
    } catch (...) {
      // A partial scan only loses hints (the caller's index); never throws.
    }
  }

  // An iterator over the meta records (keys "M..."), bypassing the block
  // cache (scans would evict the hot states' blocks).
  std::unique_ptr<rocksdb::Iterator> NewMetaIterator() {
    static const std::string kUpper = "N";
    static const rocksdb::Slice kUpperBound(kUpper);
    rocksdb::ReadOptions ro;
    ro.iterate_upper_bound = &kUpperBound;
    ro.fill_cache = false;
    return std::unique_ptr<rocksdb::Iterator>(db_->NewIterator(ro));
  }

  void ScanTags(const std::function<void(std::string_view, int64_t)>& fn) {
    const int64_t now = NowMs();
    auto it = NewMetaIterator();
    std::string k;
    format::Meta m;
    for (it->Seek("M"); it->Valid(); it->Next()) {
      if (!format::ParseMetaKey(std::string_view(it->key().data(), it->key().size()), &k)) continue;
      if (!format::DecodeMeta(k, std::string_view(it->value().data(), it->value().size()), &m)) continue;
      if (m.tag.empty() || now - m.write_time_ms >= ttl_ms_) continue;
      fn(m.tag, m.write_time_ms);
    }
  }

  void PauseWritesForTesting(bool paused) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      paused_ = paused;
    }
    cv_.notify_all();
  }

  size_t SweepExpired() override {
    if (!db_) return 0;
    auto done = std::make_shared<std::promise<size_t>>();
    auto fut = done->get_future();
    {
      std::lock_guard<std::mutex> l(mu_);
      Task t;
      t.kind = Task::kSweep;
      t.sweep_done = done;
      queue_.push_back(std::move(t));
    }
    cv_.notify_all();
    return fut.get();
  }

  void CompactAll() override {
    if (!db_) return;
    Flush();
    rocksdb::CompactRangeOptions c;
    c.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
    (void)db_->Flush(rocksdb::FlushOptions());
    (void)db_->CompactRange(c, nullptr, nullptr);
  }

 private:
  struct Entry {
    std::shared_ptr<core::TokenState> state;
    size_t bytes = 0;
    std::list<std::string>::iterator lru;
    int64_t last_write_ms = 0;
    // What the disk holds once every queued write has landed.
    bool disk_known = false;
    bool needs_full = true;
    uint32_t n_chunks = 0;
    uint64_t chain = 0;
    uint64_t stored_bytes = 0;
    int64_t disk_time_ms = 0;
    std::string disk_version;
    bool disk_add_special = false;
    // First token not on disk because its write was dropped (kNone: none).
    size_t dirty_from = kNone;
  };
  struct Task {
    enum Kind { kWrite, kDelete, kSweep } kind = kWrite;
    std::string key;
    rocksdb::WriteBatch batch;
    bool full = false;
    size_t bytes = 0;
    std::shared_ptr<std::promise<size_t>> sweep_done;
  };
  struct Pending {
    int writes = 0, deletes = 0;
  };

  int64_t NowMs() const { return ToMs(opt_.clock()); }

  void RemoveEntryLocked(const std::string& k) {
    auto it = entries_.find(k);
    if (it == entries_.end()) return;
    memory_bytes_ -= it->second.bytes;
    lru_.erase(it->second.lru);
    entries_.erase(it);
  }

  void EvictLocked() {
    while (memory_bytes_ > opt_.memory_budget_bytes && !lru_.empty()) {
      RemoveEntryLocked(lru_.back());
      evictions_++;
    }
  }

  void EnqueueDeleteLocked(const std::string& k) {
    // Deletes bypass the capacity bound (they are small and must not be lost).
    Task t;
    t.kind = Task::kDelete;
    t.key = k;
    t.batch.Delete(format::MetaKey(k));
    t.batch.DeleteRange(format::ChunkRangeBegin(k), format::ChunkRangeEnd(k));
    t.bytes = t.batch.GetDataSize();
    pending_[k].deletes++;
    queue_bytes_ += t.bytes;
    queue_.push_back(std::move(t));
    cv_.notify_all();
  }

  enum class LoadResult { kOk, kMiss, kExpired, kCorrupt, kStale };

  LoadResult Load(const std::string& k, std::string_view version_hash, int64_t now_ms, format::Meta* meta,
                  std::shared_ptr<core::TokenState>* out) {
    const rocksdb::Snapshot* snap = db_->GetSnapshot();
    struct Release {
      rocksdb::DB* db;
      const rocksdb::Snapshot* s;
      ~Release() { db->ReleaseSnapshot(s); }
    } release{db_.get(), snap};
    rocksdb::ReadOptions ro;
    ro.snapshot = snap;
    std::string value;
    rocksdb::Status s = db_->Get(ro, format::MetaKey(k), &value);
    if (s.IsNotFound()) return LoadResult::kMiss;
    if (!s.ok()) return s.IsCorruption() ? LoadResult::kCorrupt : LoadResult::kMiss;
    if (!format::DecodeMeta(k, value, meta)) return LoadResult::kCorrupt;
    if (now_ms - meta->write_time_ms >= ttl_ms_) return LoadResult::kExpired;
    if (meta->version_hash != version_hash) return LoadResult::kStale;
    std::string end_key = format::ChunkRangeEnd(k);
    rocksdb::Slice upper(end_key);
    ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
    format::Accumulator acc;
    acc.chain = format::ChainSeed(k);
    acc.text.reserve(meta->n_text);
    acc.ids.reserve(meta->n_tokens);
    acc.ends.reserve(meta->n_tokens);
    it->Seek(format::ChunkRangeBegin(k));
    for (uint32_t i = 0; i < meta->n_chunks; ++i, it->Next()) {
      if (!it->Valid() || it->key() != rocksdb::Slice(format::ChunkKey(k, i))) return LoadResult::kCorrupt;
      if (!format::ApplyChunk(k, i, std::string_view(it->value().data(), it->value().size()), &acc)) {
        return LoadResult::kCorrupt;
      }
    }
    if (!it->status().ok()) return LoadResult::kCorrupt;
    if (acc.chain != meta->last_chain || acc.ids.size() != meta->n_tokens || acc.text.size() != meta->n_text ||
        acc.spans.size() != meta->n_spans) {
      return LoadResult::kCorrupt;
    }
    auto state = std::make_shared<core::TokenState>();
    if (!state->Assign(std::move(acc.text), std::move(acc.ids), std::move(acc.ends), std::move(acc.spans),
                       meta->version_hash, meta->add_special)) {
      return LoadResult::kCorrupt;
    }
    meta->stored_bytes = acc.stored_bytes;
    *out = std::move(state);
    return LoadResult::kOk;
  }

  std::shared_ptr<core::TokenState> AcquireImpl(std::string_view key, std::string_view version_hash,
                                                LookupResult* result) {
    std::string k = format::StorageKey(key);
    const int64_t now = NowMs();
    bool must_full = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto it = entries_.find(k);
      if (it != entries_.end()) {
        Entry& e = it->second;
        if (now - e.last_write_ms >= ttl_ms_) {
          RemoveEntryLocked(k);
          if (db_) EnqueueDeleteLocked(k);
          expired_++;
          *result = LookupResult::kExpired;
          return nullptr;
        }
        if (e.state->version_hash() != version_hash) {
          RemoveEntryLocked(k);  // the caller re-tokenizes and commits in full
          version_stale_++;
          *result = LookupResult::kVersionStale;
          return nullptr;
        }
        lru_.splice(lru_.begin(), lru_, e.lru);
        memory_hits_++;
        *result = LookupResult::kMemoryHit;
        return e.state;
      }
      if (!db_) {
        misses_++;
        *result = LookupResult::kMiss;
        return nullptr;
      }
      auto p = pending_.find(k);
      if (p != pending_.end() && p->second.deletes > 0) {
        // An erase or expiry is queued: what the disk holds is on its way out.
        misses_++;
        *result = LookupResult::kMiss;
        return nullptr;
      }
      must_full = p != pending_.end() || broken_.count(k);
    }
    format::Meta meta;
    std::shared_ptr<core::TokenState> state;
    LoadResult r = Load(k, version_hash, now, &meta, &state);
    std::lock_guard<std::mutex> l(mu_);
    switch (r) {
      case LoadResult::kMiss:
        misses_++;
        *result = LookupResult::kMiss;
        return nullptr;
      case LoadResult::kExpired:
        expired_++;
        EnqueueDeleteLocked(k);
        *result = LookupResult::kExpired;
        return nullptr;
      case LoadResult::kCorrupt:
        corrupt_++;
        EnqueueDeleteLocked(k);
        *result = LookupResult::kCorrupt;
        return nullptr;
      case LoadResult::kStale:
        version_stale_++;
        *result = LookupResult::kVersionStale;
        return nullptr;
      case LoadResult::kOk:
        break;
    }
    RemoveEntryLocked(k);
    lru_.push_front(k);
    Entry& e = entries_[k];
    e.lru = lru_.begin();
    e.state = state;
    e.bytes = MemoryTierBytes(k, *state);
    memory_bytes_ += e.bytes;
    e.last_write_ms = meta.write_time_ms;
    e.disk_known = true;
    // A write queued for this key (made before an eviction) may change the
    // disk under the loaded state: the next commit then rewrites it in full.
    e.needs_full = must_full || pending_.count(k) || broken_.count(k);
    e.n_chunks = meta.n_chunks;
    e.chain = meta.last_chain;
    e.stored_bytes = meta.stored_bytes;
    e.disk_time_ms = meta.write_time_ms;
    e.disk_version = meta.version_hash;
    e.disk_add_special = meta.add_special;
    disk_hits_++;
    *result = LookupResult::kDiskHit;
    EvictLocked();
    return state;
  }

  bool QueueFullLocked() const {
    return queue_.size() >= opt_.write_queue_capacity || queue_bytes_ >= opt_.write_queue_max_bytes;
  }

  void CommitImpl(std::string_view key, const std::shared_ptr<core::TokenState>& state, size_t kept,
                  std::string_view tag) {
    std::string k = format::StorageKey(key);
    const int64_t now = NowMs();
    const core::TokenState& st = *state;
    bool full;
    size_t first_token;
    uint32_t next_index;
    uint64_t chain, stored;
    {
      std::lock_guard<std::mutex> l(mu_);
      auto [it, inserted] = entries_.try_emplace(k);
      Entry& e = it->second;
      if (inserted) {
        lru_.push_front(k);
        e.lru = lru_.begin();
      } else {
        lru_.splice(lru_.begin(), lru_, e.lru);
        memory_bytes_ -= e.bytes;
      }
      e.state = state;
      e.bytes = MemoryTierBytes(k, st);
      memory_bytes_ += e.bytes;
      e.last_write_ms = now;
      if (!db_) {
        EvictLocked();
        return;
      }
      full = !e.disk_known || e.needs_full || broken_.count(k) || kept == 0 ||
             e.disk_version != st.version_hash() || e.disk_add_special != st.add_special_tokens() ||
             now - e.disk_time_ms >= ttl_ms_ || e.n_chunks >= kMaxChunks ||
             e.stored_bytes > 2 * static_cast<uint64_t>(st.text().size()) + opt_.chunk_bytes;
      // The first token that may differ from what the disk holds: tokens
      // ending before `kept` are unchanged by this update.
      const auto& ends = st.ends();
      size_t changed = static_cast<size_t>(
          std::lower_bound(ends.begin(), ends.end(), static_cast<uint32_t>(std::min<size_t>(kept, UINT32_MAX))) -
          ends.begin());
      first_token = full ? 0 : std::min(changed, e.dirty_from);
      if (QueueFullLocked()) {
        DropLocked(e, full, first_token);
        return;
      }
      next_index = full ? 0 : e.n_chunks;
      chain = full ? format::ChainSeed(k) : e.chain;
      stored = full ? 0 : e.stored_bytes;
    }
    // Encode outside the lock: O(delta). The worker owns `state` until it
    // returns from Commit, so reading it here is safe.
    std::vector<format::EncodedChunk> chunks;
    stored += format::EncodeDelta(k, st, first_token, opt_.chunk_bytes, &next_index, &chain, &chunks);
    format::Meta meta;
    meta.add_special = st.add_special_tokens();
    meta.n_chunks = next_index;
    meta.n_tokens = static_cast<uint32_t>(st.ids().size());
    meta.n_text = static_cast<uint32_t>(st.text().size());
    meta.n_spans = static_cast<uint32_t>(st.added_spans().size());
    meta.stored_bytes = stored;
    meta.write_time_ms = now;
    meta.last_chain = chain;
    meta.version_hash = st.version_hash();
    meta.tag.assign(tag.substr(0, format::kMaxTag));
    Task t;
    t.kind = Task::kWrite;
    t.key = k;
    t.full = full;
    if (full) t.batch.DeleteRange(format::ChunkRangeBegin(k), format::ChunkRangeEnd(k));
    for (auto& c : chunks) t.batch.Put(format::ChunkKey(k, c.index), c.value);
    t.batch.Put(format::MetaKey(k), format::EncodeMeta(k, meta));
    t.bytes = t.batch.GetDataSize();

    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(k);
    Entry* e = (it != entries_.end() && it->second.state == state) ? &it->second : nullptr;
    if (QueueFullLocked()) {
      if (e) {
        DropLocked(*e, full, first_token);
      } else {
        write_queue_drops_++;
      }
      return;
    }
    pending_[k].writes++;
    queue_bytes_ += t.bytes;
    queue_.push_back(std::move(t));
    if (e) {
      e->disk_known = true;
      e->needs_full = false;
      e->n_chunks = meta.n_chunks;
      e->chain = chain;
      e->stored_bytes = stored;
      e->disk_time_ms = now;
      e->disk_version = meta.version_hash;
      e->disk_add_special = meta.add_special;
      e->dirty_from = kNone;
    }
    // An evicted entry needs no bookkeeping: a later Acquire reloads it from
    // disk (waiting writes then force a full rewrite).
    EvictLocked();
    cv_.notify_all();
  }

  // The write is skipped; remember what the disk lacks so that the next
  // commit of this key writes it (never silently lost).
  void DropLocked(Entry& e, bool full, size_t first_token) {
    write_queue_drops_++;
    if (full) e.needs_full = true;
    e.dirty_from = std::min(e.dirty_from, first_token);
    EvictLocked();
  }

  void WriterLoop() {
    auto next_sweep = std::chrono::steady_clock::now() + opt_.sweep_interval;
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      if (paused_ && !stop_) {
        cv_.wait(l, [&] { return stop_ || !paused_; });
        continue;
      }
      if (queue_.empty()) {
        if (stop_) break;
        if (opt_.sweep_interval.count() > 0) {
          cv_.wait_until(l, next_sweep, [&] { return stop_ || paused_ || !queue_.empty(); });
          if (queue_.empty() && !stop_ && std::chrono::steady_clock::now() >= next_sweep) {
            in_flight_ = true;
            l.unlock();
            DoSweep();
            l.lock();
            in_flight_ = false;
            next_sweep = std::chrono::steady_clock::now() + opt_.sweep_interval;
            idle_cv_.notify_all();
          }
        } else {
          cv_.wait(l, [&] { return stop_ || paused_ || !queue_.empty(); });
        }
        continue;
      }
      Task t = std::move(queue_.front());
      queue_.pop_front();
      queue_bytes_ -= t.bytes;
      in_flight_ = true;
      bool skip = t.kind == Task::kWrite && !t.full && broken_.count(t.key);
      l.unlock();
      if (t.kind == Task::kSweep) {
        size_t n = DoSweep();
        t.sweep_done->set_value(n);
      } else if (skip) {
        // An earlier write of this key failed: this delta would not apply.
        write_queue_drops_++;
      } else {
        rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &t.batch);
        if (s.ok()) {
          writes_++;
          bytes_written_ += t.bytes;
        } else {
          write_failures_++;
          MaybeResume();
        }
        l.lock();
        if (s.ok()) {
          broken_.erase(t.key);
        } else {
          // Bounded: a failing disk must not grow a set of client-chosen
          // keys without limit. Forgetting costs no exactness: a delta
          // written on top of a failed one breaks the checksum chain, and
          // the state then loads as corrupt (a counted miss).
          if (broken_.size() >= kMaxBroken) broken_.clear();
          broken_.insert(t.key);
        }
        l.unlock();
      }
      l.lock();
      if (t.kind != Task::kSweep) {
        auto p = pending_.find(t.key);
        if (p != pending_.end()) {
          (t.kind == Task::kDelete ? p->second.deletes : p->second.writes)--;
          if (p->second.deletes <= 0 && p->second.writes <= 0) pending_.erase(p);
        }
      }
      in_flight_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
    }
    in_flight_ = false;
    idle_cv_.notify_all();
  }

  // After a write error (e.g. disk full) RocksDB stops accepting writes until
  // resumed; try at most every 5 s.
  void MaybeResume() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_resume_ < std::chrono::seconds(5)) return;
    last_resume_ = now;
    (void)db_->Resume();
  }

  // Runs on the writer thread: deletes expired (or unreadable) states that no
  // worker is using; compaction then reclaims their space.
  size_t DoSweep() {
    const int64_t now = NowMs();
    std::vector<std::string> victims;
    {
      auto it = NewMetaIterator();
      for (it->Seek("M"); it->Valid(); it->Next()) {
        std::string k;
        if (!format::ParseMetaKey(std::string_view(it->key().data(), it->key().size()), &k)) continue;
        format::Meta m;
        bool ok = format::DecodeMeta(k, std::string_view(it->value().data(), it->value().size()), &m);
        if (!ok || now - m.write_time_ms >= ttl_ms_) victims.push_back(std::move(k));
      }
    }
    size_t n = 0;
    for (const std::string& k : victims) {
      {
        std::lock_guard<std::mutex> l(mu_);
        if (pending_.count(k)) continue;  // a newer write is queued
        auto e = entries_.find(k);
        if (e != entries_.end()) {
          if (now - e->second.last_write_ms < ttl_ms_) continue;  // live in memory
          RemoveEntryLocked(k);
        }
      }
      rocksdb::WriteBatch b;
      b.Delete(format::MetaKey(k));
      b.DeleteRange(format::ChunkRangeBegin(k), format::ChunkRangeEnd(k));
      if (db_->Write(rocksdb::WriteOptions(), &b).ok()) {
        ++n;
        bytes_written_ += b.GetDataSize();
      } else {
        write_failures_++;
      }
    }
    swept_ += n;
    return n;
  }

  StoreOptions opt_;
  int64_t ttl_ms_ = 0;
  std::unique_ptr<rocksdb::DB> db_;
  std::shared_ptr<rocksdb::Statistics> stats_;
  std::string memory_only_reason_;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> lru_;  // front: most recently used
  size_t memory_bytes_ = 0;
  std::deque<Task> queue_;
  size_t queue_bytes_ = 0;
  bool in_flight_ = false;
  bool stop_ = false;
  bool paused_ = false;
  std::unordered_map<std::string, Pending> pending_;
  std::unordered_set<std::string> broken_;  // last write failed: next must be full
  std::condition_variable cv_, idle_cv_;
  std::thread writer_;
  std::chrono::steady_clock::time_point last_resume_{};

  std::atomic<uint64_t> memory_hits_{0}, disk_hits_{0}, misses_{0}, expired_{0}, corrupt_{0}, version_stale_{0};
  std::atomic<uint64_t> evictions_{0}, writes_{0}, write_failures_{0}, write_queue_drops_{0}, bytes_written_{0};
  std::atomic<uint64_t> swept_{0};
};

}  // namespace

std::unique_ptr<StateStore> StateStore::Open(const StoreOptions& options, core::Status* status) {
  core::Status dummy;
  if (!status) status = &dummy;
  try {
    auto store = std::make_unique<StoreImpl>(options);
    if (options.path.empty()) {
      store->SetMemoryOnly("no data directory configured");
      *status = core::Status::Ok();
      return store;
    }
    std::string error;
    if (store->OpenDb(&error)) {
      *status = core::Status::Ok();
      return store;
    }
    if (options.allow_memory_only_fallback) {
      store->SetMemoryOnly(error);
      *status = core::Status::Ok();
      return store;
    }
    *status = core::Status::Error(core::StatusCode::kIoError, error);
    return nullptr;
  } catch (const std::exception& e) {
    *status = core::Status::Error(core::StatusCode::kIoError, std::string("store: cannot open: ") + e.what());
    return nullptr;
  }
}

}  // namespace toktier::store
