// Added tokens (special tokens and user-added ones): found in the text before
// normalization and pre-tokenization, leftmost-longest as HF's Aho-Corasick
// matcher does, with single_word / lstrip / rstrip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace toktier::core {

struct AddedToken {
  std::string content;
  uint32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of a segmented text: either an added token (id set) or plain text.
struct Segment {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool is_added = false;
  uint32_t id = 0;
};

class AddedTokenMatcher {
 public:
  void Build(std::vector<AddedToken> tokens);
  [[nodiscard]] bool empty() const { return tokens_.empty(); }
  [[nodiscard]] size_t max_length() const { return max_len_; }
  [[nodiscard]] bool has_strip_rules() const { return has_strip_rules_; }
  [[nodiscard]] const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Appends the segments of text (offsets relative to text, plus `base`).
  void Split(std::string_view text, uint32_t base, std::vector<Segment>& out) const;

  // True if some occurrence of some added token starts before p and ends
  // after it (so cutting the text at p could change the matches).
  [[nodiscard]] bool Straddles(std::string_view text, size_t p) const;

  // First position in [from, limit) where some token occurs; limit if none.
  [[nodiscard]] size_t FirstOccurrence(std::string_view text, size_t from, size_t limit) const;

 private:
  // The trie node after `node` on byte c, -1 if none.
  int32_t Child(uint32_t node, unsigned char c) const;
  // The first i' >= i whose byte starts some token (text.size() if none):
  // memchr / word-at-a-time when tokens start with at most 3 distinct bytes.
  size_t NextCandidate(std::string_view text, size_t i) const;
  // Length of the longest token matching at text[i], 0 if none; *index its token.
  size_t LongestAt(std::string_view text, size_t i, size_t* index) const;

  struct Node {
    std::vector<std::pair<unsigned char, uint32_t>> children;  // sorted by byte
    int32_t token = -1;                                         // index into tokens_
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
  unsigned char first_list_[3] = {0, 0, 0};  // the distinct first bytes, when at most 3
  int first_count_ = 0;                      // how many distinct first bytes (4 = more than 3)
  size_t max_len_ = 0;
  bool has_strip_rules_ = false;
};

}  // namespace toktier::core
