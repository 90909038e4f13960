// Chat completions -> OpenAI Responses translation (see
// responses_response.h). The whole path and the stream share the item, id,
// usage and response-object builders below, so that a stream's final
// response.completed object is the body the whole path gives for the same
// answer.
#include "api/responses_response.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <optional>
#include <set>
#include <utility>

#include "api/chat_answer_reading.h"
#include "api/json_limits.h"

namespace toktier::api {
namespace {

using Json = nlohmann::ordered_json;  // ordered: output keys keep the order they are written in

// A longer SSE line or event is not an engine's stream: refuse it rather
// than grow.
constexpr size_t kMaxEventBytes = size_t{64} << 20;
// The stream keeps every item's text until response.completed repeats it
// all: the answer's text, reasoning and arguments together are bounded like
// one engine event.
constexpr size_t kMaxOutputBytes = size_t{64} << 20;

using chat_answer::Dump;
using chat_answer::ParseJson;
using chat_answer::ReadCount;
using chat_answer::ReadReasoning;
using chat_answer::ReadString;
using chat_answer::SetError;
using chat_answer::Trim;

// `key` of `object` as an object, or null when absent or null.
bool ReadDetails(const Json& object, const char* key, const Json** out, std::string* error) {
  *out = nullptr;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_object()) return SetError(error, std::string("the engine's usage.") + key + " is not an object");
  *out = &*it;
  return true;
}

// Responses counts cached prompt tokens inside input_tokens (as chat's
// prompt_tokens does, unlike Anthropic's input_tokens).
struct Usage {
  uint64_t input = 0;
  uint64_t cached = 0;
  uint64_t output = 0;
  uint64_t reasoning = 0;
};

Usage DefaultUsage(const ResponsesTranslateOptions& options) { return Usage{options.prompt_tokens, 0, 0, 0}; }

// An OpenAI usage object; the prompt's size falls back to what the proxy
// counted itself.
bool ReadUsage(const Json& usage, const ResponsesTranslateOptions& options, Usage* out, std::string* error) {
  if (!usage.is_object()) return SetError(error, "the engine's usage is not an object");
  std::optional<uint64_t> prompt, completion, cached, reasoning;
  const Json* prompt_details = nullptr;
  const Json* completion_details = nullptr;
  if (!ReadCount(usage, "prompt_tokens", &prompt, error) ||
      !ReadCount(usage, "completion_tokens", &completion, error) ||
      !ReadDetails(usage, "prompt_tokens_details", &prompt_details, error) ||
      !ReadDetails(usage, "completion_tokens_details", &completion_details, error))
    return false;
  if (prompt_details && !ReadCount(*prompt_details, "cached_tokens", &cached, error)) return false;
  if (completion_details && !ReadCount(*completion_details, "reasoning_tokens", &reasoning, error)) return false;
  out->input = prompt.value_or(options.prompt_tokens);
  out->cached = std::min(cached.value_or(0), out->input);
  out->output = completion.value_or(0);
  out->reasoning = std::min(reasoning.value_or(0), out->output);
  return true;
}

Json UsageJson(const Usage& usage) {
  const uint64_t total = usage.input > UINT64_MAX - usage.output ? UINT64_MAX : usage.input + usage.output;
  Json json = Json::object();
  json["input_tokens"] = usage.input;
  // cache_write_tokens: the SDK's type requires it; a prefix cache has no
  // separately billed writes.
  json["input_tokens_details"] = {{"cached_tokens", usage.cached}, {"cache_write_tokens", 0}};
  json["output_tokens"] = usage.output;
  json["output_tokens_details"] = {{"reasoning_tokens", usage.reasoning}};
  json["total_tokens"] = total;
  return json;
}

// The response id without its "resp_" prefix: the item and call ids below
// derive from it, so that a stream and a body agree and ids are unique
// within the response.
std::string_view IdBase(const std::string& response_id) {
  std::string_view base = response_id;
  if (base.starts_with("resp_")) base.remove_prefix(5);
  return base;
}

// "rs_", "msg_" or "fc_" + base + the item's output index.
std::string ItemId(std::string_view prefix, const std::string& response_id, size_t output_index) {
  std::string id(prefix);
  id += '_';
  if (std::string_view base = IdBase(response_id); !base.empty()) (id += base) += '_';
  return id += std::to_string(output_index);
}

// For a tool call the engine sent without an id: its position among the
// answer's calls.
std::string CallId(const std::string& response_id, size_t position) { return ItemId("call", response_id, position); }

Json OutputTextPart(std::string text) {
  return {{"type", "output_text"},
          {"text", std::move(text)},
          {"annotations", Json::array()},
          {"logprobs", Json::array()}};
}

Json ReasoningTextPart(std::string text) { return {{"type", "reasoning_text"}, {"text", std::move(text)}}; }

// `content`: [] while the item streams, its one part once done.
Json ReasoningItem(const std::string& id, Json content, std::string_view status) {
  return {{"id", id},
          {"type", "reasoning"},
          {"summary", Json::array()},
          {"content", std::move(content)},
          {"status", status}};
}

Json MessageItem(const std::string& id, Json content, std::string_view status) {
  return {{"id", id}, {"type", "message"}, {"role", "assistant"}, {"status", status}, {"content", std::move(content)}};
}

// A tool's name as the client knows it: a call of a namespace's tool (the
// prompt's "<namespace>__<name>") is named back by the request's tools.
struct ClientToolName {
  std::string name;
  std::string ns;  // "" when the tool is no namespace's
};

ClientToolName ClientNameOf(const NamespacedTools& tools, const std::string& prompt_name) {
  if (auto it = tools.find(prompt_name); it != tools.end()) return {it->second.name, it->second.ns};
  return {prompt_name, ""};
}

Json FunctionCallItem(const std::string& id, const std::string& call_id, const ClientToolName& name,
                      std::string arguments, std::string_view status) {
  Json item = {{"id", id},           {"type", "function_call"}, {"status", status},
               {"call_id", call_id}, {"name", name.name}};
  if (!name.ns.empty()) item["namespace"] = name.ns;
  item["arguments"] = std::move(arguments);
  return item;
}

// How the answer ended in Responses terms. "length" is the request's
// max_output_tokens (the chat request's max_tokens); the response and its
// last item are then incomplete, as OpenAI marks them.
struct End {
  std::string_view status = "completed";
  Json incomplete_details;  // null unless incomplete
};

End EndOf(const std::optional<std::string>& finish_reason) {
  if (finish_reason == "length") return {"incomplete", {{"reason", "max_output_tokens"}}};
  if (finish_reason == "content_filter") return {"incomplete", {{"reason", "content_filter"}}};
  return {};  // stop, tool_calls, none, or one Responses has no name for
}

// The response object. Fields the request echo lacks take the defaults
// OpenAI answers with (and the SDK's types allow); an echoed null takes the
// default too, as some of these may not be null. Echo fields beyond the
// known ones follow them; the echo never overrides what the answer decides.
Json ResponseJson(const ResponsesTranslateOptions& options, std::string_view status, Json error,
                  Json incomplete_details, Json output, Json usage) {
  static const Json kNoEcho = Json::object();
  const Json& echo = options.request_echo.is_object() ? options.request_echo : kNoEcho;
  auto echoed = [&](const char* key, Json fallback) -> Json {
    auto it = echo.find(key);
    return it == echo.end() || it->is_null() ? std::move(fallback) : *it;
  };
  Json json = Json::object();
  json["id"] = options.id;
  json["object"] = "response";
  json["created_at"] = options.created_at;
  json["status"] = status;
  json["error"] = std::move(error);
  json["incomplete_details"] = std::move(incomplete_details);
  json["instructions"] = echoed("instructions", nullptr);
  json["max_output_tokens"] = echoed("max_output_tokens", nullptr);
  json["model"] = options.model;
  json["output"] = std::move(output);
  json["parallel_tool_calls"] = echoed("parallel_tool_calls", true);
  json["previous_response_id"] = echoed("previous_response_id", nullptr);
  json["reasoning"] = echoed("reasoning", nullptr);
  json["store"] = echoed("store", false);  // absent: false, as the proxy keeps no responses
  json["temperature"] = echoed("temperature", nullptr);  // null: the engine's default applied
  json["text"] = echoed("text", {{"format", {{"type", "text"}}}});
  json["tool_choice"] = echoed("tool_choice", "auto");
  json["tools"] = echoed("tools", Json::array());
  json["top_p"] = echoed("top_p", nullptr);
  json["truncation"] = echoed("truncation", "disabled");
  json["usage"] = std::move(usage);
  json["metadata"] = echoed("metadata", Json::object());
  for (auto it = echo.begin(); it != echo.end(); ++it) {
    // output_text is the SDK's own convenience field, never the server's.
    if (it.key() != "output_text" && !json.contains(it.key())) json[it.key()] = it.value();
  }
  return json;
}

// A chat tool call -> a function_call item. The arguments string goes on as
// it is (the client parses it); an object some servers send is its JSON
// text, none is "".
bool FunctionCallFromChat(const Json& call, const ResponsesTranslateOptions& options, size_t position,
                          size_t output_index, Json* item, std::string* error) {
  if (!call.is_object()) return SetError(error, "a tool call is not an object");
  auto function = call.find("function");
  if (function == call.end() || !function->is_object()) return SetError(error, "a tool call has no function");
  std::optional<std::string> id, name;
  if (!ReadString(call, "id", &id, error) || !ReadString(*function, "name", &name, error)) return false;
  if (!name || name->empty()) return SetError(error, "a tool call has no name");
  std::string arguments;
  if (auto it = function->find("arguments"); it != function->end() && !it->is_null()) {
    if (it->is_string()) {
      arguments = it->get<std::string>();
    } else if (it->is_object()) {
      arguments = Dump(*it);
    } else {
      return SetError(error, "a tool call's arguments are not a string");
    }
  }
  *item = FunctionCallItem(ItemId("fc", options.id, output_index),
                           id && !id->empty() ? *id : CallId(options.id, position),
                           ClientNameOf(options.namespaced_tools, *name), std::move(arguments),
                           "completed");
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

bool TranslateWhole(std::string_view chat_json, const ResponsesTranslateOptions& options, std::string* response_json,
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

    Json output = Json::array();
    if (reasoning && !reasoning->empty()) {
      output.push_back(ReasoningItem(ItemId("rs", options.id, output.size()),
                                     Json::array({ReasoningTextPart(std::move(*reasoning))}), "completed"));
    }
    if (text && !text->empty()) {
      output.push_back(MessageItem(ItemId("msg", options.id, output.size()),
                                   Json::array({OutputTextPart(std::move(*text))}), "completed"));
    }
    if (auto calls = message->find("tool_calls"); calls != message->end() && !calls->is_null()) {
      if (!calls->is_array()) return SetError(error, "the engine's tool_calls is not an array");
      size_t position = 0;
      for (const Json& call : *calls) {
        Json item;
        if (!FunctionCallFromChat(call, options, position++, output.size(), &item, error)) return false;
        output.push_back(std::move(item));
      }
    }

    Usage usage = DefaultUsage(options);
    if (auto u = chat.find("usage"); u != chat.end() && !u->is_null()) {
      if (!ReadUsage(*u, options, &usage, error)) return false;
    }
    End end = EndOf(finish_reason);
    if (end.status == "incomplete" && !output.empty()) output.back()["status"] = "incomplete";
    *response_json = Dump(ResponseJson(options, end.status, nullptr, std::move(end.incomplete_details),
                                       std::move(output), UsageJson(usage)));
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

}  // namespace

core::Status TranslateChatToResponse(std::string_view chat_json, const ResponsesTranslateOptions& options,
                                     std::string* response_json) {
  std::string error;
  if (!TranslateWhole(chat_json, options, response_json, &error)) return core::Status::Error(std::move(error));
  return core::Status::Ok();
}

// ---- the stream ----

struct ResponsesStreamTranslator::State {
  explicit State(ResponsesTranslateOptions o) : options(std::move(o)), usage(DefaultUsage(options)) {}

  enum class Item { kNone, kReasoning, kMessage, kFunctionCall };

  ResponsesTranslateOptions options;
  // The engine's SSE.
  std::string line_buffer;  // bytes after the last complete line
  size_t line_scanned = 0;  // line_buffer[0, line_scanned) holds no '\n'
  std::string event_data;   // the current event's data lines, joined by '\n'
  bool has_event_data = false;
  bool failed = false;
  std::string error;
  // The response so far.
  uint64_t sequence = 0;         // the next event's sequence_number
  bool started = false;          // response.created and .in_progress went out
  Json output = Json::array();   // the items done so far
  Item open = Item::kNone;       // the item being streamed (its output index: output.size())
  std::string open_id;           // its id
  std::string open_text;         // its text, reasoning or arguments so far
  std::string open_call_id;      // a function call's call_id and name
  ClientToolName open_name;
  int64_t open_tool = -1;        // the engine's index of the open call
  std::string open_tool_engine_id;  // its engine id ("" when the engine gave none)
  std::set<int64_t> tools_seen;
  size_t tool_calls = 0;
  size_t output_bytes = 0;       // all items' text so far (kMaxOutputBytes)
  bool choice_finished = false;  // choice 0's finish_reason came: later deltas are not the client's
  std::optional<std::string> finish_reason;
  Usage usage;
  bool ended = false;  // the terminal event went out: nothing follows

  bool Fail(std::string message) {
    failed = true;
    error = std::move(message);
    return false;
  }

  // An event's data, starting with its type and sequence number.
  Json EventData(std::string_view type) {
    Json data = Json::object();
    data["type"] = type;
    data["sequence_number"] = sequence++;
    return data;
  }

  static void Emit(const Json& data, std::string* out) {
    *out += "event: ";
    *out += data["type"].get_ref<const std::string&>();
    *out += "\ndata: ";
    *out += Dump(data);
    *out += "\n\n";
  }

  void Start(std::string* out) {
    if (started) return;
    started = true;
    for (std::string_view type : {"response.created", "response.in_progress"}) {
      Json data = EventData(type);
      data["response"] = ResponseJson(options, "in_progress", nullptr, nullptr, Json::array(), nullptr);
      Emit(data, out);
    }
  }

  // The open item as the response object lists it: whole so far.
  Json OpenItemJson(std::string_view status) const {
    switch (open) {
      case Item::kReasoning: return ReasoningItem(open_id, Json::array({ReasoningTextPart(open_text)}), status);
      case Item::kMessage: return MessageItem(open_id, Json::array({OutputTextPart(open_text)}), status);
      case Item::kFunctionCall: return FunctionCallItem(open_id, open_call_id, open_name, open_text, status);
      case Item::kNone: break;
    }
    return nullptr;
  }

  // Item events carry the item's id and output index (and its one content
  // part's index, 0).
  Json ItemEvent(std::string_view type, bool with_content_index) {
    Json data = EventData(type);
    data["item_id"] = open_id;
    data["output_index"] = output.size();
    if (with_content_index) data["content_index"] = 0;
    return data;
  }

  // output_item.added with an empty item, and for text its empty part.
  void OpenItem(Item kind, std::string* out) {
    open = kind;
    open_text.clear();
    const size_t index = output.size();
    Json item;
    if (kind == Item::kReasoning) {
      open_id = ItemId("rs", options.id, index);
      item = ReasoningItem(open_id, Json::array(), "in_progress");
    } else if (kind == Item::kMessage) {
      open_id = ItemId("msg", options.id, index);
      item = MessageItem(open_id, Json::array(), "in_progress");
    } else {
      open_id = ItemId("fc", options.id, index);
      item = FunctionCallItem(open_id, open_call_id, open_name, "", "in_progress");
    }
    Json added = EventData("response.output_item.added");
    added["output_index"] = index;
    added["item"] = std::move(item);
    Emit(added, out);
    if (kind == Item::kFunctionCall) return;
    Json part = ItemEvent("response.content_part.added", true);
    part["part"] = kind == Item::kReasoning ? ReasoningTextPart("") : OutputTextPart("");
    Emit(part, out);
  }

  // The open item's done events (its text whole), then it joins the output.
  void CloseItem(std::string_view status, std::string* out) {
    if (open == Item::kNone) return;
    if (open == Item::kFunctionCall) {
      Json done = ItemEvent("response.function_call_arguments.done", false);
      done["name"] = open_name.name;
      done["arguments"] = open_text;
      Emit(done, out);
    } else {
      const bool reasoning = open == Item::kReasoning;
      Json done = ItemEvent(reasoning ? "response.reasoning_text.done" : "response.output_text.done", true);
      done["text"] = open_text;
      if (!reasoning) done["logprobs"] = Json::array();
      Emit(done, out);
      Json part = ItemEvent("response.content_part.done", true);
      part["part"] = reasoning ? ReasoningTextPart(open_text) : OutputTextPart(open_text);
      Emit(part, out);
    }
    Json item_done = EventData("response.output_item.done");
    item_done["output_index"] = output.size();
    item_done["item"] = OpenItemJson(status);
    Emit(item_done, out);
    output.push_back(std::move(item_done["item"]));
    open = Item::kNone;
    std::string().swap(open_text);
  }

  bool Grow(size_t bytes) {
    if (bytes > kMaxOutputBytes - output_bytes) return Fail("the answer's output is over 64 MiB");
    output_bytes += bytes;
    return true;
  }

  // Text or reasoning: into the open item of that kind, else a new one.
  bool AppendText(Item kind, const std::string& text, std::string* out) {
    if (text.empty()) return true;
    if (!Grow(text.size())) return false;
    if (open != kind) {
      CloseItem("completed", out);
      OpenItem(kind, out);
    }
    open_text += text;
    const bool reasoning = kind == Item::kReasoning;
    Json delta = ItemEvent(reasoning ? "response.reasoning_text.delta" : "response.output_text.delta", true);
    delta["delta"] = text;
    if (!reasoning) delta["logprobs"] = Json::array();
    Emit(delta, out);
    return true;
  }

  // One entry of a delta's tool_calls: a call's start (its first entry has
  // the name) or more of the open call's arguments. Calls come one after the
  // other: an item's done events went out when the next began, so arguments
  // for a call whose item was closed are malformed, not dropped.
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
    } else if (open == Item::kFunctionCall && (!id || *id == open_tool_engine_id)) {
      index = open_tool;  // no index (not OpenAI's shape, seen elsewhere): the open call's
    } else if (tools_seen.empty()) {
      index = 0;
    } else if (*tools_seen.rbegin() == INT64_MAX) {
      return Fail("bad tool call index");
    } else {
      index = *tools_seen.rbegin() + 1;
    }

    if (open != Item::kFunctionCall || index != open_tool) {
      if (tools_seen.contains(index)) return Fail("a tool call's deltas resumed after another item began");
      if (!name || name->empty()) return Fail("a tool call starts without a name");
      if (!Grow(name->size())) return false;
      CloseItem("completed", out);
      open_call_id = id ? *id : CallId(options.id, tool_calls);
      open_name = ClientNameOf(options.namespaced_tools, *name);
      OpenItem(Item::kFunctionCall, out);
      open_tool = index;
      open_tool_engine_id = id.value_or("");
      tools_seen.insert(index);
      ++tool_calls;
    }
    if (arguments && !arguments->empty()) {
      if (!Grow(arguments->size())) return false;
      open_text += *arguments;
      Json delta = ItemEvent("response.function_call_arguments.delta", false);
      delta["delta"] = *arguments;
      Emit(delta, out);
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
      if (reasoning && !AppendText(Item::kReasoning, *reasoning, out)) return false;
      if (text && !AppendText(Item::kMessage, *text, out)) return false;
      if (auto calls = delta->find("tool_calls"); calls != delta->end() && !calls->is_null()) {
        if (!calls->is_array()) return Fail("a delta's tool_calls is not an array");
        for (const Json& call : *calls) {
          if (!ToolCallDelta(call, out)) return false;
        }
      }
    }
    if (finish) {
      finish_reason = std::move(finish);
      choice_finished = true;
    }
    return true;
  }

  // The open item closes (the last one: incomplete with the response), and
  // response.completed or .incomplete carries the whole response.
  void EndResponse(std::string* out) {
    Start(out);
    End end = EndOf(finish_reason);
    const bool incomplete = end.status == "incomplete";
    CloseItem(incomplete ? "incomplete" : "completed", out);
    Json data = EventData(incomplete ? "response.incomplete" : "response.completed");
    data["response"] = ResponseJson(options, end.status, nullptr, std::move(end.incomplete_details), std::move(output),
                                    UsageJson(usage));
    Emit(data, out);
    output = Json::array();
    ended = true;
  }

  // response.failed: the error in the response object, with the items so
  // far (the open one incomplete; its done events never went out).
  void EmitFailed(std::string_view message, std::string* out) {
    Start(out);
    Json items = std::move(output);
    if (open != Item::kNone) items.push_back(OpenItemJson("incomplete"));
    Json data = EventData("response.failed");
    data["response"] = ResponseJson(options, "failed", {{"code", "server_error"}, {"message", message}}, nullptr,
                                    std::move(items), nullptr);
    Emit(data, out);
    output = Json::array();
    open = Item::kNone;
    std::string().swap(open_text);
    ended = true;
  }

  bool HandleEngineEvent(const std::string& data, std::string* out) {
    if (ended) return true;
    if (Trim(data) == "[DONE]") {
      EndResponse(out);
      return true;
    }
    Json chunk = ParseJson(data);
    if (!chunk.is_object()) return Fail("malformed JSON in the engine's stream");
    auto choices = chunk.find("choices");
    if (choices == chunk.end() && chunk.contains("error")) {  // the engine's own error event
      std::string message = EngineErrorMessage(chunk);
      EmitFailed(message.empty() ? Dump(chunk["error"]) : message, out);
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
    const bool no_choices = choices == chunk.end() || choices->is_null() || choices->empty();
    if (!no_choices) {
      for (const Json& choice : *choices) {
        if (!HandleChoice(choice, out)) return false;
      }
    }
    // The usage chunk (stream_options.include_usage) is the engine's last
    // before [DONE]: the response is whole.
    if (no_choices && has_usage) EndResponse(out);
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
    if (ended) return true;  // nothing after the terminal event is the client's: not even kept
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
    // Without [DONE] or the usage chunk the answer is whole when its choice
    // finished (an engine that sends neither); otherwise it was cut off, and
    // the client must not take it for whole.
    if (choice_finished) {
      EndResponse(out);
    } else {
      EmitFailed("the engine's stream ended before its answer did", out);
    }
    return true;
  }
};

ResponsesStreamTranslator::ResponsesStreamTranslator(ResponsesTranslateOptions options)
    : state_(std::make_unique<State>(std::move(options))) {}
ResponsesStreamTranslator::~ResponsesStreamTranslator() = default;
ResponsesStreamTranslator::ResponsesStreamTranslator(ResponsesStreamTranslator&&) noexcept = default;
ResponsesStreamTranslator& ResponsesStreamTranslator::operator=(ResponsesStreamTranslator&&) noexcept = default;

const std::string& ResponsesStreamTranslator::error() const { return state_->error; }

bool ResponsesStreamTranslator::Feed(std::string_view bytes, std::string* out) {
  try {
    return state_->Feed(bytes, out);
  } catch (const std::exception& e) {
    return state_->Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

bool ResponsesStreamTranslator::Finish(std::string* out) {
  try {
    return state_->Finish(out);
  } catch (const std::exception& e) {
    return state_->Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

// ---- the ResponseTranslator ----

std::unique_ptr<ResponseTranslator> MakeResponsesTranslator(std::unique_ptr<ResponseTranslator> inner,
                                                            ResponsesTranslateOptions options, bool stream,
                                                            size_t max_whole_bytes) {
  if (stream) {
    return std::make_unique<ChainedStreamResponse<ResponsesStreamTranslator>>(std::move(inner),
                                                                         ResponsesStreamTranslator(std::move(options)));
  }
  return std::make_unique<ChainedWholeResponse<ResponsesTranslateOptions>>(std::move(inner), std::move(options),
                                                                      &TranslateChatToResponse, max_whole_bytes);
}

}  // namespace toktier::api
