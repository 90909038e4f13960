// vLLM's conversation rules (api/chat_conversation.h): its chat_utils'
// _parse_chat_message_content, _postprocess_messages and the tools'
// model_dump(), re-expressed here for text-only models.
#include "api/chat_conversation.h"

#include "api/json_tree.h"

#include <string>
#include <type_traits>
#include <vector>

namespace toktier::api {

using nlohmann::ordered_json;

namespace {

bool Fail(RequestError* error, std::string message, std::string param = "messages") {
  error->status = 400;
  error->message = std::move(message);
  error->param = std::move(param);
  return false;
}

// `Json` is `const ordered_json` (the request's strings are copied) or
// `ordered_json` (moved: the caller gave the messages away).
template <typename Json>
using StringPtr = std::conditional_t<std::is_const_v<Json>, const std::string*, std::string*>;

template <typename Json>
std::string Take(StringPtr<Json> s) {
  if constexpr (std::is_const_v<Json>) return *s;
  else return std::move(*s);
}

// The text parts of `content` (a string is one part, null none).
template <typename Json>
bool ContentTexts(Json& content, std::vector<StringPtr<Json>>* texts, RequestError* error) {
  if (content.is_null()) return true;
  if (content.is_string()) {
    texts->push_back(content.template get_ptr<StringPtr<Json>>());
    return true;
  }
  if (!content.is_array()) return Fail(error, "a message's 'content' must be a string, a list of parts or null.");
  for (auto& part : content) {
    if (part.is_string()) {  // vLLM takes a bare string as a text part
      texts->push_back(part.template get_ptr<StringPtr<Json>>());
      continue;
    }
    if (!part.is_object()) return Fail(error, "a content part must be an object with a 'type'.");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return Fail(error, "a content part must have a string 'type'.");
    // input_text/output_text: the Responses API's names of a text part
    // (vLLM parses them as text).
    if (*type != "text" && *type != "input_text" && *type != "output_text") {
      return Fail(error, "content parts of type '" + type->template get<std::string>() +
                             "' are not supported on the token path (text only).");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return Fail(error, "a text part must have a string 'text'.");
    texts->push_back(text->template get_ptr<StringPtr<Json>>());
  }
  return true;
}

template <typename Json>
std::string Joined(const std::vector<StringPtr<Json>>& texts) {
  if (texts.size() == 1) return Take<Json>(texts[0]);
  std::string out;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (i) out += '\n';
    out += *texts[i];
  }
  return out;
}

template <typename Json>
ordered_json Parts(const std::vector<StringPtr<Json>>& texts) {
  ordered_json parts = ordered_json::array();
  for (auto* t : texts) parts.push_back(ordered_json{{"type", "text"}, {"text", Take<Json>(t)}});
  return parts;
}

// An assistant's tool calls as the template sees them: each call's
// arguments parsed from their JSON string (a template writes them with
// tojson); arguments that are not JSON become {}, as in vLLM.
bool ToolCalls(const ordered_json& calls, ordered_json* out, RequestError* error) {
  if (!calls.is_array()) return Fail(error, "'tool_calls' must be a list.");
  *out = calls;
  for (auto& call : *out) {
    if (!call.is_object()) return Fail(error, "a tool call must be an object.");
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) return Fail(error, "a tool call must have a 'function' object.");
    auto args = fn->find("arguments");
    if (args == fn->end()) continue;  // vLLM reads a missing key as None: {}
    if (args->is_string()) {
      ordered_json parsed = ordered_json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      *args = parsed.is_discarded() ? ordered_json::object() : std::move(parsed);
    } else if (!args->is_object() && !args->is_array()) {
      *args = ordered_json::object();
    }
  }
  return true;
}

template <typename Json>
bool Build(Json& messages, chat::ContentFormat format, ordered_json* conversation, RequestError* error) {
  if (!messages.is_array()) return Fail(error, "'messages' must be a list.");
  ordered_json conv = ordered_json::array();
  for (auto& m : messages) {
    if (!m.is_object()) return Fail(error, "every message must be an object.");
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) return Fail(error, "every message must have a string 'role'.");
    const std::string& role = role_it->template get_ref<const std::string&>();
    std::vector<StringPtr<Json>> texts;
    if (auto c = m.find("content"); c != m.end() && !ContentTexts(*c, &texts, error)) return false;
    ordered_json msg = ObjectWithRoom(8);
    msg["role"] = role;
    const bool parts = format == chat::ContentFormat::kOpenAI;
    // A tool message's text parts read as one string (most templates take a
    // tool message's content as a string).
    if (parts && role != "tool") msg["content"] = Parts<Json>(texts); else msg["content"] = Joined<Json>(texts);
    if (role == "assistant") {
      if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
        ordered_json calls;
        if (!ToolCalls(*tc, &calls, error)) return false;
        // An empty list is dropped: the template takes the plain assistant path.
        if (!calls.empty()) msg["tool_calls"] = std::move(calls);
      }
      if (auto r = m.find("reasoning"); r != m.end() && !r->is_null()) {
        msg["reasoning"] = *r;
        msg["reasoning_content"] = *r;
      }
    } else if (role == "tool") {
      if (auto id = m.find("tool_call_id"); id != m.end()) msg["tool_call_id"] = *id;
    }
    if (auto name = m.find("name"); name != m.end() && name->is_string()) msg["name"] = *name;
    if (auto task = m.find("task"); task != m.end() && task->is_string()) msg["task"] = *task;
    if (role == "developer") {
      auto tools = m.find("tools");
      msg["tools"] = tools != m.end() ? *tools : ordered_json(nullptr);
    }
    conv.push_back(std::move(msg));
  }
  *conversation = std::move(conv);
  return true;
}

}  // namespace

bool BuildConversation(const ordered_json& messages, chat::ContentFormat format, ordered_json* conversation,
                       RequestError* error) {
  return Build(messages, format, conversation, error);
}

bool BuildConversation(ordered_json&& messages, chat::ContentFormat format, ordered_json* conversation,
                       RequestError* error) {
  return Build(messages, format, conversation, error);
}

bool BuildToolDicts(const ordered_json& tools, ordered_json* dicts, RequestError* error) {
  if (!tools.is_array()) return Fail(error, "'tools' must be a list.", "tools");
  ordered_json out = ordered_json::array();
  for (const auto& t : tools) {
    if (!t.is_object()) return Fail(error, "every tool must be an object.", "tools");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) return Fail(error, "every tool must have a 'function' object.", "tools");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return Fail(error, "every tool's function must have a string 'name'.", "tools");
    if (auto type = t.find("type"); type != t.end() && *type != "function") {
      return Fail(error, "only tools of type 'function' can be rendered.", "tools");
    }
    ordered_json f = ordered_json::object();
    f["name"] = *name;
    auto desc = fn->find("description");
    f["description"] = desc != fn->end() ? *desc : ordered_json(nullptr);
    auto params = fn->find("parameters");
    f["parameters"] = params != fn->end() ? *params : ordered_json(nullptr);
    for (const auto& [k, v] : fn->items()) {
      if (k == "name" || k == "description" || k == "parameters") continue;
      if (k == "defer_loading" && v.is_null()) continue;
      f[k] = v;
    }
    ordered_json d = ordered_json::object();
    d["type"] = "function";
    d["function"] = std::move(f);
    for (const auto& [k, v] : t.items()) {
      if (k != "type" && k != "function") d[k] = v;
    }
    out.push_back(std::move(d));
  }
  *dicts = std::move(out);
  return true;
}

void ApplyReasoningEffort(const std::string& effort, ordered_json* kwargs) {
  if (effort == "auto") return;
  (*kwargs)["reasoning_effort"] = effort;
  if (!kwargs->contains("enable_thinking")) (*kwargs)["enable_thinking"] = effort != "none";
}

}  // namespace toktier::api
