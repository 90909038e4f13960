// Streaming token-ID decoding (api/token_text.h).
#include "api/token_text.h"

#include <algorithm>

namespace toktier::api {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The range the second byte of a sequence with lead byte `lead` must fall in
// (Unicode's table of well-formed UTF-8); later bytes are 80..BF.
void SecondByteRange(unsigned char lead, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xBF;
  if (lead == 0xE0) *lo = 0xA0;
  if (lead == 0xED) *hi = 0x9F;
  if (lead == 0xF0) *lo = 0x90;
  if (lead == 0xF4) *hi = 0x8F;
}

size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;  // never a lead byte
}

}  // namespace

size_t AppendUtf8Lossy(std::string_view bytes, bool final, std::string* out) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0, run = 0;  // [run, i): valid text not yet appended
  auto flush = [&] {
    out->append(bytes.substr(run, i - run));
  };
  while (i < n) {
    const unsigned char lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const size_t len = SequenceLength(lead);
    size_t fit = 1;  // bytes of the sequence that are well formed so far
    if (len > 0) {
      unsigned char lo, hi;
      SecondByteRange(lead, &lo, &hi);
      while (fit < len && i + fit < n) {
        const unsigned char c = s[i + fit];
        if (c < lo || c > hi) break;
        ++fit;
        lo = 0x80;
        hi = 0xBF;
      }
      if (fit == len) {
        i += len;
        continue;
      }
      if (i + fit == n && !final) {  // a character still arriving
        flush();
        return i;
      }
    }
    flush();
    out->append(kReplacement);
    i += fit;
    run = i;
  }
  flush();
  return n;
}

TokenTextStream::TokenTextStream(std::shared_ptr<const core::Tokenizer> tokenizer, TokenTextOptions options)
    : tokenizer_(std::move(tokenizer)), options_(std::move(options)) {
  options_.stop.erase(std::remove(options_.stop.begin(), options_.stop.end(), std::string()), options_.stop.end());
  for (const auto& s : options_.stop) longest_stop_ = std::max(longest_stop_, s.size());
}

bool TokenTextStream::Feed(std::span<const uint32_t> ids, std::string* out) {
  if (stopped_) return true;
  const size_t vocab = tokenizer_->vocab_size();
  for (uint32_t id : ids) {
    if (id >= vocab) return false;
  }
  for (uint32_t id : ids) {
    if (options_.skip_special_tokens && tokenizer_->IsSpecialToken(id)) continue;
    bytes_ += tokenizer_->TokenBytes(id);
  }
  const size_t used = AppendUtf8Lossy(bytes_, /*final=*/false, &pending_);
  bytes_.erase(0, used);
  Release(out, /*final=*/false);
  return true;
}

void TokenTextStream::Finish(std::string* out) {
  if (!stopped_) {
    AppendUtf8Lossy(bytes_, /*final=*/true, &pending_);
    bytes_.clear();
  }
  Release(out, /*final=*/true);
}

void TokenTextStream::Release(std::string* out, bool final) {
  if (stopped_) {
    pending_.clear();
    return;
  }
  // The stop string that begins first wins (vLLM checks each new piece of
  // text as it comes, so a later one cannot have ended the output).
  size_t cut = std::string::npos, cut_len = 0;
  const std::string* matched = nullptr;
  for (const auto& stop : options_.stop) {
    size_t at = pending_.find(stop);
    if (at != std::string::npos && (at < cut || (at == cut && stop.size() > cut_len))) {
      cut = at;
      cut_len = stop.size();
      matched = &stop;
    }
  }
  if (matched) {
    matched_stop_ = *matched;
    out->append(pending_, 0, options_.include_stop_str_in_output ? cut + cut_len : cut);
    pending_.clear();
    bytes_.clear();
    stopped_ = true;
    return;
  }
  size_t keep = final || longest_stop_ == 0 ? 0 : std::min(pending_.size(), longest_stop_ - 1);
  size_t give = pending_.size() - keep;
  // Held text starts on a character boundary.
  while (give > 0 && give < pending_.size() && (static_cast<unsigned char>(pending_[give]) & 0xC0) == 0x80) --give;
  out->append(pending_, 0, give);
  pending_.erase(0, give);
}

}  // namespace toktier::api
