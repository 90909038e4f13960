// store/: memory tier, RocksDB tier, restart, corruption, TTL, eviction,
// version change, write-queue drops, fallback. Real RocksDB directories.
// Also (issue 9, resources and sessions) what the memory tier charges for a
// state (buffer capacities, key, entry overhead), and commit tags: stored
// with the state's meta record, so a tag survives a restart (and a kill -9:
// same WriteBatch as the state), expires with the state, and metas written
// before tags existed still load.
#include <doctest/doctest.h>
#include <rocksdb/db.h>
#include <xxhash.h>

#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "store/record_format.h"
#include "store_test_util.h"

using namespace toktier;
using namespace toktier::store;
using namespace toktier::store::testing;

namespace {

struct Fixture {
  std::shared_ptr<const core::Tokenizer> tok = toktier::test::LoadTokenizer("llama3");
  std::vector<std::string> prompts;
  Fixture() {
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    auto files = SessionFiles("swe-agent", "llama3");
    if (!files.empty()) prompts = SessionPrompts(files[0], 12);
  }
  // The shared workloads (../shared/workloads) are optional; the tokenizer
  // files are not (the constructor fails the case without them).
  bool ok() const { return prompts.size() >= 4; }
};

std::unique_ptr<StateStore> OpenOrFail(const StoreOptions& o) {
  core::Status s;
  auto st = StateStore::Open(o, &s);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(st);
  return st;
}

// The live tags of a store, with their write times.
std::map<std::string, int64_t> Tags(StateStore& store) {
  std::map<std::string, int64_t> out;
  store.ForEachTag([&](std::string_view tag, int64_t t) { out[std::string(tag)] = t; });
  return out;
}

}  // namespace

TEST_CASE("memory-only store: hits, misses, LRU budget") {
  Fixture f;
  if (!f.ok()) return;
  StoreOptions o;
  auto store = OpenOrFail(o);
  CHECK(store->Stats().memory_only);
  CHECK(!store->memory_only_reason().empty());
  LookupResult r;
  CHECK(store->Acquire("a", f.tok->version_hash(), &r) == nullptr);
  CHECK(r == LookupResult::kMiss);
  auto st = Step(*store, *f.tok, "a", f.prompts[0]);
  auto got = store->Acquire("a", f.tok->version_hash(), &r);
  CHECK(r == LookupResult::kMemoryHit);
  CHECK(got == st);
  store->Commit("a", got, got->text().size());
  CHECK(store->Stats().memory_bytes == MemoryTierBytes("a", *st));
  CHECK(store->Stats().live_states == 1);
  store->Erase("a");
  CHECK(store->Acquire("a", f.tok->version_hash(), &r) == nullptr);

  StoreOptions small;
  small.memory_budget_bytes = MemoryTierBytes("k1", *st) * 2 + 10;
  auto s2 = OpenOrFail(small);
  Step(*s2, *f.tok, "k1", f.prompts[0]);
  Step(*s2, *f.tok, "k2", f.prompts[0]);
  CHECK(s2->Stats().evictions == 0);
  s2->Acquire("k1", f.tok->version_hash(), &r);  // k1 most recent
  Step(*s2, *f.tok, "k3", f.prompts[0]);
  CHECK(s2->Stats().evictions == 1);
  CHECK(s2->Acquire("k1", f.tok->version_hash(), &r) != nullptr);
  CHECK(s2->Acquire("k2", f.tok->version_hash(), &r) == nullptr);  // evicted, no disk
  CHECK(s2->Stats().memory_bytes <= small.memory_budget_bytes);
}

TEST_CASE("unusable directory: clear error, or memory-only fallback") {
  TempDir d;
  std::string file = (d.path / "regular").string();
  std::ofstream(file) << "x";
  StoreOptions o;
  o.path = file + "/db";
  core::Status s;
  auto st = StateStore::Open(o, &s);
  CHECK(st == nullptr);
  CHECK(!s.ok());
  CHECK(s.message().find(o.path) != std::string::npos);
  MESSAGE("open error: " << s.message());
  o.allow_memory_only_fallback = true;
  st = StateStore::Open(o, &s);
  REQUIRE(st);
  CHECK(s.ok());
  CHECK(st->Stats().memory_only);
  CHECK(st->memory_only_reason().find(o.path) != std::string::npos);

  // A second store on a directory that is in use is refused the same way.
  StoreOptions a;
  a.path = d.db();
  auto first = OpenOrFail(a);
  auto second = StateStore::Open(a, &s);
  CHECK(second == nullptr);
  CHECK(!s.ok());
}

TEST_CASE("state survives a clean restart; appends write only their delta") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.chunk_bytes = 4096;  // several chunks per state
  std::shared_ptr<core::TokenState> last;
  {
    auto store = OpenOrFail(o);
    CHECK(!store->Stats().memory_only);
    for (size_t i = 0; i < f.prompts.size(); ++i) {
      LookupResult r;
      last = Step(*store, *f.tok, "s", f.prompts[i], &r);
      if (i > 0) CHECK(r == LookupResult::kMemoryHit);
    }
    store->Flush();
    auto st = store->Stats();
    CHECK(st.writes == f.prompts.size());
    CHECK(st.write_failures == 0);
    // Bytes handed to RocksDB follow the text that changed (the first
    // prompt, then each call's new tail), not the whole state per call.
    uint64_t changed = f.prompts[0].size(), whole = 0;
    for (size_t i = 1; i < f.prompts.size(); ++i) {
      const auto &a = f.prompts[i - 1], &b = f.prompts[i];
      size_t l = 0;
      while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
      changed += b.size() - l;
    }
    for (auto& p : f.prompts) whole += p.size();
    MESSAGE("bytes_written " << st.bytes_written << ", changed text " << changed << ", whole-state rewrites "
                             << whole);
    CHECK(st.bytes_written < 3 * changed);
  }
  auto store = OpenOrFail(o);
  LookupResult r;
  auto got = store->Acquire("s", f.tok->version_hash(), &r);
  CHECK(r == LookupResult::kDiskHit);
  REQUIRE(got);
  CHECK(SameState(*got, *last));
  std::vector<uint32_t> ids;
  f.tok->Encode(got->text(), true, ids);
  CHECK(ids == got->ids());
  // Second lookup is served from memory; further deltas continue the log.
  CHECK(store->Acquire("s", f.tok->version_hash(), &r) == got);
  CHECK(r == LookupResult::kMemoryHit);
  std::string more = got->text() + "\nmore text after the restart, with numbers 12345.";
  auto o2 = core::Repairer::Update(*f.tok, *got, more, true);
  store->Commit("s", got, KeptBytes(o2, more.size()));
  store->Flush();
  store.reset();
  store = OpenOrFail(o);
  auto again = store->Acquire("s", f.tok->version_hash(), &r);
  CHECK(r == LookupResult::kDiskHit);
  REQUIRE(again);
  CHECK(SameState(*again, *got));
  CHECK(store->Stats().corrupt == 0);
}

TEST_CASE("truncating edits and large states round-trip exactly") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.chunk_bytes = 1024;
  std::mt19937 rng(7);
  std::shared_ptr<core::TokenState> st;
  auto store = OpenOrFail(o);
  std::string text = f.prompts[3];
  st = Step(*store, *f.tok, "t", text);
  for (int i = 0; i < 40; ++i) {
    // Cut somewhere (often mid-chunk, sometimes deep) and append new text.
    size_t cut = text.size() - std::min<size_t>(text.size(), rng() % (i % 5 == 0 ? 20000 : 300));
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut) + " edit " + std::to_string(i) + "<|eot_id|> x = foo(bar, 42)\n";
    st = Step(*store, *f.tok, "t", text);
  }
  store->Flush();
  store.reset();
  store = OpenOrFail(o);
  LookupResult r;
  auto got = store->Acquire("t", f.tok->version_hash(), &r);
  REQUIRE(got);
  CHECK(r == LookupResult::kDiskHit);
  CHECK(SameState(*got, *st));
}

TEST_CASE("a corrupted value is a counted miss, never wrong IDs") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.chunk_bytes = 2048;
  {
    auto store = OpenOrFail(o);
    Step(*store, *f.tok, "flip", f.prompts[1]);
    Step(*store, *f.tok, "garbage", f.prompts[1]);
    Step(*store, *f.tok, "meta", f.prompts[1]);
    Step(*store, *f.tok, "missing", f.prompts[1]);
    Step(*store, *f.tok, "good", f.prompts[1]);
  }
  {
    rocksdb::DB* raw = nullptr;
    rocksdb::Options ro;
    REQUIRE(rocksdb::DB::Open(ro, o.path, &raw).ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    std::string v;
    REQUIRE(db->Get({}, format::ChunkKey("flip", 1), &v).ok());
    v[v.size() / 2] ^= 0x01;  // one bit in the middle of a chunk
    REQUIRE(db->Put({}, format::ChunkKey("flip", 1), v).ok());
    REQUIRE(db->Put({}, format::ChunkKey("garbage", 0), "garbage").ok());
    REQUIRE(db->Get({}, format::MetaKey("meta"), &v).ok());
    v[5] ^= 0x40;
    REQUIRE(db->Put({}, format::MetaKey("meta"), v).ok());
    REQUIRE(db->Delete({}, format::ChunkKey("missing", 1)).ok());
  }
  auto store = OpenOrFail(o);
  LookupResult r;
  for (const char* k : {"flip", "garbage", "meta", "missing"}) {
    CAPTURE(k);
    CHECK(store->Acquire(k, f.tok->version_hash(), &r) == nullptr);
    CHECK(r == LookupResult::kCorrupt);
  }
  CHECK(store->Stats().corrupt == 4);
  store->Flush();
  // Corrupt states were deleted: now plain misses.
  CHECK(store->Acquire("flip", f.tok->version_hash(), &r) == nullptr);
  CHECK(r == LookupResult::kMiss);
  CHECK(store->Acquire("good", f.tok->version_hash(), &r) != nullptr);
  CHECK(r == LookupResult::kDiskHit);
}

TEST_CASE("TTL: enforced on reads, swept, reclaimed by compaction") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  FakeClock clock;
  StoreOptions o;
  o.path = d.db();
  o.clock = clock.fn();
  o.ttl = std::chrono::seconds(3600);
  o.sweep_interval = std::chrono::seconds(0);
  LookupResult r;
  {
    auto store = OpenOrFail(o);
    Step(*store, *f.tok, "mem", f.prompts[0]);
    clock.Advance(std::chrono::seconds(1800));
    CHECK(store->Acquire("mem", f.tok->version_hash(), &r) != nullptr);
    CHECK(r == LookupResult::kMemoryHit);
    clock.Advance(std::chrono::seconds(1801));
    CHECK(store->Acquire("mem", f.tok->version_hash(), &r) == nullptr);
    CHECK(r == LookupResult::kExpired);
    CHECK(store->Stats().expired == 1);
    // The expired state was deleted from disk too.
    Step(*store, *f.tok, "disk", f.prompts[0]);
    // Writes refresh the TTL.
    clock.Advance(std::chrono::seconds(3000));
    Step(*store, *f.tok, "disk", f.prompts[1]);
    clock.Advance(std::chrono::seconds(3000));
  }
  {
    auto store = OpenOrFail(o);
    CHECK(store->Acquire("mem", f.tok->version_hash(), &r) == nullptr);
    CHECK(r == LookupResult::kMiss);
    CHECK(store->Acquire("disk", f.tok->version_hash(), &r) != nullptr);
    CHECK(r == LookupResult::kDiskHit);
  }
  clock.Advance(std::chrono::seconds(700));
  {
    auto store = OpenOrFail(o);
    CHECK(store->Acquire("disk", f.tok->version_hash(), &r) == nullptr);
    CHECK(r == LookupResult::kExpired);
    CHECK(store->Stats().expired == 1);
  }
  // Sweep + compaction reclaim expired states that nobody reads.
  {
    auto store = OpenOrFail(o);
    for (int i = 0; i < 30; ++i) Step(*store, *f.tok, "k" + std::to_string(i), f.prompts[i % f.prompts.size()]);
    store->CompactAll();
    uint64_t before = store->Stats().disk_bytes;
    CHECK(store->SweepExpired() == 0);
    clock.Advance(std::chrono::seconds(3601));
    Step(*store, *f.tok, "fresh", f.prompts[0]);
    store->Flush();
    CHECK(store->SweepExpired() == 30);
    CHECK(store->Stats().swept == 30);
    store->CompactAll();
    uint64_t after = store->Stats().disk_bytes;
    MESSAGE("disk_bytes before sweep " << before << ", after sweep+compaction " << after);
    CHECK(after < before / 4);
    CHECK(store->Acquire("fresh", f.tok->version_hash(), &r) != nullptr);
    CHECK(store->Acquire("k3", f.tok->version_hash(), &r) == nullptr);
    CHECK(r == LookupResult::kMiss);
  }
}

TEST_CASE("memory budget eviction, then reload from disk") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  std::vector<std::shared_ptr<core::TokenState>> states;
  auto probe = std::make_shared<core::TokenState>();
  core::Repairer::Reset(*f.tok, *probe, f.prompts[2], true);
  o.memory_budget_bytes = probe->AccountedBytes() * 3;
  auto store = OpenOrFail(o);
  for (int i = 0; i < 8; ++i) states.push_back(Step(*store, *f.tok, "e" + std::to_string(i), f.prompts[2]));
  auto st = store->Stats();
  CHECK(st.evictions >= 5);
  CHECK(st.memory_bytes <= o.memory_budget_bytes);
  store->Flush();
  LookupResult r;
  auto got = store->Acquire("e0", f.tok->version_hash(), &r);
  CHECK(r == LookupResult::kDiskHit);
  REQUIRE(got);
  CHECK(SameState(*got, *states[0]));
  // Continue the session after the reload: deltas append to the disk log.
  auto next = Step(*store, *f.tok, "e0", f.prompts[3], &r);
  CHECK(r == LookupResult::kMemoryHit);
  store->Flush();
  store.reset();
  store = OpenOrFail(o);
  got = store->Acquire("e0", f.tok->version_hash(), &r);
  REQUIRE(got);
  CHECK(SameState(*got, *next));
}

TEST_CASE("a tokenizer version change turns old states into misses") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  {
    auto store = OpenOrFail(o);
    Step(*store, *f.tok, "v", f.prompts[0]);
    LookupResult r;
    CHECK(store->Acquire("v", "0123456789abcdef", &r) == nullptr);  // memory tier
    CHECK(r == LookupResult::kVersionStale);
  }
  auto store = OpenOrFail(o);
  LookupResult r;
  CHECK(store->Acquire("v", "0123456789abcdef", &r) == nullptr);  // disk tier
  CHECK(r == LookupResult::kVersionStale);
  CHECK(store->Stats().version_stale == 1);
  CHECK(store->Acquire("v", f.tok->version_hash(), &r) != nullptr);
}

TEST_CASE("write-queue drops are counted and never lose a delta") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.write_queue_capacity = 2;
  o.chunk_bytes = 2048;
  std::shared_ptr<core::TokenState> last;
  {
    auto store = OpenOrFail(o);
    last = Step(*store, *f.tok, "q", f.prompts[0]);
    store->Flush();
    store->PauseWritesForTesting(true);
    for (size_t i = 1; i < f.prompts.size(); ++i) last = Step(*store, *f.tok, "q", f.prompts[i]);
    auto st = store->Stats();
    CHECK(st.write_queue_drops == f.prompts.size() - 1 - 2);
    CHECK(st.write_queue_depth == 2);
    store->PauseWritesForTesting(false);
    store->Flush();
    // The disk now lacks the dropped deltas; the next commit writes them.
    std::string more = last->text() + "\nfinal line";
    auto out = core::Repairer::Update(*f.tok, *last, more, true);
    store->Commit("q", last, KeptBytes(out, more.size()));
    store->Flush();
  }
  auto store = OpenOrFail(o);
  LookupResult r;
  auto got = store->Acquire("q", f.tok->version_hash(), &r);
  REQUIRE(got);
  CHECK(r == LookupResult::kDiskHit);
  CHECK(SameState(*got, *last));
}

TEST_CASE("concurrent workers on distinct keys") {
  Fixture f;
  if (!f.ok()) return;
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.chunk_bytes = 4096;
  std::vector<std::shared_ptr<core::TokenState>> finals(4);
  {
    auto store = OpenOrFail(o);
    std::vector<std::thread> ts;
    for (int w = 0; w < 4; ++w) {
      ts.emplace_back([&, w] {
        for (size_t i = 0; i < f.prompts.size(); ++i) {
          for (int s = 0; s < 3; ++s) {
            auto st = Step(*store, *f.tok, "w" + std::to_string(w) + "s" + std::to_string(s), f.prompts[i]);
            if (s == 0) finals[w] = st;
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    store->Flush();
    CHECK(store->Stats().write_failures == 0);
  }
  auto store = OpenOrFail(o);
  for (int w = 0; w < 4; ++w) {
    LookupResult r;
    auto got = store->Acquire("w" + std::to_string(w) + "s0", f.tok->version_hash(), &r);
    REQUIRE(got);
    CHECK(SameState(*got, *finals[w]));
  }
}

TEST_CASE("the memory tier charges buffer capacities, keys and entry overhead") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  StoreOptions o;
  auto store = OpenOrFail(o);
  // A state grown by appends holds more capacity than its sizes.
  auto st = std::make_shared<core::TokenState>();
  std::string text;
  for (int i = 0; i < 200; ++i) {
    text += "step " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog.\n";
    core::Repairer::Update(*tok, *st, text, true);
  }
  const std::string key(600, 'k');
  store->Commit(key, st, 0);
  const size_t charged = store->Stats().memory_bytes;
  CHECK(charged == MemoryTierBytes(key, *st));
  const size_t held = st->text().capacity() + (st->ids().capacity() + st->ends().capacity()) * 4;
  CHECK(charged >= held + 2 * key.size());
  CHECK(charged > st->AccountedBytes());  // the old measure (sizes only) undercounts
}

TEST_CASE("a commit's tag survives a restart, is replaced, and expires with its state") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  TempDir d;
  std::chrono::system_clock::time_point now{std::chrono::hours(1000000)};
  StoreOptions o;
  o.path = d.db();
  o.ttl = std::chrono::seconds(100);
  o.clock = [&] { return now; };
  auto make = [&](const std::string& text) {
    auto st = std::make_shared<core::TokenState>();
    core::Repairer::Reset(*tok, *st, text, true);
    return st;
  };
  {
    auto store = OpenOrFail(o);
    store->Commit("a", make("first conversation"), 0, "tag-a1");
    store->Commit("a", make("first conversation, longer"), 0, "tag-a2");  // replaces the tag
    store->Commit("b", make("second conversation"), 0, "tag-b");
    store->Commit("c", make("no tag"), 0);
    store->Flush();
  }
  now += std::chrono::seconds(50);
  {
    auto store = OpenOrFail(o);
    auto tags = Tags(*store);
    CHECK(tags.size() == 2);
    CHECK(tags.count("tag-a2") == 1);
    CHECK(tags.count("tag-b") == 1);
    CHECK(tags["tag-b"] == std::chrono::duration_cast<std::chrono::milliseconds>(
                               (now - std::chrono::seconds(50)).time_since_epoch()).count());
    store->Commit("b", make("second conversation, later"), 0, "tag-b2");
    store->Flush();
  }
  now += std::chrono::seconds(60);  // a expired (110 s), b written 60 s ago
  {
    auto store = OpenOrFail(o);
    auto tags = Tags(*store);
    CHECK(tags.size() == 1);
    CHECK(tags.count("tag-b2") == 1);
  }
}

TEST_CASE("metas of format 1 (no tag) still load; tags are bounded") {
  // A format-1 meta as written before tags existed.
  const std::string k = "old-key";
  std::string v;
  auto u8 = [&](uint8_t x) { v.push_back(static_cast<char>(x)); };
  auto u32 = [&](uint32_t x) { v.append(reinterpret_cast<const char*>(&x), 4); };
  auto u64 = [&](uint64_t x) { v.append(reinterpret_cast<const char*>(&x), 8); };
  u8('T'), u8('M'), u8(1), u8(1);
  u32(3), u32(10), u32(40), u32(0);
  u64(40), u64(123456), u64(0xabcdef);
  u8(4);
  v += "hash";
  u64(XXH3_64bits_withSeed(v.data(), v.size(), format::ChainSeed(k)));
  format::Meta m;
  REQUIRE(format::DecodeMeta(k, v, &m));
  CHECK(m.n_chunks == 3);
  CHECK(m.n_text == 40);
  CHECK(m.write_time_ms == 123456);
  CHECK(m.version_hash == "hash");
  CHECK(m.tag.empty());
  // Format 2 round trip, tag cut at kMaxTag.
  m.tag.assign(format::kMaxTag + 100, 'x');
  format::Meta back;
  REQUIRE(format::DecodeMeta(k, format::EncodeMeta(k, m), &back));
  CHECK(back.tag.size() == format::kMaxTag);
  CHECK(back.version_hash == "hash");
  // A flipped byte in the tag fails the checksum.
  std::string bad = format::EncodeMeta(k, m);
  bad[bad.size() - 20] ^= 1;
  CHECK(!format::DecodeMeta(k, bad, &back));
}
