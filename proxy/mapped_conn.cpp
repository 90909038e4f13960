// A connection's mapped client APIs (http_conn.h, docs/agents.md):
// /v1/messages and /v1/messages/count_tokens (Anthropic, Claude Code) and
// /v1/responses (OpenAI Responses, Codex). The body is mapped onto a chat
// request (api::ParseMessagesRequest, api::ParseResponsesRequest: vLLM's
// rules), which then takes the chat token path (chat_conn.cpp); the
// engine's answer is translated back into the client's format.
// count_tokens is answered here, from the same rendering and the session's
// token state, without the engine, and so are /v1/messages/render and
// /v1/responses/render (AnswerRender, chat_conn.cpp). Models not on the token path are relayed
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

void HttpConn::PrepareMapped(TokenizeService* service, ModelRuntime* target, nlohmann::ordered_json chat_body,
                             const std::string& model_name, bool stream, PreparedChat* p) {
  p->model = service->FindModel(model_name);
  // Only a body with two "model" fields reads differently in the two parsers: relay it.
  if (p->model != target) return p->Relay("unknown_model");
  if (!p->model->ForwardIds()) return p->Relay("text_mode");
  p->chat = std::make_shared<ChatRequest>();
  ChatRequest& chat = *p->chat;
  chat.body = std::move(chat_body);
  chat.model = model_name;
  chat.stream = stream;
  auto tools = chat.body.find("tools");
  chat.has_tools = tools != chat.body.end() && tools->is_array() && !tools->empty();
  if (std::string why = ChatUnsupported(p->BodyMode(), chat); !why.empty()) {
    return p->Fail(ErrorReply::Client(400, "The request cannot take the token path: " + why + "."));
  }
  RenderForTokenizer(p);
}

void HttpConn::HandleMessages(bool count_tokens, bool render) {
  rq_->client_api = ClientApi::kAnthropic;
  ModelRuntime* target = MappedModel(render ? Endpoint::kRender : Endpoint::kMessages);
  if (!target) return;
  api::MessagesOptions mo;
  mo.drop_billing_header = cfg().drop_billing_header;
  // Parsing, mapping and rendering: pure, and off the I/O thread for a large body.
  Prepare(
      [body = rq_->body, service = &srv_->service, target, mo, count_tokens, render, max_depth = cfg().json_max_depth] {
        PreparedChat p;
        p.render = render;
        auto req = std::make_shared<api::MessagesRequest>();
        if (!p.Parsed([&](RequestError* err) {
              return api::ParseMessagesRequest(*body, mo, count_tokens, req.get(), err, max_depth,
                                               &p.leftovers.emplace_back());
            })) {
          return p;
        }
        p.mapped.messages = req;
        p.mapped.count_tokens = count_tokens;
        // The mapped chat body is handed over: nothing reads req->chat later.
        PrepareMapped(service, target, std::move(req->chat), req->model, req->stream, &p);
        return p;
      },
      [this](PreparedChat p) { SubmitPrepared(std::move(p)); });
}

void HttpConn::HandleResponses(bool render) {
  ModelRuntime* target = MappedModel(render ? Endpoint::kRender : Endpoint::kResponses);
  if (!target) return;
  Prepare(
      [body = rq_->body, service = &srv_->service, target, render, max_depth = cfg().json_max_depth] {
        PreparedChat p;
        p.render = render;
        auto req = std::make_shared<api::ResponsesRequest>();
        if (!p.Parsed([&](RequestError* err) {
              return api::ParseResponsesRequest(*body, req.get(), err, max_depth, &p.leftovers.emplace_back());
            })) {
          return p;
        }
        p.hosted_tools_dropped = req->hosted_tools_dropped;
        p.mapped.responses = req;
        PrepareMapped(service, target, std::move(req->chat), req->model, req->stream, &p);
        return p;
      },
      [this](PreparedChat p) { SubmitPrepared(std::move(p)); });
}

}  // namespace toktier::proxy
