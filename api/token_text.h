// Token IDs back to text, for engines that answer in IDs only (vLLM's
// /inference/v1/generate, chat_forward "vllm"): a streaming decoder that
// gives out text as it becomes final, the way vLLM's own detokenizer does
// for its text endpoints.
// - Bytes of a UTF-8 character split across tokens are held until the
//   character is complete; invalid bytes become U+FFFD, as the reference
//   ByteLevel decoder writes them (Rust's from_utf8_lossy).
// - Special tokens (EOS, <|im_end|>) are left out with skip_special_tokens.
// - Stop strings: the text ends before the first one (or after it with
//   include_stop_str_in_output); text that may still become one is held.
// Pure: no I/O; no exception leaves it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/core.h"

namespace toktier::api {

struct TokenTextOptions {
  bool skip_special_tokens = true;  // vLLM's default
  std::vector<std::string> stop;    // stop strings (empty ones are ignored)
  bool include_stop_str_in_output = false;
};

class TokenTextStream {
 public:
  // `tokenizer` must decode by concatenation (Tokenizer::DecodesByConcatenation).
  TokenTextStream(std::shared_ptr<const core::Tokenizer> tokenizer, TokenTextOptions options);

  // Appends the text that these IDs make final to *out. False for an ID the
  // vocabulary does not have (nothing is appended then).
  [[nodiscard]] bool Feed(std::span<const uint32_t> ids, std::string* out);
  // The end of the output: appends what was held back.
  void Finish(std::string* out);

  // A stop string was found: later IDs add nothing.
  bool stopped() const { return stopped_; }
  // The stop string that ended the text ("" while none has): what vLLM
  // reports as the choice's stop_reason, and Anthropic as stop_sequence.
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  void Release(std::string* out, bool final);

  std::shared_ptr<const core::Tokenizer> tokenizer_;
  TokenTextOptions options_;
  size_t longest_stop_ = 0;
  std::string bytes_;    // decoded bytes not yet made text (an incomplete character)
  std::string pending_;  // text held back: it may be the start of a stop string
  bool stopped_ = false;
  std::string matched_stop_;
};

// Appends `bytes` to *out as UTF-8 text, each maximal invalid subpart
// replaced by U+FFFD. With final false, an incomplete character at the end
// is left out; returns how many bytes were consumed.
size_t AppendUtf8Lossy(std::string_view bytes, bool final, std::string* out);

}  // namespace toktier::api
