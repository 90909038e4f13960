// The translation stage between an engine's answer and the client's API: the
// proxy relays the engine's bytes through one ResponseTranslator per request
// whose answer it must rewrite (chat over the engine's completions or
// generate endpoints today; each client API adds its own). Whole answers are
// collected and translated at their end; streams are translated as their
// bytes arrive, in pieces of any size.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "api/chat_response.h"

namespace toktier::api {

class ResponseTranslator {
 public:
  virtual ~ResponseTranslator() = default;
  // True: an event stream, translated piece by piece (the client's head goes
  // out at once). False: a whole answer, translated at its end (the client's
  // head waits for it, so a failure is still an error status).
  virtual bool streaming() const = 0;
  // The engine's next bytes (`last`: its answer ends with them); appends what
  // the client gets to *out. False for malformed engine output (error()
  // says why): the caller cuts the answer off; later calls fail too.
  [[nodiscard]] virtual bool Feed(std::string_view bytes, bool last, std::string* out) = 0;
  virtual const std::string& error() const = 0;
};

// A client API translated from the chat format (Messages, Responses): an
// optional `inner` stage (the chat translator, for engines that answer in
// the completions format) feeds a stream translator `Stream` (Feed, Finish,
// error) or, for a whole answer, `translate` (the chat completion JSON ->
// the client's body), which runs on the whole answer of at most `max_bytes`
// engine bytes.
template <typename Stream>
class ChainedStreamResponse final : public ResponseTranslator {
 public:
  ChainedStreamResponse(std::unique_ptr<ResponseTranslator> inner, Stream stream)
      : inner_(std::move(inner)), tr_(std::move(stream)) {}
  bool streaming() const override { return true; }
  bool Feed(std::string_view bytes, bool last, std::string* out) override {
    if (failed_) return false;
    std::string_view chat = bytes;
    if (inner_) {
      chat_.clear();
      if (!inner_->Feed(bytes, last, &chat_)) return Failed(inner_->error());
      chat = chat_;
    }
    if (!tr_.Feed(chat, out) || (last && !tr_.Finish(out))) return Failed(tr_.error());
    return true;
  }
  const std::string& error() const override { return error_; }

 private:
  bool Failed(const std::string& why) {
    failed_ = true;
    error_ = why;
    return false;
  }

  std::unique_ptr<ResponseTranslator> inner_;
  Stream tr_;
  std::string chat_;  // the inner stage's output for the current piece
  std::string error_;
  bool failed_ = false;
};

template <typename Options>
class ChainedWholeResponse final : public ResponseTranslator {
 public:
  using Translate = core::Status (*)(std::string_view chat_json, const Options& options, std::string* out);
  ChainedWholeResponse(std::unique_ptr<ResponseTranslator> inner, Options options, Translate translate,
                       size_t max_bytes)
      : inner_(std::move(inner)), options_(std::move(options)), translate_(translate), max_bytes_(max_bytes) {}
  bool streaming() const override { return false; }
  bool Feed(std::string_view bytes, bool last, std::string* out) override {
    if (failed_) return false;
    // A whole answer is needed to translate it; bounded like a request body
    // (the engine's bytes: an inner stage's output is bounded by them).
    received_ += bytes.size();
    if (received_ > max_bytes_) return Failed("the answer is larger than limits.body_bytes");
    if (inner_) {
      if (!inner_->Feed(bytes, last, &in_)) return Failed(inner_->error());
    } else {
      in_.append(bytes);
    }
    if (!last) return true;
    core::Status st = translate_(in_, options_, out);
    std::string().swap(in_);
    if (!st.ok()) return Failed(st.message());
    return true;
  }
  const std::string& error() const override { return error_; }

 private:
  bool Failed(const std::string& why) {
    failed_ = true;
    error_ = why;
    return false;
  }

  std::unique_ptr<ResponseTranslator> inner_;
  Options options_;
  Translate translate_;
  size_t max_bytes_;
  size_t received_ = 0;
  std::string in_;
  std::string error_;
  bool failed_ = false;
};

// Chat completions from the engine's completions (or vLLM generate) answer:
// chat.completion.chunk events for `stream`, else one chat.completion whose
// engine answer may be at most `max_whole_bytes` long.
std::unique_ptr<ResponseTranslator> MakeChatTranslator(ChatTranslateOptions options, bool stream,
                                                       size_t max_whole_bytes);

}  // namespace toktier::api
