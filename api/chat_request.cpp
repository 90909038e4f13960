// The request side of chat completions through the token tier
// (api/chat_request.h, docs/chat.md).
#include "api/chat_request.h"

#include "api/chat_conversation.h"
#include "api/json_tree.h"


namespace toktier::api {

using nlohmann::ordered_json;

namespace {

// tokenizer_config.json's chat_template: a string, or a list of
// {"name", "template"} where "default" is the one chat requests use.
std::string TemplateSource(const ordered_json& cfg) {
  auto it = cfg.find("chat_template");
  if (it == cfg.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    for (const auto& t : *it) {
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string()) {
        return t["template"].get<std::string>();
      }
    }
  }
  return "";
}

// vLLM's SamplingParams fields a chat request may carry, for
// /inference/v1/generate (logprobs and n are not taken: ChatUnsupported).
constexpr const char* kSamplingFields[] = {
    "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "ignore_eos", "min_tokens", "skip_special_tokens",
    "include_stop_str_in_output"};

// Sampling fields a /v1/completions request understands (OpenAI's and
// vLLM's extras); everything else of a chat request is about messages,
// tools or the response shape, which the proxy handles itself.
constexpr const char* kCompletionFields[] = {
    "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "seed", "presence_penalty",
    "frequency_penalty", "logit_bias", "user", "top_k", "min_p", "repetition_penalty", "ignore_eos", "min_tokens",
    "stop_token_ids", "include_stop_str_in_output", "skip_special_tokens", "priority",
    // Engine extensions a client may rely on: vLLM's return_token_ids,
    // llama.cpp server's cache_prompt.
    "return_token_ids", "cache_prompt"};

// `dumped` is a dumped JSON object; returns it with `,"key":` in place of
// its closing brace (the value and "}" follow).
std::string OpenField(std::string dumped, std::string_view key) {
  dumped.pop_back();  // '}'
  if (dumped.size() > 1) dumped += ',';
  dumped += '"';
  dumped += key;
  dumped += "\":";
  return dumped;
}

// The same with an ID list opened: the IDs and "]}" follow.
std::string OpenIdList(std::string dumped, std::string_view key) { return OpenField(std::move(dumped), key) + '['; }

}  // namespace

core::Status CompileChatTemplate(std::string_view tokenizer_config_json, const std::string& source_name,
                                 ChatModel* out) {
  using core::Status;
  out->tokenizer_config = ordered_json::parse(tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
  if (out->tokenizer_config.is_discarded() || !out->tokenizer_config.is_object()) {
    return Status::Error(source_name + ": not a JSON object");
  }
  std::string source = TemplateSource(out->tokenizer_config);
  if (source.empty()) return Status::Error(source_name + ": no chat_template");
  Status s = chat::ChatTemplate::Compile(source, {}, &out->tmpl);
  if (!s.ok()) return Status::Error(s.code(), source_name + ": chat template: " + s.ToString());
  return Status::Ok();
}

bool ParseChatRequest(std::string_view body, ChatRequest* out, RequestError* error, size_t max_depth) {
  const JsonParseOutcome parsed = ParseBoundedJson(body, max_depth, &out->body);
  if (parsed == JsonParseOutcome::kTooDeep) {
    error->message = TooDeepMessage(max_depth);
    return false;
  }
  if (parsed != JsonParseOutcome::kOk || !out->body.is_object()) {
    error->message = "The request body must be one JSON object.";
    return false;
  }
  const auto& b = out->body;
  auto model = b.find("model");
  if (model == b.end() || !model->is_string()) {
    error->message = "'model' must be a string.";
    error->param = "model";
    return false;
  }
  out->model = model->get<std::string>();
  auto messages = b.find("messages");
  if (messages == b.end() || !messages->is_array() || messages->empty()) {
    error->message = "'messages' must be a non-empty array.";
    error->param = "messages";
    return false;
  }
  for (const auto& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      error->message = "every message must be an object with a string 'role'.";
      error->param = "messages";
      return false;
    }
  }
  if (auto s = b.find("stream"); s != b.end()) {
    if (!s->is_boolean() && !s->is_null()) {
      error->message = "'stream' must be a boolean.";
      error->param = "stream";
      return false;
    }
    out->stream = s->is_boolean() && s->get<bool>();
  }
  if (auto effort = b.find("reasoning_effort"); effort != b.end() && !effort->is_null() && !effort->is_string()) {
    error->message = "'reasoning_effort' must be a string.";
    error->param = "reasoning_effort";
    return false;
  }
  auto tools = b.find("tools");
  out->has_tools = tools != b.end() && tools->is_array() && !tools->empty();
  return true;
}

std::string ChatUnsupported(ChatForward mode, const ChatRequest& req) {
  const auto& b = req.body;
  if (auto rf = b.find("response_format"); rf != b.end() && !rf->is_null()) {
    // Compared, not read with value(): a "type" that is not a string would throw.
    auto type = rf->is_object() ? rf->find("type") : rf->end();
    if (!(rf->is_object() && type != rf->end() && *type == "text")) return "chat_response_format";
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null()) {
    if (!(tc->is_string() && (*tc == "auto" || *tc == "none"))) return "chat_tool_choice";
  }
  if (mode == ChatForward::kCompletions || mode == ChatForward::kVllm) {
    // Chat logprobs have their own shape; the engine would answer in the
    // completions one (vLLM's generate: "token_id:N" tokens).
    if (auto lp = b.find("logprobs"); lp != b.end() && lp->is_boolean() && lp->get<bool>()) return "chat_logprobs";
    if (auto n = b.find("n"); n != b.end() && !(n->is_number_integer() && n->get<int64_t>() == 1) && !n->is_null()) {
      return "chat_n";
    }
  }
  if (mode == ChatForward::kVllm) {
    // vLLM's SamplingParams takes a bias per integer ID; the chat request's
    // keys are strings.
    if (auto lb = b.find("logit_bias"); lb != b.end() && !lb->is_null() && !lb->empty()) return "chat_logit_bias";
  }
  return "";
}

namespace {

// What a render leaves behind: trees whose strings were moved on but whose
// nodes (thousands, for a long conversation) are still to be freed.
struct RenderScratch {
  ordered_json view = ObjectWithRoom(4);
  ordered_json inputs;
  ordered_json taken_messages;   // the request's own, emptied
  std::shared_ptr<void> values;  // the template's values
};

// `taken`: the request's own messages, given away (moved into the
// conversation), or null to copy them from `req.body`. `leftovers`: when
// set, receives what the render leaves behind instead of freeing it.
chat::Status Render(const ChatModel& model, const ChatRequest& req, ordered_json* taken, int64_t now_unix_seconds,
                    std::string* prompt, std::shared_ptr<void>* leftovers = nullptr) {
  auto scratch = std::make_shared<RenderScratch>();
  // What the template sees is what vLLM passes it (api/chat_conversation.h),
  // not the request's own JSON: parts joined or kept by the template's
  // content format, tool-call arguments as values, tools as model_dump()s.
  const auto& b = req.body;
  ordered_json& view = scratch->view;
  RequestError err;
  auto messages = b.find("messages");
  if (messages == b.end()) return chat::Status::Error(core::StatusCode::kInvalidArgument, "no messages");
  const chat::ContentFormat format = model.tmpl ? model.tmpl->content_format() : chat::ContentFormat::kString;
  const bool built = taken ? BuildConversation(std::move(*taken), format, &view["messages"], &err)
                           : BuildConversation(*messages, format, &view["messages"], &err);
  if (!built) return chat::Status::Error(core::StatusCode::kInvalidArgument, err.message);
  if (auto t = b.find("tools"); t != b.end() && !t->is_null()) {
    if (!BuildToolDicts(*t, &view["tools"], &err)) return chat::Status::Error(core::StatusCode::kInvalidArgument, err.message);
  }
  for (const char* k : {"add_generation_prompt", "chat_template_kwargs"}) {
    if (auto it = b.find(k); it != b.end()) view[k] = *it;
  }
  if (auto effort = b.find("reasoning_effort"); effort != b.end() && !effort->is_null()) {
    if (!effort->is_string()) {  // ParseChatRequest refuses it; a caller that skipped it gets this
      return chat::Status::Error(core::StatusCode::kInvalidArgument, "reasoning_effort: must be a string");
    }
    ordered_json& kwargs = view["chat_template_kwargs"];
    if (!kwargs.is_object()) kwargs = ordered_json::object();
    ApplyReasoningEffort(effort->get<std::string>(), &kwargs);
  }
  // The view and the inputs are this function's own: each stage hands its
  // strings to the next (one copy of the conversation in all, or none).
  ordered_json& inputs = scratch->inputs;
  chat::Status s = chat::BuildChatInputs(std::move(view), model.tokenizer_config, &inputs);
  if (!s.ok()) return s;
  chat::RenderOptions ro;
  ro.now_unix_seconds = now_unix_seconds;
  if (leftovers) ro.keep_values = &scratch->values;
  s = model.tmpl->Render(std::move(inputs), ro, prompt);
  if (leftovers) {
    if (taken) scratch->taken_messages = std::move(*taken);
    *leftovers = std::move(scratch);
  }
  return s;
}

}  // namespace

chat::Status RenderChatPrompt(const ChatModel& model, const ChatRequest& req, int64_t now_unix_seconds,
                              std::string* prompt) {
  return Render(model, req, nullptr, now_unix_seconds, prompt);
}

chat::Status RenderChatPromptTakingMessages(const ChatModel& model, ChatRequest* req, int64_t now_unix_seconds,
                                            std::string* prompt, std::shared_ptr<void>* leftovers) {
  auto messages = req->body.find("messages");
  if (messages == req->body.end()) return chat::Status::Error(core::StatusCode::kInvalidArgument, "no messages");
  return Render(model, *req, &*messages, now_unix_seconds, prompt, leftovers);
}

ChatForwardPlan PlanChatForward(ChatForward mode, const ChatRequest& req) {
  ChatForwardPlan plan;
  const auto& b = req.body;
  if (mode == ChatForward::kCompletions) {
    plan.target = "/v1/completions";
    ordered_json c = ordered_json::object();
    c["model"] = req.model;
    for (const char* k : kCompletionFields) {
      if (auto it = b.find(k); it != b.end()) c[k] = *it;
    }
    if (auto it = b.find("max_completion_tokens"); it != b.end() && !c.contains("max_tokens")) c["max_tokens"] = *it;
    // A chat request without a limit generates to the end of the context; a
    // completions request without one stops after 16 tokens (vLLM), so the
    // limit is made explicit: null = the rest of the context.
    if (!c.contains("max_tokens")) c["max_tokens"] = nullptr;
    plan.head = OpenIdList(c.dump(), "prompt");
    plan.tail = "]}";
    return plan;
  }
  if (mode == ChatForward::kVllm) {
    // Tokens in, tokens out (docs/chat.md): the sampling parameters in their
    // own object; the answer's IDs are decoded by the proxy.
    plan.target = "/inference/v1/generate";
    ordered_json sp = ordered_json::object();
    for (const char* k : kSamplingFields) {
      if (auto it = b.find(k); it != b.end()) sp[k] = *it;
    }
    if (auto it = b.find("max_completion_tokens"); it != b.end() && !it->is_null()) sp["max_tokens"] = *it;
    if (auto it = b.find("max_tokens"); it != b.end() && !sp.contains("max_tokens")) sp["max_tokens"] = *it;
    // Absent: to the end of the context, as a chat request means (an older
    // vLLM would stop a generate request after 16 tokens).
    if (!sp.contains("max_tokens")) sp["max_tokens"] = nullptr;
    ordered_json g = ordered_json::object();
    g["model"] = req.model;
    g["sampling_params"] = std::move(sp);
    g["stream"] = req.stream;
    if (auto it = b.find("stream_options"); it != b.end()) g["stream_options"] = *it;
    if (auto it = b.find("priority"); it != b.end()) g["priority"] = *it;
    if (auto it = b.find("cache_salt"); it != b.end()) g["cache_salt"] = *it;
    plan.head = OpenIdList(g.dump(), "token_ids");
    plan.tail = "]}";
    return plan;
  }
  plan.target = "/v1/chat/completions";
  // The body less one key, dumped without a copy of the (large) messages.
  if (mode == ChatForward::kSglang) {
    // SGLang keeps `messages` (stop words, tool-call parsing) and uses
    // input_ids for the prompt.
    plan.head = OpenIdList(DumpJsonTree(b, "input_ids"), "input_ids");
    plan.tail = "]}";
    return plan;
  }
  // Dynamo: nvext.token_data, beside whatever else the client put in nvext.
  ordered_json nvext = ordered_json::object();
  if (auto it = b.find("nvext"); it != b.end() && it->is_object()) nvext = *it;
  nvext.erase("token_data");
  plan.head = OpenField(DumpJsonTree(b, "nvext"), "nvext") + OpenIdList(nvext.dump(), "token_data");
  plan.tail = "]}}";
  return plan;
}

ordered_json ChatGuardCanary(const std::string& model) {
  return ordered_json{
      {"model", model},
      {"messages",
       {{{"role", "system"}, {"content", "You are a careful coding assistant."}},
        {{"role", "user"}, {"content", "Rename caf\u00e9 to cafe in main.py, \u65e5\u672c\u8a9e comments kept."}},
        {{"role", "assistant"}, {"content", "Done: 2 lines changed.\n\n```diff\n-caf\u00e9 = 1\n+cafe = 1\n```"}},
        {{"role", "user"}, {"content", "  Now run the tests\tplease.  "}}}}};
}

TokenTextOptions ChatDecodeOptions(const ChatRequest& req) {
  TokenTextOptions o;
  const auto& b = req.body;
  if (auto it = b.find("stop"); it != b.end()) {
    if (it->is_string()) o.stop.push_back(it->get<std::string>());
    if (it->is_array()) {
      for (const auto& s : *it) {
        if (s.is_string()) o.stop.push_back(s.get<std::string>());
      }
    }
  }
  if (auto it = b.find("include_stop_str_in_output"); it != b.end() && it->is_boolean()) {
    o.include_stop_str_in_output = it->get<bool>();
  }
  if (auto it = b.find("skip_special_tokens"); it != b.end() && it->is_boolean()) {
    o.skip_special_tokens = it->get<bool>();
  }
  return o;
}

}  // namespace toktier::api
