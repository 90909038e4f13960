// A connection's /v1/chat/completions (http_conn.h, docs/chat.md): the chat
// template renders the conversation, the rendered prompt takes the same
// token-state path as a completions prompt (a session per conversation,
// repair of the edited tail), and the IDs go to the engine in the model's
// chat_forward mode. In "completions" and "vllm" modes the engine's answer is
// translated back to the chat format as it is relayed (an
// api::ResponseTranslator, which upstream.cpp feeds).
// /v1/chat/completions/render takes the same way and answers the engine
// body of the vllm mode (vLLM's GenerateRequest) instead of sending it.
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

// An answer's id: the client API's prefix ("chatcmpl-", "msg_", "resp_")
// and 32 hex digits: 64 random bits per process (a client cannot guess
// another's ids) mixed with a per-request counter.
std::string AnswerId(std::string_view prefix, uint64_t counter) {
  static const uint64_t process_key = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(process_key),
                static_cast<unsigned long long>(XXH3_64bits_withSeed(&counter, sizeof counter, process_key)));
  return std::string(prefix) + hex;
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// The number of IDs in "1,2,3".
size_t IdCount(std::string_view ids) {
  if (ids.empty()) return 0;
  size_t n = 1;
  for (char c : ids) n += c == ',';
  return n;
}

}  // namespace

bool HttpConn::PromptTokenizedOr503(const TokenizeResult& res) {
  rq_->t_worker_start = res.worker_start;
  rq_->t_worker_end = res.worker_end;
  // A string prompt comes back as [before, "[", ids, "]", after].
  if (res.ok && res.body.pieces.size() == 5) return true;
  SendError(ErrorReply::Overloaded("The prompt could not be tokenized now: try again."));
  return false;
}

void HttpConn::AnswerCountTokens(const TokenizeResult& res) {
  if (!PromptTokenizedOr503(res)) return;
  SendResponse(status::ok, "application/json", api::CountTokensJson(IdCount(res.body.pieces[2])), Outcome::kOk,
               false);
}

void HttpConn::AnswerRender(const TokenizeResult& res, const ChatForwardPlan& plan, const MappedRequest& mapped) {
  if (!PromptTokenizedOr503(res)) return;
  // The id takes the client API's prefix, as its answer would (vLLM's chat
  // render: "chatcmpl-").
  const std::string id = AnswerId(mapped.messages ? "msg_" : mapped.responses ? "resp_" : "chatcmpl-",
                                  srv_->passthrough_counter.fetch_add(1));
  const std::string_view ids = res.body.pieces[2];
  std::string body;
  body.reserve(plan.head.size() + ids.size() + plan.tail.size() + id.size() + 32);
  body.append("{\"request_id\":\"").append(id).append("\",");
  body.append(std::string_view(plan.head).substr(1)).append(ids).append(plan.tail);  // head: {"model":...
  SendResponse(status::ok, "application/json", std::move(body), Outcome::kOk, false);
}

void HttpConn::HandleChat(bool render) {
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
  rq_->endpoint = render ? Endpoint::kRender : Endpoint::kChat;
  // Parsing, checks and rendering: pure, and off the I/O thread for a large body.
  Prepare(
      [body = rq_->body, service = &srv_->service, target, render, max_depth = cfg().json_max_depth] {
        PreparedChat p;
        p.render = render;
        p.chat = std::make_shared<ChatRequest>();
        if (!p.Parsed([&](RequestError* err) { return ParseChatRequest(*body, p.chat.get(), err, max_depth); })) {
          return p;
        }
        p.model_name = p.chat->model;
        p.model = service->FindModel(p.chat->model);
        // Only a body with two "model" fields reads differently in the two parsers: relay it.
        if (p.model != target) {
          p.Relay("unknown_model");
        } else if (!p.model->ForwardIds()) {
          p.Relay("text_mode");
        } else if (std::string why = ChatUnsupported(p.BodyMode(), *p.chat); !why.empty()) {
          p.Relay(std::move(why));
        } else {
          RenderForTokenizer(&p);
        }
        return p;
      },
      [this](PreparedChat p) { SubmitPrepared(std::move(p)); });
}

void HttpConn::RenderForTokenizer(PreparedChat* p) {
  const bool mapped_api = p->mapped.mapped();
  const ChatModel& cm = *p->model->chat;
  ChatRequest& chat = *p->chat;
  // A chat request the renderer cannot take goes on unchanged (the engine
  // judges it: never a different prompt); a mapped request has nowhere to
  // go unchanged, so it gets a 400 that says why.
  auto refuse = [&](const std::string& why) {
    if (!mapped_api) return p->Relay("chat_render");
    p->Fail(ErrorReply::Client(400, "The conversation cannot be rendered with model " + p->model->config.name +
                                        "'s chat template: " + why));
  };
  // What goes to the engine around the IDs, taken from the body first: the
  // render then moves the messages' texts out of it instead of copying them
  // (sglang and dynamo forward the messages, so their head is written now).
  if (!p->mapped.count_tokens) {
    try {
      p->plan = std::make_shared<ChatForwardPlan>(PlanChatForward(p->BodyMode(), chat));
    } catch (const std::exception& e) {
      if (!mapped_api) return p->Relay("chat_render");
      return p->Fail(ErrorReply::Client(400, std::string("The request cannot be forwarded: ") + e.what()));
    }
  }
  // The prompt, exactly as the reference renderer writes it.
  p->synth = std::make_shared<std::string>();
  p->creq = std::make_shared<CompletionRequest>();
  std::string& synth = *p->synth;
  try {
    std::string prompt;
    core::Status rs = RenderChatPromptTakingMessages(cm, &chat, UnixNow(), &prompt, &p->leftovers.emplace_back());
    if (!rs.ok()) {
      std::fprintf(stderr, "toktier: chat template of model %s: %s%s\n", p->model->config.name.c_str(),
                   rs.ToString().c_str(), mapped_api ? "" : "; relaying the request as is");
      return refuse(rs.message());
    }
    // The rendered prompt as a completions body, so it takes the completions
    // path's sessions and repair (the template writes BOS itself). Written
    // by hand: a 1 MB prompt is escaped by a vectorized scan, not a dump.
    synth.reserve(prompt.size() + prompt.size() / 8 + chat.model.size() + 64 + JsonPadding());
    synth.append("{\"model\":\"");
    api::AppendEscapedJsonString(chat.model, &synth);
    synth.append("\",\"add_special_tokens\":false,\"prompt\":\"");
    api::AppendEscapedJsonString(prompt, &synth);
    synth.append("\"}");
    if (synth.capacity() < synth.size() + JsonPadding()) synth.reserve(synth.size() + JsonPadding());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toktier: chat request for model %s: %s\n", p->model->config.name.c_str(), e.what());
    return refuse(e.what());
  }
  RequestError err;
  if (!ParseCompletionRequest(synth, p->creq.get(), &err)) return refuse(err.message);
}

void HttpConn::SubmitPrepared(PreparedChat p) {
  if (p.t_parsed != Clock::time_point{}) rq_->t_parsed = p.t_parsed;
  if (!p.model_name.empty()) rq_->model = p.model_name;
  if (p.hosted_tools_dropped) {
    m().counter(metrics::Id::kHostedToolsDropped).Inc(static_cast<double>(p.hosted_tools_dropped));
  }
  switch (p.next) {
    case PreparedChat::Next::kError: return SendError(std::move(p.error));
    case PreparedChat::Next::kPassthrough: return PassthroughCounted(p.passthrough_reason);
    case PreparedChat::Next::kSubmit: break;
  }
  const bool mapped_api = p.mapped.mapped();
  SessionRef sref = RequestSession();
  // Claude Code also names its session in metadata.user_id, Codex in
  // prompt_cache_key.
  if (sref.explicit_id.empty()) sref.explicit_id = p.mapped.session_id();
  auto self = shared_from_this();
  bool queued = srv_->service.Submit(
      p.model, p.synth, p.creq, sref,
      [self, chat = p.chat, plan = p.plan, model = p.model, mapped = p.mapped, render = p.render](TokenizeResult res) {
        asio::post(self->strand_, [self, chat, plan, model, mapped, render, res = std::move(res)]() mutable {
          if (mapped.count_tokens) return self->AnswerCountTokens(res);
          if (render) return self->AnswerRender(res, *plan, mapped);
          self->ForwardChat(std::move(chat), std::move(plan), model, std::move(res), std::move(mapped));
        });
      });
  if (!queued) {
    m().counter(metrics::Id::kOverloadPassthrough).Inc();
    if (mapped_api) return SendError(ErrorReply::Overloaded("The tokenizer queue is full: try again."));
    return Passthrough("");
  }
}

void HttpConn::ForwardChat(std::shared_ptr<ChatRequest> chat, std::shared_ptr<const ChatForwardPlan> plan,
                           ModelRuntime* model, TokenizeResult res, MappedRequest mapped) {
  rq_->t_worker_start = res.worker_start;
  rq_->t_worker_end = res.worker_end;
  // A string prompt comes back as [before, "[", ids, "]", after]; anything
  // else is the worker's passthrough (overload, tokenizer error): the chat
  // request then goes on unchanged.
  if (!res.ok || res.body.pieces.size() != 5) {
    if (mapped.mapped()) return SendError(ErrorReply::Overloaded("The prompt could not be tokenized now: try again."));
    return Passthrough(res.session_key);
  }
  const ChatModel& cm = *model->chat;
  ForwardBody fb;
  fb.pieces = {plan->head, res.body.pieces[2], plan->tail};
  fb.owners = std::move(res.body.owners);
  fb.owners.push_back(plan);
  rq_->up_target = plan->target;
  std::unique_ptr<api::ResponseTranslator> chat_stage;
  if (cm.mode == ChatForward::kCompletions || cm.mode == ChatForward::kVllm) {
    ChatTranslateOptions o;
    o.id = AnswerId("chatcmpl-", srv_->passthrough_counter.fetch_add(1));
    o.created = UnixNow();
    o.model = chat->model;
    o.tools = chat->has_tools ? cm.tools : ToolCallFormat::kNone;
    o.reasoning = cm.reasoning;
    if (cm.mode == ChatForward::kVllm) {
      o.decode_with = model->tokenizer;
      o.decode = ChatDecodeOptions(*chat);
    }
    chat_stage = api::MakeChatTranslator(std::move(o), chat->stream, cfg().max_body_bytes);
  }
  // A mapped API's answer: the engine's chat answer (its own, or the chat
  // stage's) -> the client's format.
  if (mapped.messages) {
    api::MessagesTranslateOptions mo;
    mo.id = AnswerId("msg_", srv_->passthrough_counter.fetch_add(1));
    mo.model = mapped.messages->model;
    mo.prompt_tokens = IdCount(res.body.pieces[2]);
    mo.stop_sequences = mapped.messages->stop_sequences;
    rq_->translator = api::MakeMessagesTranslator(std::move(chat_stage), std::move(mo), chat->stream,
                                                  cfg().max_body_bytes);
  } else if (mapped.responses) {
    api::ResponsesTranslateOptions ro;
    ro.id = AnswerId("resp_", srv_->passthrough_counter.fetch_add(1));
    ro.model = mapped.responses->model;
    ro.created_at = UnixNow();
    ro.prompt_tokens = IdCount(res.body.pieces[2]);
    ro.request_echo = mapped.responses->echo;
    ro.namespaced_tools = mapped.responses->namespaced_tools;
    rq_->translator = api::MakeResponsesTranslator(std::move(chat_stage), std::move(ro), chat->stream,
                                                   cfg().max_body_bytes);
  } else {
    rq_->translator = std::move(chat_stage);
  }
  Forward(std::move(fb), res.session_key);
}

}  // namespace toktier::proxy
