// Private: how the renderer's stages report a failure. Errors unwind inside
// the library as RenderFailure and are turned into a Status at the API
// boundary (chat_template.cpp); nothing is thrown past it.
#pragma once

#include <string>

#include "chat/chat_template.h"

namespace toktier::chat {

struct RenderFailure {
  StatusCode code;
  std::string message;
};

[[noreturn]] inline void Fail(StatusCode code, std::string message) {
  throw RenderFailure{code, std::move(message)};
}
[[noreturn]] inline void FailRender(std::string message) { Fail(StatusCode::kRenderError, std::move(message)); }
[[noreturn]] inline void FailSyntax(std::string message) { Fail(StatusCode::kSyntaxError, std::move(message)); }
[[noreturn]] inline void FailUnsupported(std::string message) {
  Fail(StatusCode::kUnsupported, "unsupported: " + std::move(message));
}

}  // namespace toktier::chat
