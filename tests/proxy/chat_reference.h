// Helpers of the chat-path tests (chat, messages, responses): a model's
// tokenizer_config.json, the IDs each chat_forward mode puts in the
// engine's request, and the reference IDs of a template rendering
// (@huggingface/jinja, then HF tokenizers, both in Node).
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mock_engine.h"
#include "test_support.h"

namespace toktier::test {

inline nlohmann::ordered_json TokenizerConfig(const std::string& name) {
  auto path = std::filesystem::path(TokenizerPath(name)).parent_path() / "tokenizer_config.json";
  return nlohmann::ordered_json::parse(ReadFile(path.string()).value_or("{}"));
}

inline std::vector<uint32_t> IdsOf(const nlohmann::json& a) {
  std::vector<uint32_t> out;
  for (const auto& x : a) out.push_back(x.get<uint32_t>());
  return out;
}

// The IDs a mode puts in the engine's request.
inline std::vector<uint32_t> ForwardedIds(const std::string& mode, const MockRequest& r) {
  nlohmann::json b = nlohmann::json::parse(r.body);
  if (mode == "completions") return IdsOf(b["prompt"]);
  if (mode == "sglang") return IdsOf(b["input_ids"]);
  if (mode == "vllm") return IdsOf(b["token_ids"]);
  return IdsOf(b["nvext"]["token_data"]);
}

// The reference IDs of `tokenizer`'s model rendering `inputs` (the template
// variables) with its chat template.
inline std::vector<uint32_t> ReferenceChatIds(const nlohmann::ordered_json& inputs, const std::string& tokenizer) {
  const nlohmann::ordered_json cfg = TokenizerConfig(tokenizer);
  auto rendered = RunNodeTool(
      "ref_render.js", nlohmann::ordered_json{{"template", cfg["chat_template"]}, {"inputs", inputs}}.dump() + "\n");
  REQUIRE(rendered.has_value());
  REQUIRE(rendered->size() == 1);
  nlohmann::json text = nlohmann::json::parse(rendered->at(0));
  REQUIRE_MESSAGE(text.is_string(), rendered->at(0));
  auto ids = RunNodeTool("ref_encode.js --tokenizer " + TokenizerPath(tokenizer),
                         nlohmann::json{{"text", text.get<std::string>()}}.dump() + "\n");
  REQUIRE(ids.has_value());
  REQUIRE(ids->size() == 1);
  return IdsOf(nlohmann::json::parse(ids->at(0)));
}

}  // namespace toktier::test
