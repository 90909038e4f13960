// Chat-template compiler and renderer: any template bytes compile or fail
// with a status, and render within the configured bounds, never crash.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "chat/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json inputs = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": [{"type": "text", "text": "héllo 😀"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
      {"role": "tool", "content": "ok"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false})");
  std::string_view source(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<toktier::chat::ChatTemplate> tmpl;
  toktier::chat::Status s = toktier::chat::ChatTemplate::Compile(source, toktier::chat::TemplateOptions{}, &tmpl);
  if (!s.ok()) {
    if (tmpl) std::abort();  // a failed compile leaves nothing behind
    return 0;
  }
  toktier::chat::RenderOptions options;
  options.now_unix_seconds = 1764581400;
  options.max_output_bytes = 1 << 20;
  options.max_loop_iterations = 200000;
  std::string out;
  s = tmpl->Render(inputs, options, &out);
  if (s.ok() && out.size() > options.max_output_bytes) std::abort();
  return 0;
}
