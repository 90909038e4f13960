// The translation stage between an engine's answer and the client's API: the
// proxy relays the engine's bytes through one ResponseTranslator per request
// whose answer it must rewrite (chat over the engine's completions or
// generate endpoints today; each client API adds its own). Whole answers are
// collected and translated at their end; streams are translated as their
// bytes arrive, in pieces of any size.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "api/chat_response.h"

namespace toktier::api {

class ResponseTranslator {
 public:
  virtual ~ResponseTranslator() = default;
  // True: an event stream, translated piece by piece (the client's head goes
  // out at once). False: a whole answer, translated at its end (the client's
  // head waits for it, so a failure is still an error status).
  virtual bool streaming() const = 0;
  // The engine's next bytes (`last`: its answer ends with them); appends what
  // the client gets to *out. False for malformed engine output (error()
  // says why): the caller cuts the answer off; later calls fail too.
  [[nodiscard]] virtual bool Feed(std::string_view bytes, bool last, std::string* out) = 0;
  virtual const std::string& error() const = 0;
};

// Chat completions from the engine's completions (or vLLM generate) answer:
// chat.completion.chunk events for `stream`, else one chat.completion whose
// engine answer may be at most `max_whole_bytes` long.
std::unique_ptr<ResponseTranslator> MakeChatTranslator(ChatTranslateOptions options, bool stream,
                                                       size_t max_whole_bytes);

}  // namespace toktier::api
