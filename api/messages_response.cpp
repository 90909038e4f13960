// Chat completions -> Anthropic Messages translation (see
// messages_response.h). The whole path and the stream share the stop reason,
// usage, tool-use id and signature rules below, so that a stream's events
// assemble into the message the whole path gives for the same answer.
#include "api/messages_response.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "api/chat_answer_reading.h"
#include "api/json_limits.h"

namespace toktier::api {
namespace {

using Json = nlohmann::ordered_json;  // ordered: output keys keep the order they are written in

// A longer SSE line or event (or one tool call's arguments) is not an
// engine's stream: refuse it rather than grow.
constexpr size_t kMaxEventBytes = size_t{64} << 20;
// An engine's error body that is not JSON becomes the client's message; an
// HTML error page is cut here.
constexpr size_t kMaxEngineMessageBytes = 4096;

using chat_answer::Dump;
using chat_answer::ParseJson;
using chat_answer::ReadCount;
using chat_answer::ReadReasoning;
using chat_answer::ReadString;
using chat_answer::SetError;
using chat_answer::Trim;

// Anthropic counts cached prompt tokens apart from input_tokens (which are
// the uncached rest), unlike OpenAI's prompt_tokens that include them.
struct Usage {
  uint64_t input = 0;
  uint64_t cached = 0;
  uint64_t output = 0;
};

Usage DefaultUsage(const MessagesTranslateOptions& options) { return Usage{options.prompt_tokens, 0, 0}; }

// An OpenAI usage object; the prompt's size falls back to what the proxy
// counted itself.
bool ReadUsage(const Json& usage, const MessagesTranslateOptions& options, Usage* out, std::string* error) {
  if (!usage.is_object()) return SetError(error, "the engine's usage is not an object");
  std::optional<uint64_t> prompt, completion, cached;
  if (!ReadCount(usage, "prompt_tokens", &prompt, error)) return false;
  if (!ReadCount(usage, "completion_tokens", &completion, error)) return false;
  if (auto details = usage.find("prompt_tokens_details"); details != usage.end() && !details->is_null()) {
    if (!details->is_object()) return SetError(error, "the engine's usage.prompt_tokens_details is not an object");
    if (!ReadCount(*details, "cached_tokens", &cached, error)) return false;
  }
  uint64_t total = prompt.value_or(options.prompt_tokens);
  out->cached = std::min(cached.value_or(0), total);
  out->input = total - out->cached;
  out->output = completion.value_or(0);
  return true;
}

Json UsageJson(const Usage& usage) {
  Json json = Json::object();
  json["input_tokens"] = usage.input;
  json["cache_creation_input_tokens"] = 0;  // a prefix cache has no separately billed writes
  json["cache_read_input_tokens"] = usage.cached;
  json["output_tokens"] = usage.output;
  return json;
}

// Anthropic signs thinking blocks so that clients send them back unchanged;
// the proxy verifies nothing, so any stable non-empty string does (derived
// from the message id, so that a stream and a body agree).
std::string Signature(const std::string& message_id) { return "toktier-" + message_id; }

// For a tool call the engine sent without an id: unique per message, from
// the message id and the call's position in it.
std::string ToolUseId(const std::string& message_id, size_t position) {
  std::string_view base = message_id;
  if (base.starts_with("msg_")) base.remove_prefix(4);
  std::string id = "toolu_";
  if (!base.empty()) (id += base) += '_';
  return id += std::to_string(position);
}

// The choice's end in Anthropic's terms: {stop_reason, stop_sequence}.
// Tool calls win over a plain stop (the client must answer them); vLLM
// puts the stop string that matched into the choice's "stop_reason".
std::pair<Json, Json> StopReason(const std::optional<std::string>& finish_reason,
                                 const std::optional<std::string>& matched_stop, bool has_tool_calls,
                                 const MessagesTranslateOptions& options) {
  if (finish_reason == "tool_calls" || finish_reason == "function_call") return {"tool_use", nullptr};
  if (has_tool_calls && (!finish_reason || finish_reason == "stop")) return {"tool_use", nullptr};
  if (finish_reason == "length") return {"max_tokens", nullptr};
  if (finish_reason == "content_filter") return {"refusal", nullptr};
  if (finish_reason == "stop" && matched_stop &&
      std::find(options.stop_sequences.begin(), options.stop_sequences.end(), *matched_stop) !=
          options.stop_sequences.end()) {
    return {"stop_sequence", *matched_stop};
  }
  return {"end_turn", nullptr};  // stop, no finish_reason, or one Anthropic has no name for
}

// The choice's "stop_reason" when it is a string (vLLM: the matched stop
// string; an int there is a stop token ID).
std::optional<std::string> MatchedStop(const Json& choice) {
  auto it = choice.find("stop_reason");
  if (it == choice.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

Json MessageJson(const MessagesTranslateOptions& options, Json content, Json stop_reason, Json stop_sequence,
                 const Usage& usage) {
  Json json = Json::object();
  json["id"] = options.id;
  json["type"] = "message";
  json["role"] = "assistant";
  json["model"] = options.model;
  json["content"] = std::move(content);
  json["stop_reason"] = std::move(stop_reason);
  json["stop_sequence"] = std::move(stop_sequence);
  json["usage"] = UsageJson(usage);
  return json;
}

// A tool call's arguments as tool_use "input": the chat API carries them as
// JSON text, which must be an object (empty text: no arguments). Never
// dropped when they do not parse: the client would run the tool without them.
bool ArgumentsInput(const Json& arguments, Json* input, std::string* error) {
  if (arguments.is_null()) {
    *input = Json::object();
    return true;
  }
  if (arguments.is_object()) {
    *input = arguments;
    return true;
  }
  if (!arguments.is_string()) return SetError(error, "a tool call's arguments are not a string");
  std::string_view text = Trim(arguments.get_ref<const std::string&>());
  *input = text.empty() ? Json::object() : ParseJson(text);
  if (!input->is_object()) return SetError(error, "a tool call's arguments are not a JSON object");
  return true;
}

bool ToolUseBlock(const Json& call, const MessagesTranslateOptions& options, size_t position, Json* block,
                  std::string* error) {
  if (!call.is_object()) return SetError(error, "a tool call is not an object");
  auto function = call.find("function");
  if (function == call.end() || !function->is_object()) return SetError(error, "a tool call has no function");
  std::optional<std::string> id, name;
  if (!ReadString(call, "id", &id, error) || !ReadString(*function, "name", &name, error)) return false;
  if (!name || name->empty()) return SetError(error, "a tool call has no name");
  auto arguments = function->find("arguments");
  Json input;
  if (!ArgumentsInput(arguments == function->end() ? Json(nullptr) : *arguments, &input, error)) return false;
  *block = Json::object();
  (*block)["type"] = "tool_use";
  (*block)["id"] = id && !id->empty() ? *id : ToolUseId(options.id, position);
  (*block)["name"] = std::move(*name);
  (*block)["input"] = std::move(input);
  return true;
}

// The one choice the mapping asks for (n is never above 1): index 0.
bool OnlyChoice(const Json& chat, const Json** choice, std::string* error) {
  auto choices = chat.find("choices");
  if (choices == chat.end() || !choices->is_array()) return SetError(error, "the engine's answer has no choices array");
  if (choices->empty()) return SetError(error, "the engine's answer has no choices");
  if (choices->size() > 1) return SetError(error, "the engine's answer has more than one choice");
  *choice = &(*choices)[0];
  if (!(*choice)->is_object()) return SetError(error, "a choice is not an object");
  if (auto index = (*choice)->find("index"); index != (*choice)->end() && *index != 0) {
    return SetError(error, "the engine's choice is not index 0");
  }
  return true;
}

bool TranslateWhole(std::string_view chat_json, const MessagesTranslateOptions& options, std::string* message_json,
                    std::string* error) {
  try {
    Json chat = ParseJson(chat_json);
    if (!chat.is_object()) return SetError(error, "the engine's answer is not a JSON object");
    const Json* choice = nullptr;
    if (!OnlyChoice(chat, &choice, error)) return false;
    auto message = choice->find("message");
    if (message == choice->end() || !message->is_object()) return SetError(error, "the engine's choice has no message");
    std::optional<std::string> text, reasoning, finish_reason;
    if (!ReadString(*message, "content", &text, error) || !ReadReasoning(*message, &reasoning, error) ||
        !ReadString(*choice, "finish_reason", &finish_reason, error))
      return false;

    Json content = Json::array();
    if (reasoning && !reasoning->empty()) {
      content.push_back({{"type", "thinking"}, {"thinking", std::move(*reasoning)}, {"signature", Signature(options.id)}});
    }
    if (text && !text->empty()) content.push_back({{"type", "text"}, {"text", std::move(*text)}});
    size_t tool_calls = 0;
    if (auto calls = message->find("tool_calls"); calls != message->end() && !calls->is_null()) {
      if (!calls->is_array()) return SetError(error, "the engine's tool_calls is not an array");
      for (const Json& call : *calls) {
        Json block;
        if (!ToolUseBlock(call, options, tool_calls++, &block, error)) return false;
        content.push_back(std::move(block));
      }
    }

    Usage usage = DefaultUsage(options);
    if (auto u = chat.find("usage"); u != chat.end() && !u->is_null()) {
      if (!ReadUsage(*u, options, &usage, error)) return false;
    }
    auto [stop_reason, stop_sequence] = StopReason(finish_reason, MatchedStop(*choice), tool_calls > 0, options);
    *message_json = Dump(MessageJson(options, std::move(content), std::move(stop_reason), std::move(stop_sequence), usage));
    return true;
  } catch (const std::exception& e) {
    return SetError(error, std::string("translating the engine's answer: ") + e.what());
  }
}

// The message of an engine's error value, "" when it has none.
std::string EngineErrorMessage(const Json& body) {
  if (!body.is_object()) return "";
  for (const char* key : {"error", "message", "detail"}) {
    auto it = body.find(key);
    if (it == body.end()) continue;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object()) {
      if (auto message = it->find("message"); message != it->end() && message->is_string()) {
        return message->get<std::string>();
      }
    }
  }
  return "";
}

// The first `max` bytes of `text`, not ending inside a UTF-8 character.
std::string_view CutUtf8(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

Json ErrorBody(std::string_view type, std::string_view message) {
  Json json = Json::object();
  json["type"] = "error";
  json["error"] = {{"type", type}, {"message", message}};
  return json;
}

}  // namespace

core::Status TranslateChatToMessage(std::string_view chat_json, const MessagesTranslateOptions& options,
                                    std::string* message_json) {
  std::string error;
  if (!TranslateWhole(chat_json, options, message_json, &error)) return core::Status::Error(std::move(error));
  return core::Status::Ok();
}

std::string_view AnthropicErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 402: return "billing_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: break;
  }
  // Anthropic: "We may also use this error type for other 4XX status codes".
  return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
}

std::string AnthropicErrorJson(int status, std::string_view message) {
  try {
    return Dump(ErrorBody(AnthropicErrorType(status), message));
  } catch (const std::exception&) {  // allocation only
    return R"({"type":"error","error":{"type":"api_error","message":"internal error"}})";
  }
}

std::string AnthropicErrorFromEngine(int status, std::string_view engine_body) {
  std::string message;
  try {
    message = EngineErrorMessage(ParseJson(engine_body));
  } catch (const std::exception&) {
  }
  if (message.empty()) message = CutUtf8(Trim(engine_body), kMaxEngineMessageBytes);
  if (message.empty()) message = "the engine answered HTTP " + std::to_string(status);
  return AnthropicErrorJson(status, message);
}

// ---- the stream ----

struct MessagesStreamTranslator::State {
  explicit State(MessagesTranslateOptions o) : options(std::move(o)), usage(DefaultUsage(options)) {}

  enum class Block { kNone, kThinking, kText, kToolUse };

  MessagesTranslateOptions options;
  // The engine's SSE.
  std::string line_buffer;  // bytes after the last complete line
  size_t line_scanned = 0;  // line_buffer[0, line_scanned) holds no '\n'
  std::string event_data;   // the current event's data lines, joined by '\n'
  bool has_event_data = false;
  bool failed = false;
  std::string error;
  // The message so far.
  bool started = false;        // message_start (and ping) went out
  Block open = Block::kNone;   // the block being streamed
  size_t block_index = 0;      // the open block's index, or the next block's when none is open
  int64_t open_tool = -1;      // the engine's index of the open tool_use block's call
  std::string open_tool_id;    // its engine id ("" when the engine gave none)
  std::string tool_arguments;  // its arguments so far, checked when it closes
  std::set<int64_t> tools_seen;
  size_t tool_calls = 0;
  bool choice_finished = false;  // choice 0's finish_reason came: later deltas are not the client's
  std::optional<std::string> finish_reason;
  std::optional<std::string> matched_stop;
  Usage usage;
  bool delta_sent = false;  // message_delta went out
  bool ended = false;       // message_stop or an error event went out: nothing follows

  bool Fail(std::string message) {
    failed = true;
    error = std::move(message);
    return false;
  }

  static void Emit(const char* name, const Json& data, std::string* out) {
    *out += "event: ";
    *out += name;
    *out += "\ndata: ";
    *out += Dump(data);
    *out += "\n\n";
  }

  void EmitError(std::string_view message, std::string* out) {
    Emit("error", ErrorBody("api_error", message), out);
    ended = true;
  }

  void Start(std::string* out) {
    if (started) return;
    started = true;
    Json data = Json::object();
    data["type"] = "message_start";
    data["message"] = MessageJson(options, Json::array(), nullptr, nullptr, DefaultUsage(options));
    Emit("message_start", data, out);
    Emit("ping", Json{{"type", "ping"}}, out);
  }

  void EmitDelta(Json delta, std::string* out) {
    Json data = Json::object();
    data["type"] = "content_block_delta";
    data["index"] = block_index;
    data["delta"] = std::move(delta);
    Emit("content_block_delta", data, out);
  }

  void OpenBlock(Block kind, Json content_block, std::string* out) {
    Json data = Json::object();
    data["type"] = "content_block_start";
    data["index"] = block_index;
    data["content_block"] = std::move(content_block);
    Emit("content_block_start", data, out);
    open = kind;
  }

  // A thinking block gets its signature just before it closes (as Anthropic
  // sends it); a tool_use block's arguments must have been a JSON object.
  bool CloseBlock(std::string* out) {
    if (open == Block::kNone) return true;
    if (open == Block::kThinking) EmitDelta({{"type", "signature_delta"}, {"signature", Signature(options.id)}}, out);
    if (open == Block::kToolUse) {
      std::string_view text = Trim(tool_arguments);
      if (!text.empty() && !ParseJson(text).is_object()) return Fail("a tool call's arguments are not a JSON object");
      std::string().swap(tool_arguments);
    }
    Emit("content_block_stop", Json{{"type", "content_block_stop"}, {"index", block_index}}, out);
    open = Block::kNone;
    ++block_index;
    return true;
  }

  // Text or thinking: into the open block of that kind, else a new one.
  bool AppendText(Block kind, const std::string& text, std::string* out) {
    if (text.empty()) return true;
    const bool thinking = kind == Block::kThinking;
    if (open != kind) {
      if (!CloseBlock(out)) return false;
      Json block = thinking ? Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                            : Json{{"type", "text"}, {"text", ""}};
      OpenBlock(kind, std::move(block), out);
    }
    EmitDelta(thinking ? Json{{"type", "thinking_delta"}, {"thinking", text}} : Json{{"type", "text_delta"}, {"text", text}},
              out);
    return true;
  }

  // One entry of a delta's tool_calls: a call's start (its first entry has
  // the name) or more of the open call's arguments. Calls come one after the
  // other: Anthropic blocks cannot be reopened, so arguments for a call whose
  // block was closed are malformed, not dropped.
  bool ToolCallDelta(const Json& call, std::string* out) {
    if (!call.is_object()) return Fail("a tool call delta is not an object");
    std::optional<std::string> id, name, arguments;
    const Json* function = nullptr;
    if (auto it = call.find("function"); it != call.end() && !it->is_null()) {
      if (!it->is_object()) return Fail("a tool call delta's function is not an object");
      function = &*it;
    }
    std::string error_text;
    if (!ReadString(call, "id", &id, &error_text)) return Fail(error_text);
    if (function && (!ReadString(*function, "name", &name, &error_text) ||
                     !ReadString(*function, "arguments", &arguments, &error_text)))
      return Fail(error_text);
    if (id && id->empty()) id.reset();

    int64_t index = -1;
    if (auto it = call.find("index"); it != call.end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<int64_t>() < 0) return Fail("bad tool call index");
      index = it->get<int64_t>();
    } else if (open == Block::kToolUse && (!id || *id == open_tool_id)) {
      index = open_tool;  // no index (not OpenAI's shape, seen elsewhere): the open call's
    } else if (tools_seen.empty()) {
      index = 0;
    } else if (*tools_seen.rbegin() == INT64_MAX) {
      return Fail("bad tool call index");
    } else {
      index = *tools_seen.rbegin() + 1;
    }

    if (open != Block::kToolUse || index != open_tool) {
      if (tools_seen.contains(index)) return Fail("a tool call's deltas resumed after another block began");
      if (!name || name->empty()) return Fail("a tool call starts without a name");
      if (!CloseBlock(out)) return false;
      Json block = Json::object();
      block["type"] = "tool_use";
      block["id"] = id ? *id : ToolUseId(options.id, tool_calls);
      block["name"] = *name;
      block["input"] = Json::object();
      OpenBlock(Block::kToolUse, std::move(block), out);
      open_tool = index;
      open_tool_id = id.value_or("");
      tools_seen.insert(index);
      ++tool_calls;
    }
    if (arguments && !arguments->empty()) {
      if (tool_arguments.size() + arguments->size() > kMaxEventBytes) return Fail("a tool call's arguments are over 64 MiB");
      tool_arguments += *arguments;
      EmitDelta({{"type", "input_json_delta"}, {"partial_json", *arguments}}, out);
    }
    return true;
  }

  bool HandleChoice(const Json& choice, std::string* out) {
    if (!choice.is_object()) return Fail("a choice is not an object");
    if (auto index = choice.find("index"); index != choice.end() && *index != 0) {
      return Fail("the engine's stream has a choice other than index 0");
    }
    if (choice_finished) return true;  // what follows the choice's finish_reason is not the client's
    std::string error_text;
    std::optional<std::string> finish;
    if (!ReadString(choice, "finish_reason", &finish, &error_text)) return Fail(error_text);
    if (auto delta = choice.find("delta"); delta != choice.end() && !delta->is_null()) {
      if (!delta->is_object()) return Fail("a choice's delta is not an object");
      std::optional<std::string> reasoning, text;
      if (!ReadReasoning(*delta, &reasoning, &error_text) || !ReadString(*delta, "content", &text, &error_text)) {
        return Fail(error_text);
      }
      if (reasoning && !AppendText(Block::kThinking, *reasoning, out)) return false;
      if (text && !AppendText(Block::kText, *text, out)) return false;
      if (auto calls = delta->find("tool_calls"); calls != delta->end() && !calls->is_null()) {
        if (!calls->is_array()) return Fail("a delta's tool_calls is not an array");
        for (const Json& call : *calls) {
          if (!ToolCallDelta(call, out)) return false;
        }
      }
    }
    if (finish) {
      finish_reason = std::move(finish);
      matched_stop = MatchedStop(choice);
      choice_finished = true;
    }
    return true;
  }

  // The open block closes and message_delta goes out, once.
  bool EndMessage(std::string* out) {
    Start(out);
    if (!CloseBlock(out)) return false;
    if (delta_sent) return true;
    delta_sent = true;
    auto [stop_reason, stop_sequence] = StopReason(finish_reason, matched_stop, tool_calls > 0, options);
    Json data = Json::object();
    data["type"] = "message_delta";
    data["delta"] = {{"stop_reason", std::move(stop_reason)}, {"stop_sequence", std::move(stop_sequence)}};
    data["usage"] = UsageJson(usage);
    Emit("message_delta", data, out);
    return true;
  }

  bool StopMessage(std::string* out) {
    if (!EndMessage(out)) return false;
    Emit("message_stop", Json{{"type", "message_stop"}}, out);
    ended = true;
    return true;
  }

  bool HandleEngineEvent(const std::string& data, std::string* out) {
    if (ended) return true;
    if (Trim(data) == "[DONE]") return StopMessage(out);
    Json chunk = ParseJson(data);
    if (!chunk.is_object()) return Fail("malformed JSON in the engine's stream");
    auto choices = chunk.find("choices");
    if (choices == chunk.end() && chunk.contains("error")) {  // the engine's own error event
      std::string message = EngineErrorMessage(chunk);
      EmitError(message.empty() ? Dump(chunk["error"]) : message, out);
      return true;
    }
    if (choices != chunk.end() && !choices->is_null() && !choices->is_array()) {
      return Fail("the engine's chunk has no choices array");
    }
    bool has_usage = false;
    if (auto u = chunk.find("usage"); u != chunk.end() && !u->is_null()) {
      std::string error_text;
      if (!ReadUsage(*u, options, &usage, &error_text)) return Fail(error_text);
      has_usage = true;
    }
    Start(out);
    if (delta_sent) return true;  // between the usage chunk and [DONE]: nothing more for the client
    const bool no_choices = choices == chunk.end() || choices->is_null() || choices->empty();
    if (!no_choices) {
      for (const Json& choice : *choices) {
        if (!HandleChoice(choice, out)) return false;
      }
    }
    // The usage chunk (stream_options.include_usage) is the engine's last
    // before [DONE].
    if (no_choices && has_usage) return EndMessage(out);
    return true;
  }

  bool HandleLine(std::string_view line, std::string* out) {
    if (line.empty()) return DispatchEvent(out);
    if (line.front() == ':') return true;  // an SSE comment (keep-alive)
    size_t colon = line.find(':');
    if (line.substr(0, colon) != "data") return true;  // event:, id:, retry: mean nothing here
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    if (value.starts_with(' ')) value.remove_prefix(1);
    if (has_event_data) event_data += '\n';
    event_data += value;
    has_event_data = true;
    if (event_data.size() > kMaxEventBytes) return Fail("an engine SSE event is over 64 MiB");
    return true;
  }

  bool DispatchEvent(std::string* out) {
    if (!has_event_data) return true;
    std::string data = std::move(event_data);
    event_data.clear();
    has_event_data = false;
    return HandleEngineEvent(data, out);
  }

  bool Feed(std::string_view bytes, std::string* out) {
    if (failed) return false;
    if (ended) return true;  // nothing after message_stop or an error is the client's: not even kept
    line_buffer += bytes;
    size_t line_start = 0;
    for (size_t newline; (newline = line_buffer.find('\n', line_scanned)) != std::string::npos;) {
      std::string_view line(line_buffer.data() + line_start, newline - line_start);
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!HandleLine(line, out)) return false;
      line_start = line_scanned = newline + 1;
      if (ended) {
        std::string().swap(line_buffer);
        line_scanned = 0;
        return true;
      }
    }
    line_buffer.erase(0, line_start);
    line_scanned = line_buffer.size();
    if (line_buffer.size() > kMaxEventBytes) return Fail("an engine SSE line is over 64 MiB");
    return true;
  }

  bool Finish(std::string* out) {
    if (failed) return false;
    if (ended) return true;
    // An unterminated last line or an event without its blank line still
    // counts: the engine's stream ended there.
    if (!line_buffer.empty()) {
      std::string_view line = line_buffer;
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!HandleLine(line, out)) return false;
      line_buffer.clear();
    }
    if (!DispatchEvent(out)) return false;
    if (ended) return true;
    // Without [DONE] the answer is whole when its choice finished (an engine
    // that sends no [DONE]) or the usage chunk came; otherwise it was cut
    // off, and the client must not take it for whole.
    if (choice_finished || delta_sent) return StopMessage(out);
    EmitError("the engine's stream ended before its answer did", out);
    return true;
  }
};

MessagesStreamTranslator::MessagesStreamTranslator(MessagesTranslateOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}
MessagesStreamTranslator::~MessagesStreamTranslator() = default;
MessagesStreamTranslator::MessagesStreamTranslator(MessagesStreamTranslator&&) noexcept = default;
MessagesStreamTranslator& MessagesStreamTranslator::operator=(MessagesStreamTranslator&&) noexcept = default;

const std::string& MessagesStreamTranslator::error() const { return state_->error; }

bool MessagesStreamTranslator::Feed(std::string_view bytes, std::string* out) {
  try {
    return state_->Feed(bytes, out);
  } catch (const std::exception& e) {
    return state_->Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

bool MessagesStreamTranslator::Finish(std::string* out) {
  try {
    return state_->Finish(out);
  } catch (const std::exception& e) {
    return state_->Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

// ---- the ResponseTranslator ----

namespace {


// An engine's error answer (any status >= 400, whatever its body) as
// Anthropic's error object, so an Anthropic client reads it in its own shape.
class AnthropicErrorResponse final : public ResponseTranslator {
 public:
  AnthropicErrorResponse(int status, size_t max_bytes) : status_(status), max_bytes_(max_bytes) {}
  bool streaming() const override { return false; }
  bool Feed(std::string_view bytes, bool last, std::string* out) override {
    // Past the bound only the first bytes are kept: an error body is read
    // for its message, and a huge one is not worth more.
    in_.append(bytes.substr(0, in_.size() < max_bytes_ ? max_bytes_ - in_.size() : 0));
    if (last) *out += AnthropicErrorFromEngine(status_, in_);
    return true;
  }
  const std::string& error() const override { return error_; }

 private:
  int status_;
  size_t max_bytes_;
  std::string in_;
  std::string error_;
};

}  // namespace

std::unique_ptr<ResponseTranslator> MakeAnthropicErrorTranslator(int status, size_t max_whole_bytes) {
  return std::make_unique<AnthropicErrorResponse>(status, max_whole_bytes);
}

std::unique_ptr<ResponseTranslator> MakeMessagesTranslator(std::unique_ptr<ResponseTranslator> inner,
                                                           MessagesTranslateOptions options, bool stream,
                                                           size_t max_whole_bytes) {
  if (stream) {
    return std::make_unique<ChainedStreamResponse<MessagesStreamTranslator>>(std::move(inner),
                                                                         MessagesStreamTranslator(std::move(options)));
  }
  return std::make_unique<ChainedWholeResponse<MessagesTranslateOptions>>(std::move(inner), std::move(options),
                                                                      &TranslateChatToMessage, max_whole_bytes);
}

}  // namespace toktier::api
