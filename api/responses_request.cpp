// OpenAI Responses -> chat completions (api/responses_request.h).
#include "api/responses_request.h"
#include "api/json_tree.h"

#include <unordered_set>

namespace toktier::api {

using nlohmann::ordered_json;

namespace {

bool Fail(RequestError* error, std::string message, std::string param = "") {
  error->status = 400;
  error->message = std::move(message);
  error->param = std::move(param);
  return false;
}

// The first text of a content list (vLLM reads content[0] of assistant
// output and reasoning items), or the string itself.
std::string FirstText(const ordered_json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array() || content.empty()) return "";
  const auto& first = content[0];
  if (first.is_string()) return first.get<std::string>();
  if (first.is_object()) {
    auto t = first.find("text");
    if (t != first.end() && t->is_string()) return t->get<std::string>();
  }
  return "";
}

ordered_json* PrevAssistant(ordered_json& messages) {
  if (messages.empty()) return nullptr;
  ordered_json& last = messages.back();
  return last.value("role", "") == "assistant" ? &last : nullptr;
}

// Content parts the token path carries: text under its Responses names.
bool CheckParts(const ordered_json& content, RequestError* error) {
  if (content.is_string() || content.is_null()) return true;
  if (!content.is_array()) return Fail(error, "input: a message's content must be a string or a list of parts.", "input");
  for (const auto& part : content) {
    if (!part.is_object()) return Fail(error, "input: content parts must be objects.", "input");
    const std::string type = part.value("type", "");
    if (type != "input_text" && type != "output_text" && type != "text") {
      return Fail(error, "input: content parts of type '" + type + "' are not supported on the token path (text only).",
                  "input");
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) return Fail(error, "input: a text part needs a string 'text'.", "input");
  }
  return true;
}

// A function tool as vLLM hands it on: the fields of its
// FunctionDefinition only, strict and defer_loading only when set.
bool FunctionTool(const ordered_json& t, const std::string& name, ordered_json* list, RequestError* error) {
  ordered_json fn = ordered_json::object();
  fn["name"] = name;
  if (auto d = t.find("description"); d != t.end()) fn["description"] = *d;
  if (auto p = t.find("parameters"); p != t.end()) {
    if (!p->is_object() && !p->is_null()) {
      return Fail(error, "tools: a function tool's 'parameters' must be an object.", "tools");
    }
    fn["parameters"] = *p;
  }
  for (const char* k : {"strict", "defer_loading"}) {
    if (auto it = t.find(k); it != t.end() && !it->is_null()) fn[k] = *it;
  }
  list->push_back(ordered_json{{"type", "function"}, {"function", std::move(fn)}});
  return true;
}

ordered_json ToolCall(const std::string& call_id, const std::string& name, ordered_json arguments) {
  return ordered_json{
      {"id", call_id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", std::move(arguments)}}}};
}

// One input item -> appended to (or merged into the last of) *messages.
// The item's values are moved, not copied: the caller's tree is its own and
// is not read again.
bool ConvertItem(ordered_json& item, ordered_json* messages, RequestError* error) {
  if (!item.is_object()) return Fail(error, "input: every item must be an object.", "input");
  const std::string type = item.value("type", "");
  const std::string role = item.value("role", "");
  ordered_json* prev = PrevAssistant(*messages);
  if (type == "function_call" || type == "custom_tool_call") {
    auto call_id = item.find("call_id");
    auto name = item.find("name");
    if (call_id == item.end() || !call_id->is_string() || name == item.end() || !name->is_string()) {
      return Fail(error, "input: a " + type + " item needs string 'call_id' and 'name'.", "input");
    }
    const char* args_key = type == "function_call" ? "arguments" : "input";
    auto args = item.find(args_key);
    // A call of a namespace's tool names the tool as the tools list does.
    std::string full_name = name->get<std::string>();
    if (auto ns = item.find("namespace"); ns != item.end() && ns->is_string() && !ns->get_ref<const std::string&>().empty()) {
      full_name = NamespacedToolName(ns->get<std::string>(), full_name);
    }
    ordered_json call = ToolCall(*call_id, full_name, args != item.end() ? std::move(*args) : ordered_json(""));
    if (prev) {
      auto tc = prev->find("tool_calls");
      if (tc == prev->end() || tc->is_null()) {
        (*prev)["tool_calls"] = ordered_json::array({std::move(call)});
        return true;
      }
      if (tc->is_array()) {
        tc->push_back(std::move(call));
        return true;
      }
    }
    messages->push_back(ordered_json{{"role", "assistant"}, {"tool_calls", ordered_json::array({std::move(call)})}});
    return true;
  }
  if (type == "function_call_output" || type == "custom_tool_call_output") {
    auto output = item.find("output");
    ordered_json content = output != item.end() ? std::move(*output) : ordered_json(nullptr);
    if (!CheckParts(content, error)) return false;
    messages->push_back(ordered_json{{"role", "tool"}, {"content", std::move(content)},
                                     {"tool_call_id", item.value("call_id", ordered_json(nullptr))}});
    return true;
  }
  if (type == "reasoning") {
    if (auto enc = item.find("encrypted_content"); enc != item.end() && enc->is_string() && !enc->get_ref<const std::string&>().empty()) {
      return Fail(error, "input: encrypted reasoning content is not supported (toktier cannot decrypt it).", "input");
    }
    std::string text;
    auto content = item.find("content");
    auto summary = item.find("summary");
    if (content != item.end() && content->is_array() && !content->empty()) {
      text = FirstText(*content);
    } else if (summary != item.end() && summary->is_array() && !summary->empty()) {
      text = FirstText(*summary);
    }
    if (prev && (!prev->contains("reasoning") || (*prev)["reasoning"].is_null())) {
      (*prev)["reasoning"] = std::move(text);
      return true;
    }
    messages->push_back(ordered_json{{"role", "assistant"}, {"reasoning", std::move(text)}});
    return true;
  }
  if ((type == "message" || type.empty()) && role == "assistant") {
    auto content = item.find("content");
    if (content != item.end() && !CheckParts(*content, error)) return false;
    std::string text = content != item.end() ? FirstText(*content) : "";
    if (prev && (!prev->contains("content") || (*prev)["content"].is_null())) {
      (*prev)["content"] = std::move(text);
      return true;
    }
    messages->push_back(ordered_json{{"role", "assistant"}, {"content", std::move(text)}});
    return true;
  }
  if ((type == "message" || type.empty()) && (role == "user" || role == "system" || role == "developer")) {
    auto content = item.find("content");
    if (content == item.end()) return Fail(error, "input: a message needs 'content'.", "input");
    if (!CheckParts(*content, error)) return false;
    // vLLM passes such an item on as the chat message itself.
    messages->push_back(std::move(item));
    return true;
  }
  if (type == "item_reference") {
    return Fail(error, "input: item_reference needs stored responses, which toktier does not keep; send the items.", "input");
  }
  return Fail(error, "input: items of type '" + (type.empty() ? role : type) + "' are not supported on the token path.",
              "input");
}

}  // namespace

std::string NamespacedToolName(const std::string& ns, const std::string& name) { return ns + "__" + name; }

bool ParseResponsesRequest(std::string_view body, ResponsesRequest* out, RequestError* error, size_t max_depth,
                           std::shared_ptr<void>* leftovers) {
  ordered_json b;
  const JsonParseOutcome parsed = ParseBoundedJson(body, max_depth, &b);
  if (parsed == JsonParseOutcome::kTooDeep) return Fail(error, TooDeepMessage(max_depth));
  if (parsed != JsonParseOutcome::kOk || !b.is_object()) return Fail(error, "The request body must be one JSON object.");
  auto model = b.find("model");
  if (model == b.end() || !model->is_string()) return Fail(error, "'model' must be a string.", "model");
  out->model = model->get<std::string>();
  if (auto prev = b.find("previous_response_id"); prev != b.end() && !prev->is_null()) {
    return Fail(error,
                "previous_response_id is not supported: toktier keeps no responses. Send the whole conversation in "
                "'input' (store: false), as Codex does.",
                "previous_response_id");
  }
  if (auto s = b.find("stream"); s != b.end() && !s->is_null()) {
    if (!s->is_boolean()) return Fail(error, "'stream' must be a boolean.", "stream");
    out->stream = s->get<bool>();
  }
  ordered_json messages = ordered_json::array();
  if (auto ins = b.find("instructions"); ins != b.end() && !ins->is_null()) {
    if (!ins->is_string()) return Fail(error, "'instructions' must be a string.", "instructions");
    if (!ins->get_ref<const std::string&>().empty()) messages.push_back(ordered_json{{"role", "system"}, {"content", *ins}});
  }
  auto input = b.find("input");
  if (input == b.end() || input->is_null()) return Fail(error, "'input' is required.", "input");
  if (input->is_string()) {
    messages.push_back(ordered_json{{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    for (auto& item : *input) {
      if (!ConvertItem(item, &messages, error)) return false;
    }
  } else {
    return Fail(error, "'input' must be a string or a list of items.", "input");
  }
  if (messages.empty()) return Fail(error, "'input' holds no message.", "input");

  ordered_json c = ObjectWithRoom(16);
  c["model"] = out->model;
  c["messages"] = std::move(messages);
  if (auto mt = b.find("max_output_tokens"); mt != b.end() && !mt->is_null()) {
    if (!mt->is_number_integer() || mt->get<int64_t>() < 1) {
      return Fail(error, "'max_output_tokens' must be a positive integer.", "max_output_tokens");
    }
    c["max_tokens"] = *mt;
  }
  for (const char* k : {"temperature", "top_p"}) {
    if (auto it = b.find(k); it != b.end() && !it->is_null()) {
      if (!it->is_number()) return Fail(error, std::string("'") + k + "' must be a number.", k);
      c[k] = *it;
    }
  }
  if (out->stream) {
    c["stream"] = true;
    c["stream_options"] = ordered_json{{"include_usage", true}};
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null()) {
    if (tc->is_string() && (*tc == "auto" || *tc == "none")) {
      c["tool_choice"] = *tc;
    } else {
      return Fail(error, "tool_choice: only 'auto' and 'none' are supported on the token path (a forced tool call is not).",
                  "tool_choice");
    }
  }
  if (auto tools = b.find("tools"); tools != b.end() && !tools->is_null()) {
    if (!tools->is_array()) return Fail(error, "'tools' must be a list.", "tools");
    ordered_json list = ordered_json::array();
    std::unordered_set<std::string> plain_names;  // a namespace tool's flattened name may be one of these
    for (const auto& t : *tools) {
      if (!t.is_object()) return Fail(error, "tools: every tool must be an object.", "tools");
      const std::string type = t.value("type", "");
      auto name = t.find("name");
      if (type == "namespace") {
        // A namespace (Codex's MCP servers) becomes its function tools,
        // each named namespace__name; the answer names them back.
        if (name == t.end() || !name->is_string()) return Fail(error, "tools: a namespace needs a string 'name'.", "tools");
        auto inner = t.find("tools");
        if (inner == t.end() || !inner->is_array()) return Fail(error, "tools: a namespace needs a 'tools' list.", "tools");
        for (const auto& nt : *inner) {
          if (!nt.is_object()) return Fail(error, "tools: every tool must be an object.", "tools");
          if (nt.value("type", "") != "function") {
            ++out->hosted_tools_dropped;
            continue;
          }
          auto inner_name = nt.find("name");
          if (inner_name == nt.end() || !inner_name->is_string()) {
            return Fail(error, "tools: a function tool needs a string 'name'.", "tools");
          }
          const std::string full = NamespacedToolName(name->get<std::string>(), inner_name->get<std::string>());
          if (!FunctionTool(nt, full, &list, error)) return false;
          out->namespaced_tools.emplace(full, NamespacedTool{name->get<std::string>(), inner_name->get<std::string>()});
        }
        continue;
      }
      if (type != "function") {
        // Hosted tools (web_search, file_search, ...) and custom tools are
        // nothing the model can call here; Codex sends web_search on every
        // request, so an error would stop it.
        ++out->hosted_tools_dropped;
        continue;
      }
      if (name == t.end() || !name->is_string()) return Fail(error, "tools: a function tool needs a string 'name'.", "tools");
      if (!FunctionTool(t, name->get<std::string>(), &list, error)) return false;
      plain_names.insert(name->get<std::string>());
    }
    for (const auto& plain : plain_names) out->namespaced_tools.erase(plain);
    if (!list.empty()) c["tools"] = std::move(list);
  }
  if (auto text = b.find("text"); text != b.end() && text->is_object()) {
    if (auto fmt = text->find("format"); fmt != text->end() && fmt->is_object() && fmt->value("type", "text") != "text") {
      return Fail(error, "text.format '" + fmt->value("type", "") + "' (a forced output format) is not supported on the token path.",
                  "text");
    }
  }
  if (auto r = b.find("reasoning"); r != b.end() && r->is_object()) {
    if (auto effort = r->find("effort"); effort != r->end() && effort->is_string()) {
      c["chat_template_kwargs"] = ordered_json{{"reasoning_effort", *effort}};
    }
  }
  if (auto key = b.find("prompt_cache_key"); key != b.end() && key->is_string()) out->session_id = key->get<std::string>();
  for (const char* k : {"instructions", "tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p",
                        "max_output_tokens", "reasoning", "store", "metadata", "text", "truncation", "prompt_cache_key",
                        "previous_response_id"}) {
    if (auto it = b.find(k); it != b.end()) out->echo[k] = *it;
  }
  // Nothing is stored (previous_response_id is refused): the response says so.
  out->echo["store"] = false;
  out->chat = std::move(c);
  if (leftovers) *leftovers = std::make_shared<ordered_json>(std::move(b));
  return true;
}

}  // namespace toktier::api
