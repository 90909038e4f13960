// The one error type of toktier: a code and a message. Every room returns it
// (core's loaders, the store, the chat renderer, the proxy's set-up); the
// caller decides what a code means to its user (an exit code, an HTTP
// status, a counter). Header-only and dependency-free, so the rooms that do
// not link core/ (chat/) can share it too: the one header of core/ besides
// core/core.h that other folders include.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

namespace toktier::core {

enum class StatusCode : uint8_t {
  kOk,
  kInvalidArgument,  // malformed input: a file, a request, an option
  kUnsupported,      // a feature this implementation does not have: never a different result
  kIoError,          // a file or the store could not be read or written
  kLimitExceeded,    // a configured bound (output size, loop steps, nesting depth)
  kSyntaxError,      // a chat template does not parse
  kRenderError,      // template evaluation failed the way the reference fails
  kRaised,           // the template called raise_exception(message)
};

// "ok", "invalid argument", ...: for logs and messages (Status::ToString).
constexpr const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kIoError: return "io error";
    case StatusCode::kLimitExceeded: return "limit exceeded";
    case StatusCode::kSyntaxError: return "syntax error";
    case StatusCode::kRenderError: return "render error";
    case StatusCode::kRaised: return "raise_exception";
  }
  return "unknown";
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return {}; }
  static Status Error(StatusCode code, std::string message) { return Status(code, std::move(message)); }
  // Malformed input, the most common failure (kInvalidArgument).
  static Status Error(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>" ("ok" when ok).
  std::string ToString() const {
    return ok() ? std::string("ok") : std::string(StatusCodeName(code_)) + ": " + message_;
  }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace toktier::core
