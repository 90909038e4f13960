// Generic pre-tokenizer path (see pretokenizer.h): HF pre-tokenizer steps run
// as HF tokenizers 0.23 runs them, regexes through PCRE2 after a translation
// that replaces every Unicode class by the code point sets probed from the
// reference (unicode_tables.inc). Internal to core/ and its tests.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/pretokenizer.h"
#include "core/unicode.h"

namespace toktier::core {

// Parses the `pre_tokenizer` value of a tokenizer.json (null, one
// pre-tokenizer, or a Sequence, nested or not) into steps. Returns false and
// sets *error (naming the type or field) for anything the span splitter cannot
// reproduce exactly: unknown types, Metaspace, ByteLevel with
// add_prefix_space=true (it inserts text), unknown behaviors.
// Also maps CharDelimiterSplit (Split by String, Removed) and BertPreTokenizer
// (WhitespaceSplit + Punctuation Isolated).
bool ParsePreTokenizerSteps(const nlohmann::json& pre_tokenizer,
                            std::vector<PreTokenizerStep>* steps, std::string* error);

// MakeGenericSplitter with an explicit choice of reference: kHuggingFace
// (Oniguruma semantics: ^/$ are line anchors, \u escapes, {,n}) or kTiktoken
// (Rust regex semantics). For a tiktoken encoding use one step
// {kSplit, pat_str, kRemoved, invert=true}: tiktoken drops text its pattern
// does not match (identical to Isolated for the OpenAI patterns, which match
// every character).
std::unique_ptr<Splitter> MakeGenericSplitter(const std::vector<PreTokenizerStep>& steps,
                                              unicode::Tables tables, std::string* error);

// Translates a reference regex into PCRE2 syntax (to be compiled with
// PCRE2_UTF|PCRE2_UCP, plus PCRE2_MULTILINE for kHuggingFace) in which every
// class is an explicit code point set. Returns false and sets *error naming
// the construct when it cannot be translated faithfully. Exposed for tests.
bool TranslatePattern(std::string_view pattern, unicode::Tables tables, std::string* out,
                      std::string* error);

}  // namespace toktier::core
