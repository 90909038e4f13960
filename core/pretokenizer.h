// Pre-tokenization: splitting one normalized segment into pieces that BPE
// encodes independently. Two implementations must agree exactly:
//  - the generic path (regex_split.cpp): every HF pre-tokenizer step run as
//    written, regexes through PCRE2 (UTF + UCP + JIT) with the reference's
//    Unicode classes substituted in;
//  - hand-written scanners (family_scanners.cpp) for the known patterns,
//    chosen by exact pattern string.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace toktier::core {

struct Span {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool operator==(const Span&) const = default;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One step of a pre-tokenizer Sequence, in the order HF applies them. Each
// step re-splits every piece the previous steps produced.
struct PreTokenizerStep {
  enum class Kind {
    kSplit,       // Split{pattern, behavior, invert}
    kByteLevel,   // ByteLevel: with use_regex, a Split by the GPT-2 pattern (Isolated)
    kDigits,      // Digits{individual_digits}
    kWhitespace,  // Whitespace: \w+|[^\w\s]+ (Isolated-like, whitespace removed)
    kWhitespaceSplit,
    kPunctuation, // Punctuation{behavior}
  };
  Kind kind = Kind::kSplit;
  std::string pattern;      // kSplit: the pattern text
  bool pattern_is_regex = true;  // kSplit: {"Regex": ...} vs {"String": ...}
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool use_regex = false;          // kByteLevel
  bool individual_digits = false;  // kDigits
};

// Splits segments into pieces. Implementations are immutable and thread-safe.
class Splitter {
 public:
  virtual ~Splitter() = default;
  // Appends the pieces of `segment` (valid UTF-8) as byte spans, in order.
  // Pieces are non-empty; removed parts are simply absent.
  virtual void Split(std::string_view segment, std::vector<Span>& pieces) const = 0;
  // The pieces of `segment` written from pieces[0] on, their count returned;
  // pieces may keep a larger size, whose elements past the count are
  // unspecified. A caller that splits chunk after chunk into one buffer
  // then pays no zero-filling of a freshly grown vector per chunk.
  [[nodiscard]] virtual size_t SplitReusing(std::string_view segment, std::vector<Span>& pieces) const {
    pieces.clear();
    Split(segment, pieces);
    return pieces.size();
  }
  // True only when, for EVERY text X whose characters around p are those of
  // `text` (see the family's rule), Split(X) == Split(X[:p]) ++ Split(X[p:]).
  // Used by incremental repair; must never return true unproven. A rule may
  // inspect at most 4 code points on either side of p (repair evaluates it
  // on a window of normalized text). The default (unknown pattern) proves
  // nothing.
  virtual bool IsHardBoundary(std::string_view text, size_t p) const { return false; }
  // Name for diagnostics ("generic", "cl100k", ...).
  virtual std::string_view name() const = 0;
};

// The generic path: runs `steps` exactly as HF does. Returns nullptr and sets
// *error if a pattern does not compile or is unsupported.
std::unique_ptr<Splitter> MakeGenericSplitter(const std::vector<PreTokenizerStep>& steps,
                                              std::string* error);

// A hand-written scanner for `steps` when they are exactly a known family
// (ByteLevel GPT-2, cl100k / Llama 3, Qwen2/3, o200k / gpt-oss, DeepSeek-V3);
// nullptr otherwise.
std::unique_ptr<Splitter> MakeFamilyScanner(const std::vector<PreTokenizerStep>& steps);

}  // namespace toktier::core
