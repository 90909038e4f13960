#include "core/added_tokens.h"

#include <algorithm>
#include <cstring>

#include "core/unicode.h"

namespace toktier::core {
namespace {

bool IsWhiteAt(std::string_view s, size_t i, size_t* len) {
  return (unicode::Classes(unicode::DecodeAt(s, i, len)) & unicode::kWhite) != 0;
}

// HF's single_word test uses \w: letters, marks, numbers, connector punctuation.
bool IsWordChar(char32_t cp) {
  if (cp == '_') return true;
  return (unicode::Classes(cp) & (unicode::kLetter | unicode::kMark | unicode::kNumber)) != 0;
}

}  // namespace

int32_t AddedTokenMatcher::Child(uint32_t node, unsigned char c) const {
  const auto& ch = trie_[node].children;
  auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, 0u),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
  return it != ch.end() && it->first == c ? static_cast<int32_t>(it->second) : -1;
}

void AddedTokenMatcher::Build(std::vector<AddedToken> tokens) {
  tokens_ = std::move(tokens);
  trie_.assign(1, Node{});
  std::fill(std::begin(first_byte_), std::end(first_byte_), false);
  first_count_ = 0;
  max_len_ = 0;
  has_strip_rules_ = false;
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    has_strip_rules_ |= tokens_[t].lstrip || tokens_[t].rstrip || tokens_[t].single_word;
    max_len_ = std::max(max_len_, s.size());
    const auto first = static_cast<unsigned char>(s[0]);
    if (!first_byte_[first]) {
      if (first_count_ < 3) first_list_[first_count_] = first;
      first_count_ = std::min(first_count_ + 1, 4);
    }
    first_byte_[first] = true;
    uint32_t node = 0;
    for (unsigned char c : s) {
      auto& ch = trie_[node].children;
      auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(c, 0u),
                                 [](const auto& a, const auto& b) { return a.first < b.first; });
      if (it != ch.end() && it->first == c) {
        node = it->second;
      } else {
        uint32_t fresh = static_cast<uint32_t>(trie_.size());
        ch.insert(it, {c, fresh});
        trie_.push_back(Node{});
        node = fresh;
      }
    }
    // The first token listed with a given content wins, as in HF's map.
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(t);
  }
}

size_t AddedTokenMatcher::LongestAt(std::string_view text, size_t i, size_t* index) const {
  uint32_t node = 0;
  size_t best = 0;
  for (size_t k = i; k < text.size(); ++k) {
    int32_t next = Child(node, static_cast<unsigned char>(text[k]));
    if (next < 0) break;
    node = static_cast<uint32_t>(next);
    if (trie_[node].token >= 0) {
      best = k + 1 - i;
      *index = static_cast<size_t>(trie_[node].token);
    }
  }
  return best;
}

size_t AddedTokenMatcher::NextCandidate(std::string_view text, size_t i) const {
  const size_t n = text.size();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  if (first_count_ == 1) {
    const void* hit = i < n ? std::memchr(s + i, first_list_[0], n - i) : nullptr;
    return hit ? static_cast<size_t>(static_cast<const unsigned char*>(hit) - s) : n;
  }
  if (first_count_ >= 2 && first_count_ <= 3) {
    // A zero byte of w ^ broadcast(b) marks b (the classic has-zero-byte test).
    constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
    uint64_t pat[3];
    for (int k = 0; k < 3; ++k) pat[k] = kOnes * first_list_[k < first_count_ ? k : 0];
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      uint64_t any = 0;
      for (int k = 0; k < 3; ++k) {
        const uint64_t x = w ^ pat[k];
        any |= (x - kOnes) & ~x & kHigh;
      }
      if (any) break;
      i += 8;
    }
  }
  while (i < n && !first_byte_[s[i]]) ++i;
  return i;
}

void AddedTokenMatcher::Split(std::string_view text, uint32_t base, std::vector<Segment>& out) const {
  size_t start = 0;  // end of the previous match
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    i = NextCandidate(text, i);
    if (i >= n) break;
    size_t index = 0;
    size_t len = LongestAt(text, i, &index);
    if (len == 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t mb = i, me = i + len;
    if (tok.single_word) {
      bool ok = true;
      if (mb > 0) {
        size_t l = 0;
        ok &= !IsWordChar(unicode::DecodeAt(text, unicode::PrevStart(text, mb), &l));
      }
      if (me < n) {
        size_t l = 0;
        ok &= !IsWordChar(unicode::DecodeAt(text, me, &l));
      }
      if (!ok) {
        // HF skips this match; scanning resumes after it.
        i = me;
        continue;
      }
    }
    if (tok.lstrip) {
      while (mb > start) {
        size_t ps = unicode::PrevStart(text, mb), l = 0;
        if (!IsWhiteAt(text, ps, &l)) break;
        mb = ps;
      }
    }
    if (tok.rstrip) {
      size_t l = 0;
      while (me < n && IsWhiteAt(text, me, &l)) me += l;
    }
    if (mb > start) out.push_back(Segment{base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(mb), false, 0});
    out.push_back(Segment{base + static_cast<uint32_t>(mb), base + static_cast<uint32_t>(me), true, tok.id});
    start = me;
    i = me;
  }
  if (start < n || n == 0) {
    if (start < n) out.push_back(Segment{base + static_cast<uint32_t>(start), base + static_cast<uint32_t>(n), false, 0});
  }
}

bool AddedTokenMatcher::Straddles(std::string_view text, size_t p) const {
  if (tokens_.empty() || p == 0 || p >= text.size()) return false;
  size_t from = p >= max_len_ ? p - max_len_ + 1 : 0;
  for (size_t i = from; i < p; ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    // Any token (not just the longest) starting at i and ending after p.
    uint32_t node = 0;
    for (size_t k = i; k < text.size(); ++k) {
      int32_t next = Child(node, static_cast<unsigned char>(text[k]));
      if (next < 0) break;
      node = static_cast<uint32_t>(next);
      if (trie_[node].token >= 0 && k + 1 > p) return true;
    }
  }
  return false;
}

size_t AddedTokenMatcher::FirstOccurrence(std::string_view text, size_t from, size_t limit) const {
  for (size_t i = from; i < limit; ++i) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) continue;
    size_t index = 0;
    if (LongestAt(text, i, &index) > 0) return i;
  }
  return limit;
}

}  // namespace toktier::core
