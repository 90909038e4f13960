// Translating an engine's /v1/completions response (object "text_completion"),
// or vLLM's /inference/v1/generate response (token IDs, decoded here), into
// the OpenAI /v1/chat/completions response: "chat.completion" for a
// whole body, "chat.completion.chunk" SSE events for a stream. The proxy
// renders a chat request into a prompt itself and sends token IDs to the
// engine's completions endpoint; these functions answer the client in the
// chat format, splitting each choice's generated text into reasoning
// (<think>...</think>), content and tool calls in the model family's format.
// Pure: no I/O, and no exception leaves these functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "api/token_text.h"

namespace toktier::api {

// How the model writes tool calls into its text (only parsed when the
// request had tools).
enum class ToolCallFormat {
  kNone,
  kHermes,      // Qwen2.5/Qwen3: <tool_call>{"name", "arguments"}</tool_call>, any number
  kLlama3Json,  // Llama 3.1/3.2: the whole content is {"name", "parameters"}, several joined by ';'
  kDeepSeekV3,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ... <｜tool▁calls▁end｜>
};

struct ChatTranslateOptions {
  std::string id;          // the chat response's "id" ("chatcmpl-..."), used for every chunk
  int64_t created = 0;     // "created"
  std::string model;       // "model" echoed to the client (the client's name, not the engine's)
  ToolCallFormat tools = ToolCallFormat::kNone;
  bool reasoning = false;  // Qwen3-style <think>...</think> -> message.reasoning_content
  // The rendered prompt already ends inside "<think>" (DeepSeek-R1, QwQ
  // templates): the text is reasoning from its first byte until "</think>".
  // Without it such text is still split at "</think>", but a stream must
  // then hold everything back until "</think>" or the end decides.
  bool think_open_in_prompt = false;
  // The engine answers in token IDs (chat_forward "vllm": vLLM's
  // /inference/v1/generate): each choice's "token_ids" are decoded with this
  // tokenizer and `decode` instead of reading its "text". Null: text.
  std::shared_ptr<const core::Tokenizer> decode_with;
  TokenTextOptions decode;
};

// Non-streaming: the engine's completion JSON -> the chat completion JSON.
// An error for malformed input (not a JSON object, no "choices" array, a
// choice whose fields have the wrong types).
core::Status TranslateCompletion(std::string_view completion_json, const ChatTranslateOptions& options,
                                 std::string* chat_json);

// Streaming: feed the engine's SSE bytes in arbitrary pieces (an event may be
// split anywhere, even inside "\n\n" or inside a UTF-8 character);
// translated SSE bytes are appended to *out. Feed returns false on malformed
// engine output (the caller then cuts the stream off; every later call
// returns false too). Finish() is called once at the end of the engine's
// stream: it flushes text still held back and passes on no [DONE] that the
// engine did not send.
class ChatStreamTranslator {
 public:
  explicit ChatStreamTranslator(ChatTranslateOptions options);
  ~ChatStreamTranslator();
  ChatStreamTranslator(ChatStreamTranslator&&) noexcept;
  ChatStreamTranslator& operator=(ChatStreamTranslator&&) noexcept;

  [[nodiscard]] bool Feed(std::string_view bytes, std::string* out);
  [[nodiscard]] bool Finish(std::string* out);

  bool saw_done() const { return saw_done_; }
  const std::string& error() const { return error_; }  // why Feed or Finish returned false

 private:
  struct ChoiceStream;  // one choice's text splitter and what was sent for it

  bool HandleLine(std::string_view line, std::string* out);
  bool DispatchEvent(std::string* out);
  bool HandleEngineEvent(const std::string& data, std::string* out);
  ChoiceStream& StreamFor(int64_t index, std::string* out);
  void FlushUnfinished(std::string* out);
  bool Fail(std::string message);

  ChatTranslateOptions options_;
  std::string line_buffer_;   // bytes after the last complete line
  size_t line_scanned_ = 0;   // line_buffer_[0, line_scanned_) holds no '\n'
  std::string event_data_;    // the current event's data lines, joined by '\n'
  bool has_event_data_ = false;
  bool saw_done_ = false;
  bool failed_ = false;
  std::string error_;
  std::map<int64_t, std::unique_ptr<ChoiceStream>> choices_;  // by choice index
};

}  // namespace toktier::api
