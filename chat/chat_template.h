// Chat-template rendering: the Jinja subset that Hugging Face chat templates
// use, with the semantics of @huggingface/jinja (the renderer transformers.js
// uses for apply_chat_template), so a prompt rendered here is byte-identical
// to the reference's. Pure: no I/O, no clock, no exceptions escape the API.
//
//   std::unique_ptr<chat::ChatTemplate> tmpl;
//   chat::Status s = chat::ChatTemplate::Compile(source, {}, &tmpl);
//   std::string prompt;
//   if (s.ok()) s = tmpl->Render(inputs, {}, &prompt);
//
// A compiled template is immutable: Render may run on many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/core.h"  // core::Status

namespace toktier::chat {

// Errors are core::Status values (core/core.h) with the renderer's codes:
// kSyntaxError (the template does not parse), kRenderError (evaluation
// failed the way the reference fails: type errors, unknown filter...),
// kRaised (raise_exception(message)), kUnsupported (a feature the reference
// has and this renderer does not: never a different prompt), kLimitExceeded
// (output size, loop iterations or nesting depth over the configured bound),
// kInvalidArgument (bad inputs, e.g. not a JSON object).
using core::Status;
using core::StatusCode;

struct TemplateOptions {
  // transformers and transformers.js compile chat templates with both on: a
  // newline after a block tag is dropped, and spaces/tabs before a block tag
  // at the start of a line are stripped.
  bool trim_blocks = true;
  bool lstrip_blocks = true;
  // Bound on the template source and on block/expression nesting while
  // parsing (a hostile template cannot exhaust the stack).
  size_t max_source_bytes = 1 << 20;
  int max_parse_depth = 256;
};

struct RenderOptions {
  // strftime_now() formats this instant (UTC). Unset: strftime_now is an
  // error (kUnsupported), since the renderer never reads the clock itself.
  std::optional<int64_t> now_unix_seconds;
  // Bounds on a hostile template or input; each overrun is kLimitExceeded.
  size_t max_output_bytes = 64u << 20;  // also bounds every intermediate string/list
  uint64_t max_loop_iterations = 10'000'000;  // for-loop bodies plus list elements built, summed
  int max_call_depth = 128;  // nested macro/caller calls and expression recursion
  // When set, the values the run built (the template's own copy of the
  // inputs: for a long conversation, thousands of nodes) are handed over
  // here instead of freed, so a caller on a latency path frees them later,
  // off that path.
  std::shared_ptr<void>* keep_values = nullptr;
};

// How a template expects a message's content: vLLM's detection
// (content_format.cpp). kOpenAI: it loops over message['content'] parts;
// kString: it reads content as one string (parts are joined by "\n" first).
enum class ContentFormat { kString, kOpenAI };

struct Node;  // the syntax tree's node (private: chat/ast.h)

class ChatTemplate {
 public:
  // Parses `source` once. On error *out is left empty.
  [[nodiscard]] static Status Compile(std::string_view source, const TemplateOptions& options,
                                      std::unique_ptr<ChatTemplate>* out);

  // Renders with `inputs` (a JSON object) as the top-level variables:
  // messages, tools, add_generation_prompt, bos_token, eos_token and the
  // request's chat_template_kwargs merged in. Key order matters (tojson keeps
  // it), hence ordered_json. On error *out is unspecified.
  [[nodiscard]] Status Render(const nlohmann::ordered_json& inputs, const RenderOptions& options,
                              std::string* out) const;
  // The same, taking the inputs' strings instead of copying them (a
  // megabyte conversation is handed to the renderer, not copied into it).
  [[nodiscard]] Status Render(nlohmann::ordered_json&& inputs, const RenderOptions& options, std::string* out) const;

  // The content format this template expects (computed from its syntax tree).
  ContentFormat content_format() const;

  ~ChatTemplate();
  ChatTemplate(const ChatTemplate&) = delete;
  ChatTemplate& operator=(const ChatTemplate&) = delete;

 private:
  struct Impl;
  explicit ChatTemplate(std::unique_ptr<Impl> impl);
  const Node* impl_program() const;  // the syntax tree (content_format.cpp)
  std::unique_ptr<Impl> impl_;
};

// The variables transformers(.js) passes for an OpenAI chat request:
// messages, tools (when present), add_generation_prompt (default true here,
// as servers do), bos_token/eos_token from tokenizer_config.json (a string or
// an object with "content"), then chat_template_kwargs on top.
[[nodiscard]] Status BuildChatInputs(const nlohmann::ordered_json& request,
                                     const nlohmann::ordered_json& tokenizer_config,
                                     nlohmann::ordered_json* inputs);
// The same, moving messages, tools and kwargs out of `request`.
[[nodiscard]] Status BuildChatInputs(nlohmann::ordered_json&& request, const nlohmann::ordered_json& tokenizer_config,
                                     nlohmann::ordered_json* inputs);

}  // namespace toktier::chat
