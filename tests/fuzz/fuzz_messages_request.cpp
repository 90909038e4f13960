// An Anthropic /v1/messages or count_tokens body (untrusted client bytes,
// api/messages_request.h): it maps or is a 400 that says why; a mapped
// request is a chat request the chat path accepts, whose conversation
// builds for either content format and whose engine bodies are one JSON
// object in every chat_forward mode. Inputs expand deep nesting markers
// (fuzz_support.h ExpandNesting): past the bound is a 400.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "api/api.h"

using namespace toktier::api;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool count_tokens = data[0] & 1;
  MessagesOptions options;
  options.drop_billing_header = data[0] & 2;
  const std::string body = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data) + 1, size - 1});
  MessagesRequest req;
  RequestError err;
  if (!ParseMessagesRequest(body, options, count_tokens, &req, &err)) {
    toktier::fuzz::Check(!err.message.empty() && err.status == 400, "fuzz_messages_request", "a refusal is a 400 that says why");
    return 0;
  }
  toktier::fuzz::Check(!JsonNestingExceeds(body, kDefaultJsonMaxDepth), "fuzz_messages_request",
                       "an accepted body is within the nesting bound");
  ChatRequest chat;
  toktier::fuzz::Check(ParseChatRequest(req.chat.dump(), &chat, &err), "fuzz_messages_request",
                       "the mapped request is a chat request");
  for (auto format : {toktier::chat::ContentFormat::kString, toktier::chat::ContentFormat::kOpenAI}) {
    nlohmann::ordered_json conv;
    (void)BuildConversation(req.chat["messages"], format, &conv, &err);
  }
  for (ChatForward mode : {ChatForward::kCompletions, ChatForward::kSglang, ChatForward::kDynamo, ChatForward::kVllm}) {
    ChatForwardPlan plan = PlanChatForward(mode, chat);
    auto j = nlohmann::json::parse(plan.head + "1,2,3" + plan.tail, nullptr, false);
    toktier::fuzz::Check(j.is_object(), "fuzz_messages_request", "the engine's body is one JSON object");
  }
  return 0;
}
