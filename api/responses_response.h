// Translating an OpenAI chat completions answer into the OpenAI Responses
// API's (POST /v1/responses, what the Codex CLI speaks): a whole
// "chat.completion" body into one "response" object, a stream of
// "chat.completion.chunk" events into the Responses event stream
// (response.created, response.in_progress, per output item its added /
// delta / done events, then response.completed, .incomplete or .failed).
// The proxy maps a Responses request onto its chat path and answers the
// client through these; the semantics follow vLLM's Responses front end
// (build_response_output_items and its simple streaming events) and the
// types and stream accumulator of the `openai` SDK.
// Pure: no I/O, and no exception leaves these functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/response_translator.h"
#include "api/responses_request.h"
#include "core/core.h"

namespace toktier::api {

struct ResponsesTranslateOptions {
  std::string id;              // "resp_..." for the response
  std::string model;           // echoed to the client
  int64_t created_at = 0;      // unix seconds
  uint64_t prompt_tokens = 0;  // the prompt's token count, known to the proxy
  // Request fields the response object echoes (instructions, tools,
  // tool_choice, parallel_tool_calls, temperature, top_p, max_output_tokens,
  // reasoning, store, metadata, previous_response_id, text, truncation,
  // prompt_cache_key, ...; ResponsesRequest::echo). An object, or null for
  // none: a field absent (or null) takes the default the SDK's types allow.
  nlohmann::ordered_json request_echo;
  // The request's namespace tools (ResponsesRequest::namespaced_tools): a
  // call of one is named back as its name plus its namespace.
  NamespacedTools namespaced_tools;
};

// Non-streaming: a chat.completion JSON -> the response object JSON. Output
// items in the order reasoning (message.reasoning_content or .reasoning),
// message (non-empty content), one function_call per tool call (its
// arguments string as it is). Status "completed", or "incomplete" (and the
// last item too) when finish_reason is "length" (max_output_tokens) or
// "content_filter". An error for malformed input: not a JSON object, no
// choices or more than one, fields of the wrong types.
core::Status TranslateChatToResponse(std::string_view chat_json, const ResponsesTranslateOptions& options,
                                     std::string* response_json);

// Streaming: feed the chat.completion.chunk SSE bytes in arbitrary pieces
// (split anywhere, even inside "\n\n" or a UTF-8 character; "\r\n" line
// endings too); the Responses events (`event: TYPE\ndata: JSON\n\n`, with
// sequence numbers from 0) are appended to *out. Items open in the order
// their deltas arrive, a change of kind closing the open one. The end: the
// usage chunk (no choices), [DONE] or Finish closes the open item and sends
// response.completed (or .incomplete) with the whole response object, which
// equals TranslateChatToResponse's for the same answer; at Finish only when
// choice 0 had its finish_reason. A stream that ends before that, or an
// engine error event, gets response.failed (status "failed", the error in
// the response object) instead, so that the client never takes a cut-off
// answer for a whole one. [DONE] is not passed on (Responses streams have
// none). Feed returns false on malformed engine output (every later call
// returns false too).
class ResponsesStreamTranslator {
 public:
  explicit ResponsesStreamTranslator(ResponsesTranslateOptions options);
  ~ResponsesStreamTranslator();
  ResponsesStreamTranslator(ResponsesStreamTranslator&&) noexcept;
  ResponsesStreamTranslator& operator=(ResponsesStreamTranslator&&) noexcept;

  [[nodiscard]] bool Feed(std::string_view bytes, std::string* out);
  // Once, at the end of the engine's stream.
  [[nodiscard]] bool Finish(std::string* out);

  const std::string& error() const;  // why Feed or Finish returned false

 private:
  struct State;  // the SSE parser, the items so far and the answer's end
  std::unique_ptr<State> state_;
};

// The ResponseTranslator for /v1/responses: `inner` (may be null) translates
// the engine's bytes first (MakeChatTranslator for an engine answering in
// the completions format); its output, a chat completion, feeds the
// Responses stage. A whole answer may be at most `max_whole_bytes` of engine
// bytes. Error answers need no translation: /v1/responses errors are the
// chat API's {"error": {...}} (ErrorJson).
std::unique_ptr<ResponseTranslator> MakeResponsesTranslator(std::unique_ptr<ResponseTranslator> inner,
                                                            ResponsesTranslateOptions options, bool stream,
                                                            size_t max_whole_bytes);

}  // namespace toktier::api
