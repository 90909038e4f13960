// A /v1/chat/completions body (untrusted client bytes, api/chat_request.h):
// it parses or is a 400; a parsed request's body for the engine, in every
// chat_forward mode, is one JSON object once the IDs are spliced in, and its
// vllm-mode decoding options are read without failing. Inputs expand deep
// nesting markers (fuzz_support.h ExpandNesting): a body nested past the
// bound is a 400, and the copies and dumps of an accepted one stay within
// the stack. The fast body parse (api/json_tree.h) is checked against
// nlohmann: an accepted body's tree is nlohmann's, and the fast dump writes
// nlohmann's dump of it byte for byte.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "api/api.h"
#include "api/json_tree.h"

using namespace toktier::api;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data), size});
  ChatRequest req;
  RequestError err;
  if (!ParseChatRequest(body, &req, &err)) {
    toktier::fuzz::Check(!err.message.empty(), "fuzz_chat_request", "a rejected body says why");
    return 0;
  }
  toktier::fuzz::Check(!JsonNestingExceeds(body, kDefaultJsonMaxDepth), "fuzz_chat_request",
                       "an accepted body is within the nesting bound");
  toktier::fuzz::Check(req.body == nlohmann::ordered_json::parse(body, nullptr, false), "fuzz_chat_request",
                       "the parsed tree is the one nlohmann builds");
  toktier::fuzz::Check(DumpJsonTree(req.body) == req.body.dump(), "fuzz_chat_request",
                       "the fast dump is nlohmann's dump");
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
