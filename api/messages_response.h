// Translating an OpenAI chat completions answer into the Anthropic Messages
// API's (POST /v1/messages): a whole "chat.completion" body into one
// "message" object, a stream of "chat.completion.chunk" events into
// Anthropic's named events (message_start, ping, content_block_start /
// _delta / _stop per block, message_delta, message_stop). The proxy maps a
// Messages request onto its chat path and answers the client through these;
// the semantics follow vLLM's Anthropic front end (messages_full_converter,
// message_stream_converter) and Anthropic's documented event grammar.
// Pure: no I/O, and no exception leaves these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/response_translator.h"
#include "core/core.h"

namespace toktier::api {

struct MessagesTranslateOptions {
  std::string id;              // "msg_..." for the message
  std::string model;           // echoed to the client
  uint64_t prompt_tokens = 0;  // the prompt's token count, known to the proxy (message_start's usage)
  std::vector<std::string> stop_sequences;  // the request's stop_sequences
};

// Non-streaming: a chat.completion JSON -> the Anthropic message JSON. Content
// blocks in the order thinking (message.reasoning_content or .reasoning),
// text, tool_use (one per call, its arguments string parsed into "input").
// An error for malformed input: not a JSON object, no choices or more than
// one, fields of the wrong types, arguments that are not a JSON object.
core::Status TranslateChatToMessage(std::string_view chat_json, const MessagesTranslateOptions& options,
                                    std::string* message_json);

// Streaming: feed the chat.completion.chunk SSE bytes in arbitrary pieces
// (split anywhere, even inside "\n\n" or a UTF-8 character; "\r\n" line
// endings too); the Anthropic events are appended to *out. Blocks open in
// the order their deltas arrive, a change of kind closing the open one.
// The end: the usage chunk (no choices), [DONE] or Finish closes the open
// block and sends message_delta once; message_stop follows at [DONE], or at
// Finish when choice 0 had its finish_reason (or the usage chunk came). A
// stream that ends before that gets an `error` event instead, so that the
// client never takes a cut-off answer for a whole one. An engine error event
// becomes an `error` event and ends the stream. Feed returns false on
// malformed engine output (every later call returns false too).
class MessagesStreamTranslator {
 public:
  explicit MessagesStreamTranslator(MessagesTranslateOptions options);
  ~MessagesStreamTranslator();
  MessagesStreamTranslator(MessagesStreamTranslator&&) noexcept;
  MessagesStreamTranslator& operator=(MessagesStreamTranslator&&) noexcept;

  [[nodiscard]] bool Feed(std::string_view bytes, std::string* out);
  // Once, at the end of the engine's stream.
  [[nodiscard]] bool Finish(std::string* out);

  const std::string& error() const;  // why Feed or Finish returned false

 private:
  struct State;  // the SSE parser, the open block and the answer's end so far
  std::unique_ptr<State> state_;
};

// The ResponseTranslator for /v1/messages: `inner` (may be null) translates
// the engine's bytes first (MakeChatTranslator for an engine answering in
// the completions format); its output, a chat completion, feeds the Anthropic
// stage. A whole answer may be at most `max_whole_bytes` of engine bytes.
std::unique_ptr<ResponseTranslator> MakeMessagesTranslator(std::unique_ptr<ResponseTranslator> inner,
                                                           MessagesTranslateOptions options, bool stream,
                                                           size_t max_whole_bytes);

// Anthropic's error type for an HTTP status: 400 invalid_request_error, 401
// authentication_error, 402 billing_error, 403 permission_error, 404
// not_found_error, 413 request_too_large, 429 rate_limit_error, 504
// timeout_error, 529 overloaded_error; other 4xx invalid_request_error,
// anything else api_error.
std::string_view AnthropicErrorType(int status);

// {"type":"error","error":{"type":AnthropicErrorType(status),"message":message}}.
std::string AnthropicErrorJson(int status, std::string_view message);

// An engine's error answer -> the Anthropic error body, keeping its message:
// OpenAI's {"error":{"message":...}}, {"error":"..."}, {"message":...} or
// {"detail":"..."}; any other body is the message itself (its first 4 KiB).
std::string AnthropicErrorFromEngine(int status, std::string_view engine_body);

// A whole-answer translator for an engine's error answer (status >= 400)
// to a /v1/messages request: AnthropicErrorFromEngine of its body (of which
// at most `max_whole_bytes` are read for the message).
std::unique_ptr<ResponseTranslator> MakeAnthropicErrorTranslator(int status, size_t max_whole_bytes);

}  // namespace toktier::api
