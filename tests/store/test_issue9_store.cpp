// Issue 9 (resources and sessions), store side: the memory tier charges what
// a state really holds (buffer capacities, key, entry overhead), and a
// commit's tag is stored with the state's meta record, so it survives a
// restart (and a kill -9: same WriteBatch as the state), expires with the
// state, and metas written before tags existed still load.
#include <doctest/doctest.h>
#include <xxhash.h>

#include <cstring>

#include "store/record_format.h"
#include "store_test_util.h"

using namespace toktier;
using namespace toktier::store;
using namespace toktier::store::testing;

namespace {

std::unique_ptr<StateStore> Open(const StoreOptions& o) {
  StoreStatus s;
  auto st = StateStore::Open(o, &s);
  REQUIRE_MESSAGE(s.ok(), s.message());
  REQUIRE(st);
  return st;
}

std::map<std::string, int64_t> Tags(StateStore& store) {
  std::map<std::string, int64_t> out;
  store.ForEachTag([&](std::string_view tag, int64_t t) { out[std::string(tag)] = t; });
  return out;
}

}  // namespace

TEST_CASE("issue 9.10: the memory tier charges buffer capacities, keys and entry overhead") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  if (!tok) return;
  StoreOptions o;
  auto store = Open(o);
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

TEST_CASE("issue 9.11: a commit's tag survives a restart, is replaced, and expires with its state") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  if (!tok) return;
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
    auto store = Open(o);
    store->Commit("a", make("first conversation"), 0, "tag-a1");
    store->Commit("a", make("first conversation, longer"), 0, "tag-a2");  // replaces the tag
    store->Commit("b", make("second conversation"), 0, "tag-b");
    store->Commit("c", make("no tag"), 0);
    store->Flush();
  }
  now += std::chrono::seconds(50);
  {
    auto store = Open(o);
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
    auto store = Open(o);
    auto tags = Tags(*store);
    CHECK(tags.size() == 1);
    CHECK(tags.count("tag-b2") == 1);
  }
}

TEST_CASE("issue 9.11: metas of format 1 (no tag) still load; tags are bounded") {
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
