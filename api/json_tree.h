// Reading a client body into an nlohmann tree quickly (private to api/):
// simdjson's on-demand parser walks the bytes and the tree is built from
// what it yields, far faster than nlohmann's own parser on a 1 MB chat body
// (issue 37). nlohmann stays the reference: numbers are read by nlohmann
// from their token, and whatever the walk refuses (an error of any kind,
// a byte-order mark, a scalar document) ends in nlohmann's parse of the same
// bytes, so the tree is always the one nlohmann would build
// (tests/api/test_json_tree.cpp checks the corners: surrogates, -0, big
// integers, duplicate keys, trailing data).
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace toktier::api {

// An empty object with room for `n` keys. nlohmann's ordered_map is a
// vector of pair<const string, json>, and the const key makes the pair's
// move constructor a throwing one: when the vector grows it copies every
// value instead of moving it, so an object that receives a 1 MB messages
// array before its other keys copies that array once per growth. Objects
// built with large values early reserve their slots first.
inline nlohmann::ordered_json ObjectWithRoom(size_t n) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j.get_ref<nlohmann::ordered_json::object_t&>().reserve(n);
  return j;
}

enum class FastTree {
  kBuilt,       // *out is the tree
  kTooDeep,     // arrays and objects nest deeper than max_depth (JsonNestingExceeds would say so too)
  kNotVouched,  // *out unspecified: the caller checks the depth and parses with nlohmann
};

// The tree of `text` (one JSON object or array, whitespace around it) in
// *out, as nlohmann::ordered_json::parse builds it (duplicate keys: the
// first position, the last value), with the nesting bound checked on the
// way (the top-level value is depth 1), so a body the walk reads needs no
// separate depth scan.
[[nodiscard]] FastTree ParseJsonTreeFast(std::string_view text, size_t max_depth, nlohmann::ordered_json* out);

// `tree` as tree.dump() writes it (compact, UTF-8 kept, nlohmann's number
// forms), byte for byte, less the top-level key `skip` when tree is an
// object and skip is not empty. Strings are escaped by a vectorized scan:
// a 1 MB conversation dumps several times faster. Strings must be valid
// UTF-8 (true of every tree parsed from a body); where nlohmann's dump
// would throw on one that is not, this writes its bytes as they are.
std::string DumpJsonTree(const nlohmann::ordered_json& tree, std::string_view skip = {});

}  // namespace toktier::api
