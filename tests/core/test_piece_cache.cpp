// Issue 13: the inline piece caches (core/piece_cache.h). A 2-way set's hit
// is chosen without a branch on the way; these tests pin what that must keep:
// each way answers only for its own piece, a set holds the two most recently
// stored pieces, the length tells "a" from "a\0", and a piece never stored
// finds nothing, whichever way it would have been in.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/piece_cache.h"

namespace core = toktier::core;

namespace {

using Hot = core::HotPieceCache;

Hot::Key KeyOf(const std::string& piece) {
  // Keys read whole words when the buffer allows: give them room, with
  // bytes after the piece that the mask must drop.
  std::string buf = piece + std::string(Hot::kMaxPiece, '\x7f');
  return Hot::MakeKey(buf.data(), piece.size(), buf.data() + buf.size());
}

// `count` pieces that all fall into the set of `first`.
std::vector<std::string> SameSet(const std::string& first, size_t count) {
  std::vector<std::string> out{first};
  const uint32_t set = KeyOf(first).set;
  for (uint64_t i = 0; out.size() < count; ++i) {
    std::string p = "p" + std::to_string(i);
    if (KeyOf(p).set == set) out.push_back(p);
  }
  return out;
}

void Put(Hot& cache, const std::string& piece, std::vector<uint32_t> ids) {
  std::vector<uint32_t> lens(ids.size(), 1);
  cache.Store(KeyOf(piece), ids.data(), lens.data(), ids.size());
}

}  // namespace

TEST_CASE("each way of a hot set answers for its own piece only") {
  auto cache = std::make_unique<Hot>();
  const auto pieces = SameSet(" the", 4);
  Put(*cache, pieces[0], {11});
  Put(*cache, pieces[1], {21, 22});
  // pieces[1] in way 0, pieces[0] in way 1.
  const Hot::Entry* a = cache->Find(KeyOf(pieces[0]));
  const Hot::Entry* b = cache->Find(KeyOf(pieces[1]));
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(a != b);
  CHECK(a->count == 1);
  CHECK(a->ids[0] == 11);
  CHECK(b->count == 2);
  CHECK(b->ids[0] == 21);
  CHECK(b->ids[1] == 22);
  // Same set, never stored: no way answers.
  CHECK(cache->Find(KeyOf(pieces[2])) == nullptr);
  // A third piece evicts the oldest (way 1); the other two stay.
  Put(*cache, pieces[2], {31, 32, 33});
  CHECK(cache->Find(KeyOf(pieces[0])) == nullptr);
  REQUIRE(cache->Find(KeyOf(pieces[1])) != nullptr);
  CHECK(cache->Find(KeyOf(pieces[1]))->ids[0] == 21);
  REQUIRE(cache->Find(KeyOf(pieces[2])) != nullptr);
  CHECK(cache->Find(KeyOf(pieces[2]))->count == 3);
  CHECK(cache->Find(KeyOf(pieces[3])) == nullptr);
}

TEST_CASE("the length tells pieces apart that differ only by trailing NUL bytes") {
  auto cache = std::make_unique<Hot>();
  Put(*cache, "a", {1});
  CHECK(cache->Find(KeyOf(std::string("a\0", 2))) == nullptr);
  CHECK(cache->Find(KeyOf(std::string("a\0\0\0\0\0\0\0\0", 9))) == nullptr);
  Put(*cache, std::string("a\0", 2), {2});
  REQUIRE(cache->Find(KeyOf("a")) != nullptr);
  CHECK(cache->Find(KeyOf("a"))->ids[0] == 1);
  REQUIRE(cache->Find(KeyOf(std::string("a\0", 2))) != nullptr);
  CHECK(cache->Find(KeyOf(std::string("a\0", 2)))->ids[0] == 2);
}

TEST_CASE("an empty cache finds nothing, the empty slots included") {
  auto cache = std::make_unique<Hot>();
  // An empty slot has length 0 and zero words; no piece is empty.
  for (const std::string& p : std::vector<std::string>{"x", " ", std::string(1, '\0'), std::string(16, '\0'),
                                                      "0123456789abcdef"}) {
    CHECK(cache->Find(KeyOf(p)) == nullptr);
  }
}
