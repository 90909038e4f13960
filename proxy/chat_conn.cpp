// A connection's /v1/chat/completions (http_conn.h, docs/chat.md): the chat
// template renders the conversation, the rendered prompt takes the same
// token-state path as a completions prompt (a session per conversation,
// repair of the edited tail), and the IDs go to the engine in the model's
// chat_forward mode. In "completions" and "vllm" modes the engine's answer is
// translated back to the chat format as it is relayed (an
// api::ResponseTranslator, which upstream.cpp feeds).
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <xxhash.h>

#include "proxy/http_conn.h"

namespace toktier::proxy {

namespace asio = boost::asio;
namespace http = boost::beast::http;

namespace {

// "chatcmpl-" and 32 hex digits: 64 random bits per process (a client
// cannot guess another's ids) mixed with a per-request counter.
std::string ChatCompletionId(uint64_t counter) {
  static const uint64_t process_key = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  char buf[48];
  std::snprintf(buf, sizeof buf, "chatcmpl-%016llx%016llx", static_cast<unsigned long long>(process_key),
                static_cast<unsigned long long>(XXH3_64bits_withSeed(&counter, sizeof counter, process_key)));
  return buf;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void HttpConn::HandleChat() {
  auto& req = parser_->get();
  rq_->body = std::make_shared<std::string>(std::move(req.body()));
  // A model not configured for the token path: relayed byte for byte, as
  // every other /v1/ request (the engine judges the body).
  rq_->model = ModelOfJsonBody(*rq_->body);  // also routes a passthrough to the model's pool
  // One rule for every API the proxy reads (completions answers the same):
  // a body that is not UTF-8 is a 400, whatever its model. ModelOfJsonBody
  // validates UTF-8, so only a body it could not read is checked again;
  // such a body used to go on as text.
  if (rq_->model.empty()) {
    if (size_t bad = core::FindInvalidUtf8(*rq_->body); bad != std::string::npos) {
      return SendError(Endpoint::kChat, ErrorReply::Client(400, "The request body is not valid UTF-8 (byte offset " +
                                                                    std::to_string(bad) + ")."));
    }
  }
  ModelRuntime* target = srv_->service.FindModel(rq_->model);
  if (!target || target->chat->mode == ChatForward::kText) {
    rq_->endpoint = Endpoint::kPassthrough;
    return Passthrough("");
  }
  rq_->endpoint = Endpoint::kChat;
  auto chat = std::make_shared<ChatRequest>();
  RequestError err;
  bool parsed = false;
  try {
    parsed = ParseChatRequest(*rq_->body, chat.get(), &err, cfg().json_max_depth);
  } catch (const std::exception& e) {
    err.message = std::string("The request body could not be read: ") + e.what();
  }
  rq_->t_parsed = Clock::now();
  if (!parsed) return SendError(Endpoint::kChat, ErrorReply{std::move(err)});
  rq_->model = chat->model;
  ModelRuntime* model = srv_->service.FindModel(chat->model);
  // Only a body with two "model" fields reads differently in the two parsers: relay it.
  if (model != target) return PassthroughCounted("unknown_model");
  const ChatModel& cm = *model->chat;
  if (!model->ForwardIds()) return PassthroughCounted("text_mode");
  if (std::string why = ChatUnsupported(cm.mode, *chat); !why.empty()) return PassthroughCounted(why);

  // The prompt, exactly as the reference renderer writes it; a template the
  // renderer cannot follow sends the request on unchanged (never a
  // different prompt).
  auto synth = std::make_shared<std::string>();
  auto creq = std::make_shared<CompletionRequest>();
  try {
    std::string prompt;
    core::Status rs = RenderChatPrompt(cm, *chat, UnixNow(), &prompt);
    if (!rs.ok()) {
      std::fprintf(stderr, "toktier: chat template of model %s: %s; relaying the request as is\n",
                   model->config.name.c_str(), rs.ToString().c_str());
      return PassthroughCounted("chat_render");
    }
    // The rendered prompt as a completions body, so it takes the completions
    // path's sessions and repair (the template writes BOS itself).
    nlohmann::ordered_json s = {{"model", chat->model}, {"add_special_tokens", false}, {"prompt", std::move(prompt)}};
    std::string dumped = s.dump();
    synth->reserve(dumped.size() + JsonPadding());
    synth->assign(dumped);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toktier: chat request for model %s: %s; relaying it as is\n", model->config.name.c_str(),
                 e.what());
    return PassthroughCounted("chat_render");
  }
  if (!ParseCompletionRequest(*synth, creq.get(), &err)) return PassthroughCounted("chat_render");

  const SessionRef sref = RequestSession();
  auto self = shared_from_this();
  bool queued = srv_->service.Submit(model, synth, creq, sref, [self, chat, model](TokenizeResult res) {
    asio::post(self->strand_, [self, chat, model, res = std::move(res)]() mutable {
      self->ForwardChat(std::move(chat), model, std::move(res));
    });
  });
  if (!queued) {
    m().counter(metrics::Id::kOverloadPassthrough).Inc();
    return Passthrough("");
  }
}

void HttpConn::ForwardChat(std::shared_ptr<ChatRequest> chat, ModelRuntime* model, TokenizeResult res) {
  rq_->t_worker_start = res.worker_start;
  rq_->t_worker_end = res.worker_end;
  // A string prompt comes back as [before, "[", ids, "]", after]; anything
  // else is the worker's passthrough (overload, tokenizer error): the chat
  // request then goes on unchanged.
  if (!res.ok || res.body.pieces.size() != 5) return Passthrough(res.session_key);
  const ChatModel& cm = *model->chat;
  ChatForwardPlan plan;
  try {
    plan = PlanChatForward(cm.mode, *chat);
  } catch (const std::exception&) {
    return PassthroughCounted("chat_render");
  }
  auto owned = std::make_shared<ChatForwardPlan>(std::move(plan));
  ForwardBody fb;
  fb.pieces = {owned->head, res.body.pieces[2], owned->tail};
  fb.owners = std::move(res.body.owners);
  fb.owners.push_back(owned);
  rq_->up_target = owned->target;
  if (cm.mode == ChatForward::kCompletions || cm.mode == ChatForward::kVllm) {
    ChatTranslateOptions o;
    o.id = ChatCompletionId(srv_->passthrough_counter.fetch_add(1));
    o.created = UnixNow();
    o.model = chat->model;
    o.tools = chat->has_tools ? cm.tools : ToolCallFormat::kNone;
    o.reasoning = cm.reasoning;
    if (cm.mode == ChatForward::kVllm) {
      o.decode_with = model->tokenizer;
      o.decode = ChatDecodeOptions(*chat);
    }
    rq_->translator = api::MakeChatTranslator(std::move(o), chat->stream, cfg().max_body_bytes);
  }
  Forward(std::move(fb), res.session_key);
}

}  // namespace toktier::proxy
