// store/: token state persistence. A two-tier store behind one interface: a
// memory tier with a byte budget (LRU) holding live TokenStates, and RocksDB
// beneath it (embedded, a local directory). Writes happen off the request
// path through a bounded write-behind queue; an append writes only its delta
// (states are stored in chunks). Every value carries a checksum and the
// tokenizer version hash: corrupt or stale values are counted misses, never
// wrong IDs.
//
// Threading: the store is shared by all proxy workers. A state returned by
// Acquire is owned by the calling worker until it calls Commit (sessions are
// pinned to one worker, so no two workers hold the same key).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

namespace toktier::store {

// Options; every field documents its default (mirrored in deploy/helm values).
struct StoreOptions {
  // Directory of the RocksDB database. Empty: memory-only mode.
  // Default: "" here; the proxy's config defaults to "./toktier-data".
  std::string path;
  // Memory tier budget in bytes of MemoryTierBytes() (buffer capacities,
  // keys, entry overhead). Default 1 GiB.
  size_t memory_budget_bytes = size_t{1} << 30;
  // Time to live of a state since its last write. Default 1 hour.
  std::chrono::seconds ttl{3600};
  // Write-behind queue capacity (entries). When full, writes are skipped and
  // counted, never blocking a request. Default 4096.
  size_t write_queue_capacity = 4096;
  // When the database cannot be opened: true = continue memory-only (and
  // report it in Stats::memory_only), false = Open fails. Default false.
  bool allow_memory_only_fallback = false;
  // Bytes of text per stored chunk. Default 64 KiB.
  size_t chunk_bytes = 64 * 1024;
  // Clock, injectable for TTL tests. Default: the system clock.
  std::function<std::chrono::system_clock::time_point()> clock;
  // (added) Bound of the write-behind queue in bytes of encoded deltas, beside
  // the entry bound above (a full write of a large state is megabytes).
  // Default 256 MiB.
  size_t write_queue_max_bytes = size_t{256} << 20;
  // (added) Period of the background TTL sweep, which deletes expired states
  // (meta + chunk range) so that compaction reclaims their space; measured on
  // the steady clock. 0 disables the periodic sweep (SweepExpired() still
  // works). Default 5 minutes.
  std::chrono::seconds sweep_interval{300};
  // (added) RocksDB's write buffer (one memtable) in bytes; at most two are
  // held (one filling, one flushing). Default 64 MiB.
  size_t rocksdb_write_buffer_bytes = size_t{64} << 20;
  // (added) RocksDB's block cache (LRU) in bytes. Default 32 MiB.
  size_t rocksdb_block_cache_bytes = size_t{32} << 20;
};

// Where a lookup was answered.
enum class LookupResult : uint8_t {
  kMemoryHit,
  kDiskHit,
  kMiss,
  kExpired,        // found but past its TTL (counted, then a miss)
  kCorrupt,        // checksum or structure failed (counted, then a miss)
  kVersionStale,   // made by another tokenizer version (a miss)
};
std::string_view LookupResultName(LookupResult r);

// Counters and gauges, read by the proxy's metrics exporter.
struct StoreStats {
  uint64_t memory_hits = 0, disk_hits = 0, misses = 0, expired = 0, corrupt = 0, version_stale = 0;
  uint64_t evictions = 0;               // memory tier evictions (state stays on disk)
  uint64_t writes = 0, write_failures = 0, write_queue_drops = 0;
  uint64_t bytes_written = 0;           // bytes handed to RocksDB (keys + values)
  uint64_t live_states = 0;             // states in the memory tier
  uint64_t memory_bytes = 0;            // accounted bytes in the memory tier
  uint64_t write_queue_depth = 0;
  uint64_t disk_bytes = 0;              // RocksDB's estimate of live data size
  bool memory_only = false;
  // (added) States deleted by the TTL sweep (not counted in `expired`, which
  // counts lookups that found an expired state).
  uint64_t swept = 0;
  // (added) RocksDB's own write volume (its statistics tickers): WAL bytes,
  // and SST bytes written by flushes and compactions. bytes_written above is
  // what the store hands to RocksDB; these show RocksDB's amplification.
  uint64_t rocksdb_wal_bytes = 0, rocksdb_sst_write_bytes = 0;
  // (added) Memory the store holds outside memory_budget_bytes: RocksDB's
  // memtables (up to two write buffers), its block cache and table readers
  // (index and filter blocks), and the encoded deltas in the write-behind
  // queue. They are bounded by StoreOptions, not by the budget; the soak
  // attributes the proxy's RSS with them (docs/security.md).
  uint64_t rocksdb_memtable_bytes = 0, rocksdb_block_cache_bytes = 0, rocksdb_table_reader_bytes = 0;
  uint64_t write_queue_bytes = 0;
  // Note: `misses` counts lookups that found no state at all; a lookup is
  // counted exactly once, so lookups = memory_hits + disk_hits + misses +
  // expired + corrupt + version_stale.
};

// (added) Bytes the memory tier charges for holding `state` under `key`
// (what memory_budget_bytes bounds): the allocated capacity of the state's
// buffers (a vector grown by appends holds up to twice its size, so sizes
// alone undercount), the key (kept twice: map and LRU list) and a fixed
// overhead for the entry's nodes and control block.
size_t MemoryTierBytes(std::string_view key, const core::TokenState& state);

class StateStore {
 public:
  virtual ~StateStore() = default;

  // Opens (or creates) the store. On failure returns nullptr with *status set
  // (or a memory-only store when options.allow_memory_only_fallback).
  static std::unique_ptr<StateStore> Open(const StoreOptions& options, core::Status* status);

  // The live state for `key` (memory tier, else loaded from disk). The state
  // must have been made by `version_hash`; otherwise it is a miss. Returns
  // nullptr on a miss (result says why).
  virtual std::shared_ptr<core::TokenState> Acquire(std::string_view key, std::string_view version_hash,
                                                    LookupResult* result) = 0;

  // Records that the state for `key` now holds `state` after an update whose
  // unchanged prefix ended at byte `kept_text_bytes` of the text (the repair's
  // sync point; 0 after a full tokenization). Copies only the delta (O(new
  // bytes)) into the write-behind queue. A new key is inserted.
  // (added) `tag`: a small opaque value (at most 4 KiB) stored with the
  // state's meta record in the same write, so it lives and expires with the
  // state; each commit replaces it (empty: none). ForEachTag reads them back.
  virtual void Commit(std::string_view key, const std::shared_ptr<core::TokenState>& state,
                      size_t kept_text_bytes, std::string_view tag = {}) = 0;

  virtual void Erase(std::string_view key) = 0;

  // Blocks until the write-behind queue is empty (tests, shutdown).
  virtual void Flush() = 0;

  virtual StoreStats Stats() const = 0;

  // (added) Runs the TTL sweep now on the write thread and waits for it:
  // deletes every expired state that no worker is using. Returns the number
  // deleted. No-op (0) in memory-only mode.
  virtual size_t SweepExpired() { return 0; }

  // (added) Flushes the queue, then compacts the whole database, so that
  // deleted and expired records are reclaimed now (tests, benchmarks).
  virtual void CompactAll() {}

  // (added) Why the store runs memory-only (the open error when
  // allow_memory_only_fallback applied, or "no data directory configured");
  // empty when backed by RocksDB. Log it at startup.
  virtual std::string_view memory_only_reason() const { return {}; }

  // (added) Calls fn(tag, write_time_ms) for every state on disk that has a
  // tag and is within its TTL (a scan of the small meta records; call it
  // at startup, e.g. to rebuild an index of the states). No-op memory-only.
  virtual void ForEachTag(const std::function<void(std::string_view tag, int64_t write_time_ms)>& fn) {}

  // (added) Tests only: while paused the write thread takes nothing from the
  // queue, so queue-full behaviour can be tested deterministically.
  virtual void PauseWritesForTesting(bool paused) {}
};

}  // namespace toktier::store
