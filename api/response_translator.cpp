// The chat completions translator (api/response_translator.h) over
// TranslateCompletion and ChatStreamTranslator (api/chat_response.h).
#include "api/response_translator.h"

#include <utility>

namespace toktier::api {
namespace {

class ChatStreamResponse final : public ResponseTranslator {
 public:
  explicit ChatStreamResponse(ChatTranslateOptions options) : tr_(std::move(options)) {}
  bool streaming() const override { return true; }
  bool Feed(std::string_view bytes, bool last, std::string* out) override {
    return tr_.Feed(bytes, out) && (!last || tr_.Finish(out));
  }
  const std::string& error() const override { return tr_.error(); }

 private:
  ChatStreamTranslator tr_;
};

class ChatWholeResponse final : public ResponseTranslator {
 public:
  ChatWholeResponse(ChatTranslateOptions options, size_t max_bytes)
      : options_(std::move(options)), max_bytes_(max_bytes) {}
  bool streaming() const override { return false; }
  bool Feed(std::string_view bytes, bool last, std::string* out) override {
    if (failed_) return false;
    // A whole answer is needed to translate it; bounded like a request body.
    if (in_.size() + bytes.size() > max_bytes_) {
      failed_ = true;
      error_ = "the answer is larger than limits.body_bytes";
      return false;
    }
    in_.append(bytes);
    if (!last) return true;
    core::Status st = TranslateCompletion(in_, options_, out);
    std::string().swap(in_);
    failed_ = !st.ok();
    if (failed_) error_ = st.message();
    return !failed_;
  }
  const std::string& error() const override { return error_; }

 private:
  ChatTranslateOptions options_;
  size_t max_bytes_;
  std::string in_;
  std::string error_;
  bool failed_ = false;
};

}  // namespace

std::unique_ptr<ResponseTranslator> MakeChatTranslator(ChatTranslateOptions options, bool stream,
                                                       size_t max_whole_bytes) {
  if (stream) return std::make_unique<ChatStreamResponse>(std::move(options));
  return std::make_unique<ChatWholeResponse>(std::move(options), max_whole_bytes);
}

}  // namespace toktier::api
