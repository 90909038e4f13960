// api/: the client APIs mapped onto the token path, with no sockets inside.
// For each API a request mapping (client body -> prompt or conversation,
// sampling fields, stream flag) and a response translation (engine answer ->
// client body or event stream), plus the bounds every untrusted JSON value
// goes through. proxy/ drives them; other folders include only this header.
//
//   json_limits.h    the depth bound and the one bounded nlohmann parse
//   json_string.h    unescaping prompt strings with resumable checkpoints
//   completions.h    /v1/completions: the simdjson request parse, OpenAI errors
//   chat_request.h   /v1/chat/completions: the request, its rendering, the
//                    engine bodies of each chat_forward mode
//   chat_conversation.h  a chat request -> what the template sees (vLLM's rules)
//   chat_response.h  engine completions / generate answers -> chat, whole or SSE
//   messages_request.h  /v1/messages and count_tokens -> a chat request (vLLM's rules)
//   messages_response.h  chat completions answers -> Anthropic Messages
//                    (/v1/messages), whole or its event stream; its errors
//   responses_request.h  /v1/responses -> a chat request (vLLM's rules)
//   responses_response.h  chat completions answers -> OpenAI Responses, whole or its event stream
//   token_text.h     token IDs back to text (stop strings, special tokens)
//   response_translator.h  the stage an engine answer passes on its way to
//                    the client (whole or streamed), one per client API
#pragma once

#include "api/chat_conversation.h"
#include "api/chat_request.h"
#include "api/chat_response.h"
#include "api/completions.h"
#include "api/json_limits.h"
#include "api/json_string.h"
#include "api/messages_request.h"
#include "api/messages_response.h"
#include "api/response_translator.h"
#include "api/responses_request.h"
#include "api/responses_response.h"
#include "api/token_text.h"
