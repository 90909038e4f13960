#include "proxy/request_outcome.h"

#include <utility>

namespace toktier::proxy {

std::string_view EndpointName(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::kLocal: return "local";
    case Endpoint::kPassthrough: return "passthrough";
    case Endpoint::kCompletions: return "completions";
    case Endpoint::kChat: return "chat";
    case Endpoint::kMessages: return "messages";
    case Endpoint::kResponses: return "responses";
    case Endpoint::kRender: return "render";
  }
  return "local";
}

std::string ErrorBody(ClientApi client_api, const api::RequestError& error) {
  if (client_api == ClientApi::kAnthropic) return api::AnthropicErrorJson(error.status, error.message);
  return api::ErrorJson(error);
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kClientError: return "client_error";
    case Outcome::kClientClosed: return "client_closed";
    case Outcome::kClientTimeout: return "client_timeout";
    case Outcome::kClientWriteTimeout: return "client_write_timeout";
    case Outcome::kBadGateway: return "bad_gateway";
    case Outcome::kGatewayTimeout: return "gateway_timeout";
    case Outcome::kBackendError: return "backend_error";
    case Outcome::kBackendTimeout: return "backend_timeout";
    case Outcome::kBackendTruncated: return "backend_truncated";
    case Outcome::kOverloaded: return "overloaded";
  }
  return "ok";
}

std::string_view BackendResultName(BackendResult result) {
  switch (result) {
    case BackendResult::kOk: return "ok";
    case BackendResult::kConnectError: return "connect_error";
    case BackendResult::kFailover: return "failover";
    case BackendResult::kIoError: return "io_error";
    case BackendResult::kTimeout: return "timeout";
    case BackendResult::kBadResponse: return "bad_response";
    case BackendResult::kCancelled: return "cancelled";
  }
  return "io_error";
}

namespace {

ErrorReply Reply(int status, std::string message, api::ErrorType type, Outcome outcome) {
  ErrorReply r;
  r.error.status = status;
  r.error.message = std::move(message);
  r.error.type = type;
  r.outcome = outcome;
  return r;
}

}  // namespace

ErrorReply ErrorReply::Client(int status, std::string message, std::string param, std::string code) {
  ErrorReply r = Reply(status, std::move(message), api::ErrorType::kInvalidRequest, Outcome::kClientError);
  r.error.param = std::move(param);
  r.error.code = std::move(code);
  return r;
}

ErrorReply ErrorReply::ClientClose(int status, std::string message, std::string code) {
  ErrorReply r = Client(status, std::move(message), "", std::move(code));
  r.close = true;
  return r;
}

ErrorReply ErrorReply::Overloaded(std::string message) {
  return Reply(503, std::move(message), api::ErrorType::kServer, Outcome::kOverloaded);
}

ErrorReply ErrorReply::BadGateway(std::string message) {
  return Reply(502, std::move(message), api::ErrorType::kServer, Outcome::kBadGateway);
}

ErrorReply ErrorReply::GatewayTimeout(std::string message) {
  return Reply(504, std::move(message), api::ErrorType::kTimeout, Outcome::kGatewayTimeout);
}

}  // namespace toktier::proxy
