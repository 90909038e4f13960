// A /v1/chat/completions body (untrusted client bytes, proxy/chat_forward.h):
// it parses or is a 400; a parsed request's body for the engine, in every
// chat_forward mode, is one JSON object once the IDs are spliced in, and its
// vllm-mode decoding options are read without failing.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "proxy/chat_forward.h"

using namespace toktier::proxy;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  ChatRequest req;
  RequestError err;
  if (!ParseChatRequest(body, &req, &err)) {
    toktier::fuzz::Check(!err.message.empty(), "fuzz_chat_request", "a rejected body says why");
    return 0;
  }
  for (ChatForward mode : {ChatForward::kCompletions, ChatForward::kSglang, ChatForward::kDynamo, ChatForward::kVllm}) {
    (void)ChatUnsupported(mode, req);
    ChatForwardPlan plan = PlanChatForward(mode, req);
    auto j = nlohmann::json::parse(plan.head + "1,2,3" + plan.tail, nullptr, false);
    toktier::fuzz::Check(j.is_object(), "fuzz_chat_request", "the engine's body is one JSON object");
  }
  // vllm mode: the decoding options are read from any parsed body.
  (void)ChatDecodeOptions(req);
  return 0;
}
