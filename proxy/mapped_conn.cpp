// A connection's mapped client APIs (http_conn.h, docs/agents.md):
// /v1/messages and /v1/messages/count_tokens (Anthropic, Claude Code) and
// /v1/responses (OpenAI Responses, Codex). The body is mapped onto a chat
// request (api::ParseMessagesRequest, api::ParseResponsesRequest: vLLM's
// rules), which then takes the chat token path (chat_conn.cpp); the
// engine's answer is translated back into the client's format.
// count_tokens is answered here, from the same rendering and the session's
// token state, without the engine. Models not on the token path are relayed
// as they are (the engine judges).
#include "proxy/http_conn.h"

namespace toktier::proxy {

ModelRuntime* HttpConn::MappedModel(Endpoint endpoint) {
  auto& req = parser_->get();
  rq_->body = std::make_shared<std::string>(std::move(req.body()));
  rq_->model = ModelOfJsonBody(*rq_->body);
  if (rq_->model.empty()) {
    if (size_t bad = core::FindInvalidUtf8(*rq_->body); bad != std::string::npos) {
      SendError(endpoint, ErrorReply::Client(400, "The request body is not valid UTF-8 (byte offset " +
                                                      std::to_string(bad) + ")."));
      return nullptr;
    }
  }
  ModelRuntime* target = srv_->service.FindModel(rq_->model);
  if (!target || target->chat->mode == ChatForward::kText) {
    rq_->endpoint = Endpoint::kPassthrough;
    Passthrough("");
    return nullptr;
  }
  rq_->endpoint = endpoint;
  return target;
}

void HttpConn::SubmitMapped(nlohmann::ordered_json chat_body, const std::string& model_name, bool stream,
                            MappedRequest mapped) {
  ModelRuntime* model = srv_->service.FindModel(model_name);
  // Only a body with two "model" fields reads differently in the two parsers: relay it.
  if (model != srv_->service.FindModel(rq_->model)) return PassthroughCounted("unknown_model");
  if (!model->ForwardIds()) return PassthroughCounted("text_mode");
  auto chat = std::make_shared<ChatRequest>();
  chat->body = std::move(chat_body);
  chat->model = model_name;
  chat->stream = stream;
  auto tools = chat->body.find("tools");
  chat->has_tools = tools != chat->body.end() && tools->is_array() && !tools->empty();
  if (std::string why = ChatUnsupported(model->chat->mode, *chat); !why.empty()) {
    return SendError(ErrorReply::Client(400, "The request cannot take the token path: " + why + "."));
  }
  SubmitChat(std::move(chat), model, std::move(mapped));
}

void HttpConn::HandleMessages(bool count_tokens) {
  rq_->client_api = ClientApi::kAnthropic;
  if (!MappedModel(Endpoint::kMessages)) return;
  auto req = std::make_shared<api::MessagesRequest>();
  RequestError err;
  bool parsed = false;
  try {
    api::MessagesOptions mo;
    mo.drop_billing_header = cfg().drop_billing_header;
    parsed = api::ParseMessagesRequest(*rq_->body, mo, count_tokens, req.get(), &err, cfg().json_max_depth);
  } catch (const std::exception& e) {
    err.message = std::string("The request body could not be read: ") + e.what();
  }
  rq_->t_parsed = Clock::now();
  if (!parsed) return SendError(ErrorReply{std::move(err)});
  MappedRequest mapped;
  mapped.messages = req;
  mapped.count_tokens = count_tokens;
  SubmitMapped(req->chat, req->model, req->stream, std::move(mapped));
}

void HttpConn::HandleResponses() {
  if (!MappedModel(Endpoint::kResponses)) return;
  auto req = std::make_shared<api::ResponsesRequest>();
  RequestError err;
  bool parsed = false;
  try {
    parsed = api::ParseResponsesRequest(*rq_->body, req.get(), &err, cfg().json_max_depth);
  } catch (const std::exception& e) {
    err.message = std::string("The request body could not be read: ") + e.what();
  }
  rq_->t_parsed = Clock::now();
  if (!parsed) return SendError(ErrorReply{std::move(err)});
  if (req->hosted_tools_dropped) {
    m().counter(metrics::Id::kHostedToolsDropped).Inc(static_cast<double>(req->hosted_tools_dropped));
  }
  MappedRequest mapped;
  mapped.responses = req;
  SubmitMapped(req->chat, req->model, req->stream, std::move(mapped));
}

}  // namespace toktier::proxy
